package mirrorwire

import "github.com/twmb/franz-go/pkg/kbin"

// The node's offline partitions: mirrord's tag 1 of
// DescribeClusterMirrorsResponse (messages.go), so that mirrors
// --describe shows them first, mirrored or not.

// DescribeClusterMirrorsOfflinePartition is a partition of the node whose
// log could not be opened: it answers KAFKA_STORAGE_ERROR until it is
// rebuilt.
type DescribeClusterMirrorsOfflinePartition struct {
	TopicName      string
	PartitionIndex int32
	// ErrorMessage says what failed, naming the file.
	ErrorMessage string
}

func appendOfflinePartition(dst []byte, p *DescribeClusterMirrorsOfflinePartition) []byte {
	dst = kbin.AppendCompactString(dst, p.TopicName)
	dst = kbin.AppendInt32(dst, p.PartitionIndex)
	dst = kbin.AppendCompactString(dst, p.ErrorMessage)
	return appendNoTags(dst)
}

// offlinePartitionBytesMin is the smallest encoded offline partition:
// two empty compact strings, the index and an empty tag section.
const offlinePartitionBytesMin = 7

func readOfflinePartition(d *reader) DescribeClusterMirrorsOfflinePartition {
	p := DescribeClusterMirrorsOfflinePartition{TopicName: d.string(), PartitionIndex: d.Int32(), ErrorMessage: d.string()}
	d.skipTags()
	return p
}
