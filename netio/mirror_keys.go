package netio

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

import (
	"github.com/twmb/franz-go/pkg/kversion"
)

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
)

// mirrorKeyNames names the private keys.
var mirrorKeyNames = map[int16]string{
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

// MirrorKeyName returns the RPC name of a private mirror key, or "" for
// any other key.
func MirrorKeyName(key int16) string { return mirrorKeyNames[key] }

// mirrorMaxVersion is the highest (and only) version of every mirror RPC.
const mirrorMaxVersion = 0

// MirrorClientVersions returns the versions a franz-go client should be
// configured with (kgo.MaxVersions) to send the mirror RPCs: kgo refuses a
// request whose key its versions do not list. They are the stable Kafka
// versions plus the mirror keys.
func MirrorClientVersions() *kversion.Versions {
	versions := kversion.Stable()
	for key := range mirrorKeyNames {
		versions.SetMaxKeyVersion(key, mirrorMaxVersion)
	}
	return versions
}
