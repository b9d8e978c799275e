package mirrorwire

// The API keys of the mirror admin RPCs (KIP-1279 "Cluster Mirroring").
//
// Upstream has not assigned keys to these RPCs: the KIP author's prototype
// branch numbers them 94-106, numbers Kafka will hand to other APIs. mirrord
// uses a private range from 1000 instead, far above any key Kafka has used,
// so that a Kafka client never mistakes them for a standard API. This file
// is the only place the numbers are written: change them here when upstream
// assigns keys (the messages, handlers, ApiVersions and the CLI follow).
//
//	key   RPC                      prototype key
//	1000  CreateClusterMirror      94
//	1001  DeleteClusterMirror      104
//	1002  StartMirrorTopics        95
//	1003  StopMirrorTopics         96
//	1004  PauseMirrorTopics        102
//	1005  ResumeMirrorTopics       103
//	1006  RecoverMirrorTopics      106
//	1007  ListClusterMirrors       98
//	1008  DescribeClusterMirrors   99
//
// Every one has version 0 only, flexible (KIP-482).

const (
	CreateClusterMirrorKey    int16 = 1000
	DeleteClusterMirrorKey    int16 = 1001
	StartMirrorTopicsKey      int16 = 1002
	StopMirrorTopicsKey       int16 = 1003
	PauseMirrorTopicsKey      int16 = 1004
	ResumeMirrorTopicsKey     int16 = 1005
	RecoverMirrorTopicsKey    int16 = 1006
	ListClusterMirrorsKey     int16 = 1007
	DescribeClusterMirrorsKey int16 = 1008

	// FirstKey and LastKey bound the private keys: every key from one
	// to the other is a mirror RPC.
	FirstKey = CreateClusterMirrorKey
	LastKey  = DescribeClusterMirrorsKey
)

// MaxVersion is the highest (and only) version of every mirror RPC.
const MaxVersion = 0

// keyNames names the private keys.
var keyNames = map[int16]string{
	CreateClusterMirrorKey:    "CreateClusterMirror",
	DeleteClusterMirrorKey:    "DeleteClusterMirror",
	StartMirrorTopicsKey:      "StartMirrorTopics",
	StopMirrorTopicsKey:       "StopMirrorTopics",
	PauseMirrorTopicsKey:      "PauseMirrorTopics",
	ResumeMirrorTopicsKey:     "ResumeMirrorTopics",
	RecoverMirrorTopicsKey:    "RecoverMirrorTopics",
	ListClusterMirrorsKey:     "ListClusterMirrors",
	DescribeClusterMirrorsKey: "DescribeClusterMirrors",
}

// KeyName returns the RPC name of a private mirror key, or "" for any
// other key.
func KeyName(key int16) string { return keyNames[key] }

// TopicsChange is what a topic-state RPC asks of a mirror's topics: each
// change has its own key.
type TopicsChange int8

const (
	// StartMirroring adds the topics to the mirror, desired MIRRORING
	// (failback, for a topic that was stopped).
	StartMirroring TopicsChange = iota + 1
	// StopMirroring sets desired STOPPED: the topics become writable
	// (failover).
	StopMirroring
	// PauseMirroring sets desired PAUSED: fetching stops, the topics stay
	// read-only.
	PauseMirroring
	// ResumeMirroring sets desired MIRRORING again for paused topics.
	ResumeMirroring
	// RecoverMirroring makes FAILED partitions retry now, including
	// failures that wait for an operator; the desired state is kept.
	RecoverMirroring
)

var topicsChangeNames = [...]string{"", "start", "stop", "pause", "resume", "recover"}

func (c TopicsChange) String() string {
	if c < StartMirroring || c > RecoverMirroring {
		return "unknown"
	}
	return topicsChangeNames[c]
}

// topicsChangeKeys maps a topic-state change to its key.
var topicsChangeKeys = map[TopicsChange]int16{
	StartMirroring:   StartMirrorTopicsKey,
	StopMirroring:    StopMirrorTopicsKey,
	PauseMirroring:   PauseMirrorTopicsKey,
	ResumeMirroring:  ResumeMirrorTopicsKey,
	RecoverMirroring: RecoverMirrorTopicsKey,
}

// Key returns the key of the RPC that asks for c, or -1 for no change.
func (c TopicsChange) Key() int16 {
	if key, ok := topicsChangeKeys[c]; ok {
		return key
	}
	return -1
}

// topicsChangeForKey returns the change a topic-state key asks for, or 0.
func topicsChangeForKey(key int16) TopicsChange {
	for change, k := range topicsChangeKeys {
		if k == key {
			return change
		}
	}
	return 0
}
