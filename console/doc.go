// Package console is the node's web console and its status views, served
// on the HTTP listener beside /metrics and /healthz:
//
//	/             the page (assets/index.html, console.js, console.css,
//	              embedded: no CDN, no build step); a client that accepts
//	              text/plain and not text/html gets /status.txt instead
//	/status.txt   the plain-text status page
//	/status.json  the model both views render (Status)
//
// The page shows the node (ID, cluster ID, address, log dir space), the
// FAILED partitions first with their error, attempts and the state they
// failed from, the offline partitions, then each mirror: its source and
// whether it answers, its partitions per state, its group offset, topic
// config, ACL and transactional ID syncs, each partition's state, lag in
// records and in time and throughput, charts of the mirror's lag and
// throughput over the last hour, and the failover dry run (what `mirrord
// mirrors --stop --dry-run` reports; acting stays in the CLI). It fetches
// /status.json every few seconds and redraws itself.
//
// The console reads a node through Source (*engine.Node satisfies it) and
// changes nothing. Its one piece of state is the history: per mirror, a
// fixed-size ring of samples (Options.Samples, one per
// Options.SampleInterval: by default 360 of 10 seconds, the last hour) of
// the total lag in records, the largest lag in time and the bytes
// appended per second, the throughput coming from the differences of the
// partitions' byte counters between samples. Run takes the samples; a
// mirror gone from the node is dropped at the next sample, so memory is
// bounded by the node's mirrors times the ring's size plus one counter
// per mirrored partition.
package console
