package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mirrord/mirrord"
)

// describedACLSync is a mirror's last ACL sync round, in --json as
// "aclSync" (absent from a node that does not report it).
type describedACLSync struct {
	// LastSync is when the round ended (RFC 3339), absent before the
	// first round; LastSyncAgeMillis is how long ago, -1 before it.
	LastSync          string `json:"lastSync,omitempty"`
	LastSyncAgeMillis int64  `json:"lastSyncAgeMillis"`
	DurationMillis    int64  `json:"durationMillis"`
	ACLsSynced        int32  `json:"aclsSynced"`   // source ACLs selected that the node holds
	FailedRounds      int64  `json:"failedRounds"` // since the mirror started
	Error             string `json:"error,omitempty"`
}

// aclSyncOf is an ACL sync round as shown, nil for none; now is the
// reader's clock, to age the round.
func aclSyncOf(s *mirrord.MirrorACLSync, now time.Time) *describedACLSync {
	if s == nil {
		return nil
	}
	d := &describedACLSync{LastSyncAgeMillis: -1, DurationMillis: s.Duration.Milliseconds(), ACLsSynced: clampInt32(s.Synced),
		FailedRounds: s.FailedRounds, Error: s.Error}
	if !s.At.IsZero() {
		d.LastSync = s.At.UTC().Format(time.RFC3339Nano)
		d.LastSyncAgeMillis = max(now.Sub(s.At).Milliseconds(), 0)
	}
	return d
}

// aclSyncLine is one line on the round: "ACLs synced T (D ago, took D):
// N ACLs", the failures after it; or that the sync is off or has not run.
func aclSyncLine(lastSync time.Time, took time.Duration, synced int, failedRounds int64, roundError string, now time.Time) string {
	if lastSync.IsZero() {
		if roundError != "" {
			return "no ACL sync round: " + oneLine(roundError)
		}
		return "no ACL sync round yet"
	}
	text := fmt.Sprintf("ACLs synced %s (%s ago, took %s): %d ACLs of the source held here",
		lastSync.UTC().Format(time.RFC3339), ageText(max(now.Sub(lastSync).Milliseconds(), 0)), took.Round(time.Millisecond), synced)
	if failedRounds > 0 {
		text += fmt.Sprintf("; %d rounds failed", failedRounds)
	}
	if roundError != "" {
		text += "; the last round failed: " + oneLine(roundError)
	}
	return text
}

// printACLSyncs prints, below --describe's tables, each mirror's ACL
// sync round; nothing when no mirror reports one.
func printACLSyncs(out io.Writer, mirrors []describedMirror, now time.Time) error {
	var lines []string
	for _, m := range mirrors {
		s := m.ACLSync
		if s == nil {
			continue
		}
		var at time.Time
		if s.LastSyncAgeMillis >= 0 {
			at = now.Add(-time.Duration(s.LastSyncAgeMillis) * time.Millisecond)
		}
		lines = append(lines, fmt.Sprintf("Mirror %s: %s", m.Mirror,
			aclSyncLine(at, time.Duration(s.DurationMillis)*time.Millisecond, int(s.ACLsSynced), s.FailedRounds, s.Error, now)))
	}
	if len(lines) == 0 {
		return nil
	}
	_, err := io.WriteString(out, "\nACL sync:\n"+strings.Join(lines, "\n")+"\n")
	return err
}
