package netio

import (
	"github.com/mirrord/mirrord/mirrorwire"
)

// OfflineLister is implemented by a Backend that can hold offline
// partitions: partitions whose log could not be opened. Their Partition
// calls return an error wrapping ErrStorage, so every API that
// names one answers KAFKA_STORAGE_ERROR and Metadata answers it as Kafka
// answers the only replica in a failed log dir; DescribeClusterMirrors
// lists them with their errors (mirrors --describe shows them first).
type OfflineLister interface {
	OfflineLogs() []OfflineLog
}

// OfflineLog is one offline partition and what failed.
type OfflineLog struct {
	Topic     string
	Partition int32
	Error     string
}

// describedOffline lists the backend's offline partitions the client may
// describe.
func describedOffline(c *conn) []mirrorwire.DescribeClusterMirrorsOfflinePartition {
	lister, ok := c.server.backend.(OfflineLister)
	if !ok {
		return nil
	}
	var out []mirrorwire.DescribeClusterMirrorsOfflinePartition
	for _, o := range lister.OfflineLogs() {
		if c.authorizeQuietly(opDescribe, resourceTopic, o.Topic) {
			out = append(out, mirrorwire.DescribeClusterMirrorsOfflinePartition{TopicName: o.Topic, PartitionIndex: o.Partition, ErrorMessage: o.Error})
		}
	}
	return out
}
