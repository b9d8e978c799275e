// Package mirrord embeds a mirrord node in a Go program: a Kafka-protocol
// node (topics, partitions, produce, fetch, transactions, consumer
// groups, ACLs) that mirrors topics of Kafka clusters byte for byte,
// with the source's offsets, and takes their writes at failover. The
// `mirrord` command is built on this package and on nothing else of the
// module.
//
// # Lifecycle
//
// Open a node on a data directory, serve the Kafka protocol on listeners
// the program owns, administer mirrors through Admin, read reports and
// metrics, and close:
//
//	logger, _ := mirrord.NewLogger(os.Stderr, "json", slog.LevelInfo)
//	props, err := mirrord.LoadProperties("/etc/mirrord/server.properties") // optional
//	node, err := mirrord.Open(mirrord.Config{DataDir: "/var/lib/mirrord", Logger: logger, Properties: props})
//	defer node.Close() // after serving has stopped
//
//	ln, err := net.Listen("tcp", "127.0.0.1:9092")
//	go node.Serve(ctx, ln) // PLAINTEXT until ctx is done
//	http.Handle("/", node.HTTPHandler()) // /metrics, /healthz and the web console
//
//	admin := node.Admin()
//	err = admin.CreateMirror(ctx, "dr", map[string]string{"bootstrap.servers": "kafka-1:9092"})
//	_, err = admin.SetTopicsDesiredState(ctx, "dr", mirrord.StartMirroring, mirrord.TopicSelection{Include: []string{"orders|pay-.*"}})
//	mirrors, err := admin.DescribeMirrors(ctx, []string{"dr"}, false) // partitions, states, offsets
//	// ... at failover: the topics become writable at the source's offsets
//	_, err = admin.SetTopicsDesiredState(ctx, "dr", mirrord.StopMirroring, mirrord.TopicSelection{Include: []string{"orders|pay-.*"}})
//
// Open replays the data directory and restarts the mirrors persisted
// there; a mirror's partitions walk to their desired state on their own
// (DESIGN.md's state machine: LOG_ALIGNMENT, MIRRORING, PAUSED, STOPPED,
// FAILED). Close stops the mirrors and syncs and closes the logs: cancel
// the serving contexts and let Serve return first.
//
// # Settings
//
// Config.Properties takes Kafka's server.properties names, the same keys
// `mirrord serve --config` reads: listeners, advertised.listeners,
// listener.security.protocol.map, ssl.* and listener.name.<l>.ssl.*, the
// SASL mechanisms (sasl.enabled.mechanisms, PLAIN, SCRAM-SHA-256/512,
// OAUTHBEARER with a refreshed JWKS), the connection limits
// (max.connections, max.connections.per.ip, queued.max.request.bytes,
// ...), message.max.bytes, log.retention.*, log.segment.bytes, the
// transaction coordinator's, log.cleaner.*, group.consumer.*,
// authorizer.class.name and super.users, and mirrord's own
// mirror.config.files.dir, log.dir.reserve.bytes, log.open.files.max and
// log.index.cache.max.bytes. A key mirrord does not take is an error
// naming it; PropertyDefaults has the defaults of the ones `mirrord
// serve` also takes as flags.
//
// # Listeners
//
// Serve serves PLAINTEXT on a net.Listener the program made.
// ServeListener serves on such a socket a listener the properties name,
// with its TLS and SASL (listeners=CLIENT://:9094 and
// listener.security.protocol.map=CLIENT:SASL_SSL name CLIENT); ListenAndServe binds and serves
// every listener of the properties, as `mirrord serve` does. All share
// the node's connection limits. Clients are told to connect to a
// listener's advertised.listeners address, else its socket's.
//
// # Mirrors
//
// Admin is the mirror administration, the same interface whether the
// node is in this process (Node.Admin) or reached over the network
// (Dial: a Client on the node's Kafka listener, taking the security
// properties Kafka's tools take; `mirrord mirrors` is built on it). A
// mirror is created with its source cluster's client config
// (bootstrap.servers, security.protocol, ssl.*, sasl.*, and mirrord's
// mirror.* keys); SetTopicsDesiredState starts, stops (failover),
// pauses, resumes and recovers its topics; DescribeMirrors reports each
// partition's state, offsets and error; DeleteMirror deletes a mirror
// whose topics are all STOPPED; OfflinePartitions lists the partitions
// whose log could not be opened.
//
// # Reports and metrics
//
// Node.Mirrors reports each mirror's partitions with their lag in
// records and in time; Node.Metrics is the Prometheus registry behind
// /metrics (mirrord_mirror_*); Node.Cluster is the node's cluster ID and
// address; NewLogger makes the text or JSON logger of `--log-format`.
package mirrord
