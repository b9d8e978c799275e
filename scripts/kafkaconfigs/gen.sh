#!/bin/sh
# Regenerates broker/kafka_config_defs.go from the Kafka jars in .cache.
set -e
cd "$(dirname "$0")/../.."
libs=.cache/kafka-4.4.0/libs
out=$(mktemp -d)
javac -d "$out" -cp "$libs/*" scripts/kafkaconfigs/GenConfigDefs.java
java -cp "$libs/*:$out" GenConfigDefs 4.4.0 num.partitions auto.create.topics.enable offsets.retention.minutes \
	log.retention.check.interval.ms transaction.max.timeout.ms transaction.abort.timed.out.transaction.cleanup.interval.ms \
	transactional.id.expiration.ms producer.id.expiration.ms 2>/dev/null >broker/kafka_config_defs.go
gofmt -w broker/kafka_config_defs.go
rm -r "$out"
