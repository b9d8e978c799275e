package main

// `mirrord mirrors --describe [--watch]`: every mirrored partition's
// state, offsets, lag in records and in time and leader epochs (on a
// cluster also its leader and ISR), the node's offline partitions first
// and each mirror's sync rounds after, as a table or --json; --watch
// repeats it.

import (
	"bytes"
	"context"
	"fmt"
	"github.com/mirrord/mirrord"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// offsetText prints an offset, epoch or lag, "-" when unknown (-1).
func offsetText(v int64) string {
	if v < 0 {
		return "-"
	}
	return strconv.FormatInt(v, 10)
}

// lagText prints a lag in records: exact, "at least" for a lower bound
// (lag -1 and lowerBound >= 0), or "-" when unknown.
func lagText(lag, lowerBound int64) string {
	if lag < 0 && lowerBound >= 0 {
		return ">= " + strconv.FormatInt(lowerBound, 10)
	}
	return offsetText(lag)
}

// ageText prints how long ago something was (milliseconds): whole
// seconds from a second on, "-" when unknown (-1).
func ageText(millis int64) string {
	if millis < 0 {
		return "-"
	}
	d := time.Duration(millis) * time.Millisecond
	if d >= time.Second {
		d = d.Round(time.Second)
	}
	return d.String()
}

// millisOf is d in milliseconds, -1 for a negative d (unknown).
func millisOf(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return d.Milliseconds()
}

// unreachableText is "source unreachable since T (D ago): ERROR", or ""
// for a source that answers (sinceMillis -1). now is the reader's clock.
func unreachableText(sinceMillis int64, sourceError string, now time.Time) string {
	if sinceMillis < 0 {
		return ""
	}
	since := time.UnixMilli(sinceMillis)
	text := fmt.Sprintf("source unreachable since %s (%s ago)", since.UTC().Format(time.RFC3339), ageText(max(now.Sub(since).Milliseconds(), 0)))
	if sourceError != "" {
		text += ": " + oneLine(sourceError)
	}
	return text
}

// describedPartition is one row of --describe, and its JSON form. Lag is
// exact or -1; LagAtLeast is what is known: Lag, a lower bound when the
// source high watermark is stale (Lag then -1), or -1 when unknown.
type describedPartition struct {
	Mirror              string `json:"mirror"`
	Topic               string `json:"topic"`
	Partition           int32  `json:"partition"`
	State               string `json:"state"`
	SourceHighWatermark int64  `json:"sourceHighWatermark"`
	// SourceHighWatermarkAgeMillis: how long ago the source told it.
	SourceHighWatermarkAgeMillis int64 `json:"sourceHighWatermarkAgeMillis"`
	LogEndOffset                 int64 `json:"logEndOffset"`
	Lag                          int64 `json:"lag"`
	LagAtLeast                   int64 `json:"lagAtLeast"`
	// LagMillis is the lag in time: how long the partition has been
	// behind the source (0 when caught up), as mirrord_mirror_lag_seconds.
	LagMillis int64 `json:"lagMillis"`
	// LeaderEpoch is the local log's latest leader epoch (a mirrored
	// batch keeps the source's); SourceLeaderEpoch the source partition
	// leader's as last learned.
	LeaderEpoch       int32  `json:"leaderEpoch"`
	SourceLeaderEpoch int32  `json:"sourceLeaderEpoch"`
	Error             string `json:"error,omitempty"`
	RetryCount        int16  `json:"retryCount"`
	LastMirrorEpoch   int32  `json:"lastMirrorEpoch"`
	LastMirrorOffset  int64  `json:"lastMirrorOffset"`
	// Leader (-1: none, offline) and ISR are the partition's on a
	// cluster; both absent from a node alone's rows.
	Leader *int32  `json:"leader,omitempty"`
	ISR    []int32 `json:"isr,omitempty"`
}

// clustered reports whether the row is a cluster's: a partition there
// always has an ISR (its last leader stays in it when it goes).
func (row describedPartition) clustered() bool { return len(row.ISR) > 0 }

// describedMirror is one mirror of --describe --json; the source fields
// are set while the source does not answer.
type describedMirror struct {
	Mirror                 string `json:"mirror"`
	SourceBootstrap        string `json:"sourceBootstrap"`
	SourceClusterID        string `json:"sourceClusterId"`
	SourceUnreachableSince string `json:"sourceUnreachableSince,omitempty"` // RFC 3339
	SourceError            string `json:"sourceError,omitempty"`
	// GroupSync is the consumer group offset sync's last round.
	GroupSync *describedGroupSync `json:"groupSync,omitempty"`
	// ACLSync is the ACL sync's last round.
	ACLSync *describedACLSync `json:"aclSync,omitempty"`

	unreachableSince time.Time // SourceUnreachableSince, zero while the source answers
}

// describeOutput is the --describe --json document: the mirrors, and the
// rows of the table (-1 for what the table prints as "-").
type describeOutput struct {
	Offline    []describedOffline   `json:"offlinePartitions,omitempty"` // offline.go; absent when none
	Mirrors    []describedMirror    `json:"mirrors"`
	Partitions []describedPartition `json:"partitions"`
}

func describeMirrors(ctx context.Context, admin mirrord.Admin, opts mirrorsOptions, out io.Writer) error {
	described, now, err := describe(ctx, admin, opts)
	if err != nil {
		return err
	}
	return writeDescribe(out, opts, described, now)
}

// describe asks the node what --describe shows; now is when it answered,
// on the reader's clock.
func describe(ctx context.Context, admin mirrord.Admin, opts mirrorsOptions) (describeOutput, time.Time, error) {
	var names []string
	if opts.mirror != "" {
		names = []string{opts.mirror}
	}
	described := describeOutput{Mirrors: []describedMirror{}, Partitions: []describedPartition{}}
	offline, err := admin.OfflinePartitions(ctx)
	if err != nil {
		return described, time.Time{}, fmt.Errorf("describe: %w", err)
	}
	described.Offline = offlineRows(offline)
	descriptions, err := admin.DescribeMirrors(ctx, names, opts.failed)
	if err != nil {
		return described, time.Time{}, fmt.Errorf("describe: %w", err)
	}
	now := time.Now()
	for _, m := range descriptions {
		if m.Err != nil {
			return described, now, fmt.Errorf("describe mirror %q: %w", m.Name, m.Err)
		}
		mirror := describedMirror{Mirror: m.Name, SourceBootstrap: m.SourceBootstrap, SourceClusterID: m.SourceClusterID,
			GroupSync: groupSyncOf(m.GroupSync, now), ACLSync: aclSyncOf(m.ACLSync, now)}
		if !m.SourceUnreachableSince.IsZero() {
			mirror.unreachableSince = m.SourceUnreachableSince
			mirror.SourceUnreachableSince = m.SourceUnreachableSince.UTC().Format(time.RFC3339Nano)
			mirror.SourceError = m.SourceError
		}
		described.Mirrors = append(described.Mirrors, mirror)
		described.Partitions = append(described.Partitions, partitionRows(m)...)
	}
	return described, now, nil
}

// writeDescribe prints what describe found, as text or JSON; now is the
// reader's clock, to age what the node dated.
func writeDescribe(out io.Writer, opts mirrorsOptions, described describeOutput, now time.Time) error {
	if opts.json {
		return writeJSON(out, described)
	}
	if err := printOffline(out, described.Offline); err != nil {
		return err
	}
	for _, m := range described.Mirrors {
		if m.unreachableSince.IsZero() {
			continue
		}
		if _, err := fmt.Fprintf(out, "Mirror %s: %s\n", m.Mirror, unreachableText(m.unreachableSince.UnixMilli(), m.SourceError, now)); err != nil {
			return err
		}
	}
	if err := printDescribeTable(out, described.Partitions); err != nil {
		return err
	}
	if err := printGroupSyncs(out, described.Mirrors, now); err != nil {
		return err
	}
	return printACLSyncs(out, described.Mirrors, now)
}

// partitionRows are the rows of one described mirror.
func partitionRows(m mirrord.MirrorDescription) []describedPartition {
	var rows []describedPartition
	for _, p := range m.Partitions {
		var leader *int32
		if len(p.ISR) > 0 {
			leader = new(int32)
			*leader = max(p.Leader, -1)
		}
		rows = append(rows, describedPartition{
			Mirror: m.Name, Topic: p.Topic, Partition: p.Partition, State: p.State,
			SourceHighWatermark: p.SourceHighWatermark, SourceHighWatermarkAgeMillis: millisOf(p.SourceHighWatermarkAge),
			LogEndOffset: p.LogEndOffset, Lag: p.Lag(), LagAtLeast: p.LagAtLeast(), LagMillis: millisOf(p.LagTime),
			LeaderEpoch: max(p.LeaderEpoch, -1), SourceLeaderEpoch: max(p.SourceLeaderEpoch, -1),
			Error: p.Error, RetryCount: p.RetryCount, LastMirrorEpoch: p.LastMirrorEpoch, LastMirrorOffset: p.LastMirrorOffset,
			Leader: leader, ISR: p.ISR,
		})
	}
	return rows
}

// printDescribeTable prints the rows as a table; a FAILED row's ERROR
// says how often it was retried, or that it waits for --recover. A lag
// that is only a lower bound reads "lag >= N (source high watermark D
// ago)". On a cluster (any row with an ISR) LEADER and ISR follow
// PARTITION; a node alone's table has neither.
func printDescribeTable(out io.Writer, rows []describedPartition) error {
	table := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	clustered := slices.ContainsFunc(rows, describedPartition.clustered)
	placement := func(leader, isr string) string { // the LEADER and ISR cells, or none
		if !clustered {
			return ""
		}
		return leader + "\t" + isr + "\t"
	}
	fmt.Fprintln(table, "MIRROR\tTOPIC\tPARTITION\t"+placement("LEADER", "ISR")+"STATE\tSOURCE-HW\tLOCAL-LEO\tLAG\tLAG-TIME\tEPOCH\tSOURCE-EPOCH\tERROR")
	for _, row := range rows {
		problem := ""
		switch {
		case row.Error != "" && row.RetryCount < 0:
			problem = oneLine(row.Error) + " (waits for --recover)"
		case row.Error != "":
			problem = fmt.Sprintf("%s (retry %d)", oneLine(row.Error), row.RetryCount)
		}
		lag := lagText(row.Lag, row.LagAtLeast)
		if row.Lag < 0 && row.LagAtLeast >= 0 {
			lag = fmt.Sprintf("%s (source high watermark %s ago)", lag, ageText(row.SourceHighWatermarkAgeMillis))
		}
		leader := "-"
		if row.Leader != nil {
			leader = offsetText(int64(*row.Leader))
		}
		fmt.Fprintf(table, "%s\t%s\t%d\t%s%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", row.Mirror, row.Topic, row.Partition, placement(leader, isrText(row.ISR)), row.State,
			offsetText(row.SourceHighWatermark), offsetText(row.LogEndOffset), lag, ageText(row.LagMillis),
			offsetText(int64(row.LeaderEpoch)), offsetText(int64(row.SourceLeaderEpoch)), problem)
	}
	return table.Flush()
}

// isrText prints an ISR as Kafka's tools do ("1,2,3"), "-" when none.
func isrText(isr []int32) string {
	if len(isr) == 0 {
		return "-"
	}
	ids := make([]string, len(isr))
	for i, id := range isr {
		ids[i] = strconv.FormatInt(int64(id), 10)
	}
	return strings.Join(ids, ",")
}

// clearScreen moves a terminal's cursor home and clears the screen.
const clearScreen = "\x1b[H\x1b[2J"

// watchMirrors is --describe --watch: a snapshot every opts.interval
// until ctx ends (an interrupt: not an error) or opts.count snapshots
// (0: no bound). On a terminal each snapshot replaces the last; piped,
// each follows the last after a blank line, opened by a "# TIME" line
// (not with --json: each document stands alone). The first snapshot's
// failure ends the watch; a later one is shown as that snapshot, and the
// watch goes on (a node restarting answers again).
func watchMirrors(ctx context.Context, admin mirrord.Admin, opts mirrorsOptions, out io.Writer) error {
	redraw, _ := terminalWidth(out) // progress.go: a terminal is redrawn
	ticker := time.NewTicker(opts.interval)
	defer ticker.Stop()
	for n := 1; ; n++ {
		snapshotCtx, cancel := context.WithTimeout(ctx, mirrorsTimeout)
		described, now, err := describe(snapshotCtx, admin, opts)
		cancel()
		if ctx.Err() != nil {
			return nil // interrupted
		}
		var page bytes.Buffer
		switch {
		case err != nil && n == 1:
			return err
		case err != nil:
			now = time.Now()
			fmt.Fprintf(&page, "mirrors: %s\n", oneLine(err.Error()))
		default:
			if err := writeDescribe(&page, opts, described, now); err != nil {
				return err
			}
		}
		if err := writeSnapshot(out, opts, page.Bytes(), now, n, redraw); err != nil {
			return err
		}
		if opts.count > 0 && n >= opts.count {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

// writeSnapshot writes the nth snapshot of a watch, taken at now.
func writeSnapshot(out io.Writer, opts mirrorsOptions, page []byte, now time.Time, n int, redraw bool) error {
	var head string
	switch {
	case redraw:
		head = fmt.Sprintf("%sEvery %v: mirrord mirrors --describe  %s\n\n", clearScreen, opts.interval, now.Format(time.RFC3339))
	case n > 1 && opts.json:
		head = "\n"
	case n > 1:
		head = "\n# " + now.UTC().Format(time.RFC3339Nano) + "\n"
	case !opts.json:
		head = "# " + now.UTC().Format(time.RFC3339Nano) + "\n"
	}
	_, err := io.WriteString(out, head+string(page))
	return err
}
