package netio

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/mirrorwire"
)

// api is one Kafka API this server answers: the versions it serves and
// its handler. A handler returns a kmsg.Response, a frameWriter, or nil
// (no response), or an error that closes the connection.
type api struct {
	minVersion, maxVersion int16
	serve                  func(ctx context.Context, c *conn, h RequestHeader, req kmsg.Request) (any, error)
}

const apiVersionsKey = 18

// apis is the dispatch table, by key; ApiVersions advertises it. Each
// handler lives in the file named after its key (00_produce.go, ...).
// The mirror admin RPCs have their own table (1000_mirror_admin.go).
var apis map[int16]api

func init() {
	apis = map[int16]api{
		0:  {3, 13, serveProduce},
		1:  {4, 18, serveFetch},
		2:  {1, 11, serveListOffsets},
		3:  {0, 13, serveMetadata},
		8:  {2, 9, serveOffsetCommit}, // v0-1 removed in Kafka 4.0 (KIP-896)
		9:  {1, 9, serveOffsetFetch},  // v0 removed in Kafka 4.0 (KIP-896)
		10: {0, 6, serveFindCoordinator},
		11: {0, 9, serveJoinGroup},
		12: {0, 4, serveHeartbeat},
		13: {0, 5, serveLeaveGroup},
		14: {0, 5, serveSyncGroup},
		15: {0, 5, serveDescribeGroups},
		16: {0, 5, serveListGroups},
		17: {0, 1, serveSASLHandshake},
		18: {0, 5, serveAPIVersionsWithMirrors},
		19: {2, 7, serveCreateTopics},
		20: {1, 6, serveDeleteTopics},
		21: {0, 2, serveDeleteRecords},
		22: {0, 5, serveInitProducerID},
		23: {2, 4, serveOffsetForLeaderEpoch}, // v0-1 removed in Kafka 4.0 (KIP-896)
		24: {0, 5, serveAddPartitionsToTxn},
		25: {0, 4, serveAddOffsetsToTxn},
		26: {0, 5, serveEndTxn},
		28: {0, 5, serveTxnOffsetCommit},
		29: {1, 3, serveDescribeACLs},    // v0 removed in Kafka 4.0 (KIP-896)
		30: {1, 3, serveCreateACLs},      // v0 removed in Kafka 4.0 (KIP-896)
		31: {1, 3, serveDeleteACLs},      // v0 removed in Kafka 4.0 (KIP-896)
		32: {1, 4, serveDescribeConfigs}, // v0 removed in Kafka 4.0 (KIP-896)
		33: {0, 2, serveAlterConfigs},
		36: {0, 2, serveSASLAuthenticate},
		37: {0, 3, serveCreatePartitions},
		42: {0, 2, serveDeleteGroups},
		44: {0, 1, serveIncrementalAlterConfigs},
		47: {0, 0, serveOffsetDelete},
		48: {0, 1, serveDescribeClientQuotas},
		50: {0, 0, serveDescribeUserScramCredentials},
		51: {0, 0, serveAlterUserScramCredentials},
		60: {0, 2, serveDescribeCluster},
		65: {0, 0, serveDescribeTransactions},
		66: {0, 2, serveListTransactions},
		68: {0, 1, serveConsumerGroupHeartbeat},
		69: {0, 1, serveConsumerGroupDescribe},
		75: {0, 0, serveDescribeTopicPartitions},
	}
}

// advertisedMinVersions are minimum versions ApiVersions advertises below
// the served ones, as Kafka 4.4 does: Produce v0-2 are advertised because
// librdkafka needs them listed (KAFKA-18659), and refused when sent.
var advertisedMinVersions = map[int16]int16{0: 0}

// requestForKey returns an empty request of key: mirrord's own for the
// private mirror admin keys (mirrorwire), else kmsg's.
func requestForKey(key int16) kmsg.Request {
	if req := mirrorwire.NewRequest(key); req != nil {
		return req
	}
	return kmsg.RequestForKey(key)
}

// advertisedKeys returns the ApiVersions entries, sorted by key.
func advertisedKeys() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(apis))
	for key, a := range apis {
		minVersion := a.minVersion
		if advertised, ok := advertisedMinVersions[key]; ok {
			minVersion = advertised
		}
		keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: key, MinVersion: minVersion, MaxVersion: a.maxVersion})
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ApiKey < keys[j].ApiKey })
	return keys
}
