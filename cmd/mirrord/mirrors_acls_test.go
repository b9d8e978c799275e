package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/mirrord/mirrord/mirrorwire"
)

func TestACLSyncLines(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 10, 0, time.UTC)
	errText := "SECURITY_DISABLED: this node has no authorizer"
	rows := []struct {
		name string
		wire *mirrorwire.DescribeClusterMirrorsACLSync
		want string
	}{
		{"none", nil, ""},
		{"before the first round", &mirrorwire.DescribeClusterMirrorsACLSync{LastSyncMillis: -1},
			"\nACL sync:\nMirror m: no ACL sync round yet\n"},
		{"off", &mirrorwire.DescribeClusterMirrorsACLSync{LastSyncMillis: -1, ErrorMessage: &errText},
			"\nACL sync:\nMirror m: no ACL sync round: " + errText + "\n"},
		{"a round", &mirrorwire.DescribeClusterMirrorsACLSync{LastSyncMillis: now.Add(-2 * time.Second).UnixMilli(), DurationMillis: 7, ACLsSynced: 3, FailedRounds: 1},
			"\nACL sync:\nMirror m: ACLs synced 2026-05-01T12:00:08Z (2s ago, took 7ms): 3 ACLs of the source held here; 1 rounds failed\n"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := printACLSyncs(&out, []describedMirror{{Mirror: "m", ACLSync: aclSyncOf(row.wire, now)}}, now); err != nil {
				t.Fatal(err)
			}
			if out.String() != row.want {
				t.Fatalf("got\n%q\nwant\n%q", out.String(), row.want)
			}
		})
	}
}
