package main

// The consumer group offset sync (KIP-1279) as `mirrors --describe`, the
// stop dry run and the status page show it: each mirror's last round
// (when, how long, groups synced and skipped, failures) and, per group,
// how far its synced offsets trail the source's commits. That offset lag
// is what a consumer moved here after a failover reads again: the
// duplicates.

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mirrord/mirrord"
)

// describedGroupSync is a mirror's last group sync round, in --json as
// "groupSync" (absent from a node that does not report it).
type describedGroupSync struct {
	// LastSync is when the round ended (RFC 3339), absent before the
	// first round; LastSyncAgeMillis is how long ago, -1 before it.
	LastSync          string `json:"lastSync,omitempty"`
	LastSyncAgeMillis int64  `json:"lastSyncAgeMillis"`
	DurationMillis    int64  `json:"durationMillis"`
	GroupsSynced      int32  `json:"groupsSynced"`
	GroupsSkipped     int32  `json:"groupsSkipped"` // members on this node
	FailedRounds      int64  `json:"failedRounds"`  // since the mirror started
	Error             string `json:"error,omitempty"`
	// Groups are the groups synced and skipped, by name.
	Groups []describedGroup `json:"groups"`
}

// describedGroup is one group of the round: its offset lag (the source's
// commits minus the synced offsets, over the mirror's MIRRORING
// partitions), -1 for a group skipped.
type describedGroup struct {
	Group     string `json:"group"`
	OffsetLag int64  `json:"offsetLag"`
	Skipped   bool   `json:"skipped,omitempty"`
}

// groupSyncOf is a group sync round as shown, nil for none; now is the
// reader's clock, to age the round.
func groupSyncOf(g *mirrord.MirrorGroupSync, now time.Time) *describedGroupSync {
	if g == nil {
		return nil
	}
	d := &describedGroupSync{LastSyncAgeMillis: -1, DurationMillis: g.Duration.Milliseconds(), GroupsSynced: clampInt32(g.Synced),
		GroupsSkipped: clampInt32(g.Skipped), FailedRounds: g.FailedRounds, Error: g.Error, Groups: []describedGroup{}}
	if !g.At.IsZero() {
		d.LastSync = g.At.UTC().Format(time.RFC3339Nano)
		d.LastSyncAgeMillis = max(now.Sub(g.At).Milliseconds(), 0)
	}
	for _, group := range g.Groups {
		d.Groups = append(d.Groups, describedGroup{Group: group.Group, OffsetLag: group.OffsetLag, Skipped: group.Skipped})
	}
	return d
}

// clampInt32 is n, or the int32 nearest it.
func clampInt32(n int) int32 {
	return int32(min(max(n, math.MinInt32), math.MaxInt32))
}

// groupSyncLine is one line on the round: "group offsets synced T (D
// ago, took D): N groups synced, M skipped (members on this node)", the
// failures after it; or that no round has run yet.
func groupSyncLine(lastSync time.Time, took time.Duration, synced, skipped int, failedRounds int64, roundError string, now time.Time) string {
	if lastSync.IsZero() {
		return "no group offset sync round yet"
	}
	text := fmt.Sprintf("group offsets synced %s (%s ago, took %s): %d groups synced, %d skipped (members on this node)",
		lastSync.UTC().Format(time.RFC3339), ageText(max(now.Sub(lastSync).Milliseconds(), 0)), took.Round(time.Millisecond), synced, skipped)
	if failedRounds > 0 {
		text += fmt.Sprintf("; %d rounds failed", failedRounds)
	}
	if roundError != "" {
		text += "; the last round failed: " + oneLine(roundError)
	}
	return text
}

// line is groupSyncLine of a described round.
func (g *describedGroupSync) line(now time.Time) string {
	var at time.Time
	if g.LastSyncAgeMillis >= 0 {
		at = now.Add(-time.Duration(g.LastSyncAgeMillis) * time.Millisecond)
	}
	return groupSyncLine(at, time.Duration(g.DurationMillis)*time.Millisecond, int(g.GroupsSynced), int(g.GroupsSkipped), g.FailedRounds, g.Error, now)
}

// printGroupSyncs prints, below --describe's table, each mirror's round
// and a table of the groups; nothing when no mirror reports a sync.
func printGroupSyncs(out io.Writer, mirrors []describedMirror, now time.Time) error {
	var lines []string
	table := &strings.Builder{}
	tw := tabwriter.NewWriter(table, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "MIRROR\tGROUP\tOFFSET-LAG\tSYNC")
	rows := 0
	for _, m := range mirrors {
		if m.GroupSync == nil {
			continue
		}
		lines = append(lines, fmt.Sprintf("Mirror %s: %s", m.Mirror, m.GroupSync.line(now)))
		for _, g := range m.GroupSync.Groups {
			sync := "synced"
			if g.Skipped {
				sync = "skipped: members on this node"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", m.Mirror, g.Group, offsetText(g.OffsetLag), sync)
			rows++
		}
	}
	if len(lines) == 0 {
		return nil
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	text := "\nConsumer group offset sync:\n" + strings.Join(lines, "\n") + "\n"
	if rows > 0 {
		text += table.String()
	}
	_, err := io.WriteString(out, text)
	return err
}

// printStopGroupLags prints the dry run's consumer groups: per group the
// offsets a consumer moved here after the stop would read again, as of
// the last sync round, and their sum.
func printStopGroupLags(out io.Writer, g *describedGroupSync, now time.Time) error {
	if g == nil {
		return nil // a node that does not report its group sync
	}
	if g.LastSyncAgeMillis < 0 {
		_, err := fmt.Fprintf(out, "Consumer groups: %s; how far their offsets here trail the source is unknown.\n", g.line(now))
		return err
	}
	table := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	if len(g.Groups) > 0 {
		fmt.Fprintln(table, "GROUP\tOFFSET-LAG")
	}
	var total int64
	largest := describedGroup{OffsetLag: -1}
	for _, group := range g.Groups {
		lag := offsetText(group.OffsetLag)
		if group.Skipped {
			lag = "- (members on this node: not synced)"
		} else {
			total += group.OffsetLag
			if group.OffsetLag > largest.OffsetLag {
				largest = group
			}
		}
		fmt.Fprintf(table, "%s\t%s\n", group.Group, lag)
	}
	if err := table.Flush(); err != nil {
		return err
	}
	summary := fmt.Sprintf("Consumer groups: as of the last group offset sync round, %s ago, their offsets here trail the source's commits by %d in total",
		ageText(g.LastSyncAgeMillis), total)
	if largest.OffsetLag > 0 {
		summary += fmt.Sprintf(" (most: %s, %d)", largest.Group, largest.OffsetLag)
	}
	summary += ": the records a consumer moved here after the stop reads again (over all of the mirror's MIRRORING topics; " +
		"commits on the source since that round add to it)."
	if g.GroupsSkipped > 0 {
		summary += fmt.Sprintf(" %d groups have members on this node and are not synced.", g.GroupsSkipped)
	}
	if g.Error != "" {
		summary += " The last round failed: " + oneLine(g.Error) + "."
	}
	_, err := fmt.Fprintln(out, summary)
	return err
}
