// Package kafkatest starts real Apache Kafka brokers (KRaft: combined
// controller+broker nodes, or brokers beside dedicated controller nodes) on
// loopback from the jars that scripts/install-kafka.sh resolves with Maven
// (kafkatest/pom.xml), and runs Kafka's own command-line tools from the
// same jars. The interop suite (e2e) and the benchmarks (bench) use it;
// nothing in mirrord's data path does.
//
// A Cluster's nodes keep their data folders across Kill and Restart, so a
// killed partition leader comes back as a follower with its log, as in
// production. With dedicated controllers (Options.Controllers) the KRaft
// quorum outlives the brokers, so a test can kill all but one of them and
// have the controller elect the survivor (an unclean election, when the
// topic allows it). Each node logs to a file in its folder; LogTail and
// Logs return the end of those logs for a failing test to print.
//
// Every wait has a deadline, every tool run a time and output bound, and a
// broker dies with the process that started it (PR_SET_PDEATHSIG).
package kafkatest
