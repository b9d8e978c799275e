package main

// `mirrord serve`'s flags are server.properties keys: serveProperties
// reads the --config file (mirrord.LoadProperties) and sets over it each
// flag given on the command line, under its Kafka name. The node's
// settings are then the embedding API's (mirrord.Open): flags and file
// take the same names, checks and defaults.
//
// --listen is the PLAINTEXT listener (with --advertise its advertised
// address), --ssl-listen an SSL listener whose --ssl-keystore,
// --ssl-key-password, --ssl-truststore, --ssl-client-auth and
// --ssl-principal-mapping-rules are the ssl.* configs, --sasl-listen a
// SASL_PLAINTEXT listener with --sasl-enabled-mechanisms; without a
// listeners key in the file, --listen's default is the one listener.

import (
	"flag"
	"fmt"
	"sort"
	"strings"

	"github.com/mirrord/mirrord"
)

// listenerFlagKeys are the ssl.* and sasl.* configs the listener flags
// set.
var listenerFlagKeys = map[string]string{
	"ssl-keystore":                "ssl.keystore.location",
	"ssl-key-password":            "ssl.key.password",
	"ssl-truststore":              "ssl.truststore.location",
	"ssl-client-auth":             "ssl.client.auth",
	"ssl-principal-mapping-rules": "ssl.principal.mapping.rules",
	"sasl-enabled-mechanisms":     "sasl.enabled.mechanisms",
}

// declareListenerFlags declares --ssl-listen, --sasl-listen and the
// --ssl-* and --sasl-* flags.
func declareListenerFlags(flags *flag.FlagSet) {
	flags.String("ssl-listen", "", "SSL listener HOST:PORT (empty: none)")
	flags.String("ssl-keystore", "", "PEM file of the SSL listener's certificate chain and private key (ssl.keystore.location)")
	flags.String("ssl-key-password", "", "password of an encrypted private key in the keystore (ssl.key.password)")
	flags.String("ssl-truststore", "", "PEM file of the CAs client certificates must chain to (ssl.truststore.location)")
	flags.String("ssl-client-auth", "", "required, requested or none (ssl.client.auth; default none)")
	flags.String("ssl-principal-mapping-rules", "", "principal names from client certificate subjects (ssl.principal.mapping.rules; default DEFAULT)")
	flags.String("sasl-listen", "", "SASL_PLAINTEXT listener HOST:PORT (empty: none)")
	flags.String("sasl-enabled-mechanisms", "", "the SASL listeners' mechanisms (sasl.enabled.mechanisms), e.g. PLAIN,SCRAM-SHA-512")
}

// propertyFlags are the node settings serve takes as flags too, by
// Kafka's name (the flag is the name with dashes for dots), with what
// they set.
var propertyFlags = map[string]string{
	"message.max.bytes":          "largest record batch a Produce may write to a topic without max.message.bytes",
	"transaction.max.timeout.ms": "the longest transaction timeout InitProducerID accepts",
	"transaction.abort.timed.out.transaction.cleanup.interval.ms": "how often timed-out transactions are aborted",
	"transactional.id.expiration.ms":                              "a transactional ID unused this long is forgotten",
	"producer.id.expiration.ms":                                   "a partition forgets an idle producer after this long",
	"log.cleaner.threads":                                         "log cleaner threads",
	"log.cleaner.dedupe.buffer.size":                              "bytes of the cleaners' offset maps",
	"log.cleaner.backoff.ms":                                      "a cleaner's wait when no log needs cleaning",
	"log.cleaner.io.max.bytes.per.second":                         "the cleaners' I/O rate (0: unlimited)",
	"group.consumer.session.timeout.ms":                           "consumer groups' (KIP-848) session timeout",
	"group.consumer.heartbeat.interval.ms":                        "consumer groups' (KIP-848) heartbeat interval, below the session timeout",
	"authorizer.class.name":                                       "org.apache.kafka.metadata.authorizer.StandardAuthorizer turns the ACL authorizer on (empty: none, everything allowed)",
	"super.users":                                                 "principals allowed everything, separated by semicolons (User:admin;User:ops)",
	"etcd.endpoints":                                              "etcd's HOST:PORT,... : the node joins the cluster kept there (empty: it runs alone)",
	"node.id":                                                     "the node's ID in its cluster (with --etcd-endpoints)",
	"node.lease.ms":                                               "how long a cluster node stays registered without renewing its lease",
	"default.replication.factor":                                  "replicas of a new topic in a cluster, capped by the live nodes",
	"broker.rack":                                                 "the node's rack: a cluster spreads replicas over racks",
	"replica.lag.time.max.ms":                                     "a cluster's follower not caught up for this long leaves the ISR",
}

// propertyFlagName is a property's flag: its name with dashes for dots.
func propertyFlagName(property string) string { return strings.ReplaceAll(property, ".", "-") }

// declarePropertyFlags declares the property flags, with the node's
// defaults (mirrord.PropertyDefaults) as theirs.
func declarePropertyFlags(flags *flag.FlagSet) {
	defaults := mirrord.PropertyDefaults()
	names := make([]string, 0, len(propertyFlags))
	for name := range propertyFlags {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		flags.String(propertyFlagName(name), defaults[name], "Kafka's "+name+": "+propertyFlags[name])
	}
	flags.Bool("log-cleaner-enable", true, "Kafka's log.cleaner.enable: compact topics with cleanup.policy=compact")
	flags.Bool("allow-everyone-if-no-acl-found", false, "Kafka's allow.everyone.if.no.acl.found: a resource without ACLs is open to all")
}

// serveProperties reads the config file (none when path is "") and sets
// the flags given on the command line over it; listen is --listen's
// value, the one listener when the file names none.
func serveProperties(path, listen string, flags *flag.FlagSet) (map[string]string, error) {
	props := map[string]string{}
	if path != "" {
		var err error
		if props, err = mirrord.LoadProperties(path); err != nil {
			return nil, fmt.Errorf("serve: --config: %w", err)
		}
	}
	given := map[string]string{}
	flags.Visit(func(f *flag.Flag) { given[f.Name] = f.Value.String() })
	for name := range propertyFlags {
		if value, ok := given[propertyFlagName(name)]; ok {
			props[name] = value
		}
	}
	for _, name := range []string{"log.cleaner.enable", "allow.everyone.if.no.acl.found"} {
		if value, ok := given[propertyFlagName(name)]; ok {
			props[name] = value
		}
	}
	for name, key := range listenerFlagKeys {
		if value, ok := given[name]; ok {
			props[key] = value
		}
	}
	if _, ok := props["listeners"]; !ok {
		props["listeners"] = "PLAINTEXT://" + listen
	}
	for flagName, listener := range map[string]string{"listen": "PLAINTEXT", "ssl-listen": "SSL", "sasl-listen": "SASL_PLAINTEXT"} {
		if address := given[flagName]; address != "" {
			if err := mirrord.SetListener(props, listener, address, ""); err != nil {
				return nil, fmt.Errorf("serve: --%s: %w", flagName, err)
			}
		}
	}
	if address := given["advertise"]; address != "" {
		if err := mirrord.SetListener(props, "PLAINTEXT", "", address); err != nil {
			return nil, fmt.Errorf("serve: --advertise: %w", err)
		}
	}
	return props, nil
}
