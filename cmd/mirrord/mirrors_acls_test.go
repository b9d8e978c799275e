package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/mirrord/mirrord"
)

func TestACLSyncLines(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 10, 0, time.UTC)
	errText := "SECURITY_DISABLED: this node has no authorizer"
	rows := []struct {
		name string
		sync *mirrord.MirrorACLSync
		want string
	}{
		{"none", nil, ""},
		{"before the first round", &mirrord.MirrorACLSync{},
			"\nACL sync:\nMirror m: no ACL sync round yet\n"},
		{"off", &mirrord.MirrorACLSync{Error: errText},
			"\nACL sync:\nMirror m: no ACL sync round: " + errText + "\n"},
		{"a round", &mirrord.MirrorACLSync{At: now.Add(-2 * time.Second), Duration: 7 * time.Millisecond, Synced: 3, FailedRounds: 1},
			"\nACL sync:\nMirror m: ACLs synced 2026-05-01T12:00:08Z (2s ago, took 7ms): 3 ACLs of the source held here; 1 rounds failed\n"},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := printACLSyncs(&out, []describedMirror{{Mirror: "m", ACLSync: aclSyncOf(row.sync, now)}}, now); err != nil {
				t.Fatal(err)
			}
			if out.String() != row.want {
				t.Fatalf("got\n%q\nwant\n%q", out.String(), row.want)
			}
		})
	}
}
