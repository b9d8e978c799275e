package main

import (
	"context"
	"fmt"
	"github.com/mirrord/mirrord"
	"io"
	"regexp"
	"text/tabwriter"
	"time"
)

// stopLag is one partition of `--stop --dry-run`: what a stop now would
// leave behind on the source.
type stopLag struct {
	Topic               string `json:"topic"`
	Partition           int32  `json:"partition"`
	State               string `json:"state"`
	SourceHighWatermark int64  `json:"sourceHighWatermark"`
	LogEndOffset        int64  `json:"logEndOffset"`
	LagRecords          int64  `json:"lagRecords"` // -1: unknown, or only a lower bound is known
	LagMillis           int64  `json:"lagMillis"`  // -1: unknown
	// LagRecordsAtLeast is what is known: LagRecords, or the lower bound
	// when the source high watermark is SourceHighWatermarkAgeMillis old,
	// past the staleness bound; -1 when unknown.
	LagRecordsAtLeast            int64 `json:"lagRecordsAtLeast"`
	SourceHighWatermarkAgeMillis int64 `json:"sourceHighWatermarkAgeMillis"`
}

// stopSource is what the dry run knows of the source: when it stopped
// answering (-1: it answers) and why.
type stopSource struct {
	UnreachableSinceMillis int64  `json:"-"`
	UnreachableSince       string `json:"sourceUnreachableSince,omitempty"` // RFC 3339
	Error                  string `json:"sourceError,omitempty"`
}

// stopDryRun reports, per partition of the topics --stop selects, the lag
// in records and in time a stop now would leave behind. It stops nothing.
func stopDryRun(ctx context.Context, admin mirrord.Admin, opts mirrorsOptions, out io.Writer) error {
	selects, err := topicSelector(opts)
	if err != nil {
		return err
	}
	descriptions, err := admin.DescribeMirrors(ctx, []string{opts.mirror}, false)
	if err != nil {
		return fmt.Errorf("stop --dry-run: %w", err)
	}
	lags := []stopLag{}
	source := stopSource{UnreachableSinceMillis: -1}
	var groups *describedGroupSync
	now := time.Now()
	for _, m := range descriptions {
		if m.Err != nil {
			return fmt.Errorf("stop --dry-run: mirror %q: %w", m.Name, m.Err)
		}
		if !m.SourceUnreachableSince.IsZero() {
			source = stopSource{UnreachableSinceMillis: m.SourceUnreachableSince.UnixMilli(), Error: m.SourceError,
				UnreachableSince: m.SourceUnreachableSince.UTC().Format(time.RFC3339Nano)}
		}
		groups = groupSyncOf(m.GroupSync, now)
		for _, p := range m.Partitions {
			if !selects(p.Topic) {
				continue
			}
			lags = append(lags, stopLag{Topic: p.Topic, Partition: p.Partition, State: p.State,
				SourceHighWatermark: p.SourceHighWatermark, LogEndOffset: p.LogEndOffset, LagRecords: p.Lag(), LagMillis: millisOf(p.LagTime),
				LagRecordsAtLeast: p.LagAtLeast(), SourceHighWatermarkAgeMillis: millisOf(p.SourceHighWatermarkAge)})
		}
	}
	if opts.json {
		return writeJSON(out, struct {
			Mirror string `json:"mirror"`
			stopSource
			Partitions []stopLag `json:"partitions"`
			// GroupSync: per group, the offsets a consumer moved here
			// reads again, as of the last sync round.
			GroupSync *describedGroupSync `json:"groupSync,omitempty"`
		}{opts.mirror, source, lags, groups})
	}
	if err := printStopLags(out, opts.mirror, source, lags, now); err != nil {
		return err
	}
	return printStopGroupLags(out, groups, now)
}

// printStopLags prints the dry run's table and summary; now is the
// reader's clock, to date the source's last answer.
func printStopLags(out io.Writer, mirror string, source stopSource, lags []stopLag, now time.Time) error {
	if len(lags) == 0 {
		_, err := fmt.Fprintf(out, "Mirror %s: no mirrored partition matched; a stop would change nothing.\n", mirror)
		return err
	}
	table := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(table, "TOPIC\tPARTITION\tSTATE\tSOURCE-HW\tLOCAL-LEO\tLAG-RECORDS\tLAG-TIME")
	var records int64
	var worst time.Duration
	unknown, lowerBounds := 0, 0
	oldest := int64(-1) // the age of the oldest stale source high watermark, in milliseconds
	for _, l := range lags {
		lagTime := "-"
		if l.LagMillis >= 0 {
			lagTime = (time.Duration(l.LagMillis) * time.Millisecond).String()
			worst = max(worst, time.Duration(l.LagMillis)*time.Millisecond)
		}
		switch {
		case l.LagRecords >= 0:
			records += l.LagRecords
		case l.LagRecordsAtLeast >= 0:
			records += l.LagRecordsAtLeast
			lowerBounds++
			oldest = max(oldest, l.SourceHighWatermarkAgeMillis)
		case !isStopped(l.State):
			unknown++
		}
		fmt.Fprintf(table, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", l.Topic, l.Partition, l.State,
			offsetText(l.SourceHighWatermark), offsetText(l.LogEndOffset), lagText(l.LagRecords, l.LagRecordsAtLeast), lagTime)
	}
	if err := table.Flush(); err != nil {
		return err
	}
	var summary string
	if lowerBounds == 0 {
		summary = fmt.Sprintf("A stop now would leave %d records behind on the source (largest lag in time %v).", records, worst)
	} else {
		// Say plainly that the figure is a floor, and since when the
		// source has been silent.
		silentSince := "an unknown time"
		if oldest >= 0 {
			silentSince = now.Add(-time.Duration(oldest) * time.Millisecond).UTC().Format(time.RFC3339)
		}
		summary = fmt.Sprintf("A stop now would leave at least %d records behind on the source (largest lag in time at least %v); "+
			"the source has not answered since %s for %d partitions, so their lag is a lower bound.", records, worst, silentSince, lowerBounds)
	}
	if text := unreachableText(source.UnreachableSinceMillis, source.Error, now); text != "" {
		summary += " The " + text + "."
	}
	if unknown > 0 {
		summary += fmt.Sprintf(" %d partitions have no source high watermark yet: their lag is unknown.", unknown)
	}
	_, err := fmt.Fprintln(out, summary+" Nothing was stopped (--dry-run).")
	return err
}

// topicSelector matches topics as --topics and --exclude select them:
// names, and regular expressions matched against whole names.
func topicSelector(opts mirrorsOptions) (func(string) bool, error) {
	names := map[string]bool{}
	var include, exclude []*regexp.Regexp
	for _, item := range splitMirrorsList(opts.topics) {
		if isTopicName(item) {
			names[item] = true
			continue
		}
		re, err := regexp.Compile("^(?:" + item + ")$")
		if err != nil {
			return nil, fmt.Errorf("--topics pattern %q: %v", item, err)
		}
		include = append(include, re)
	}
	for _, item := range splitMirrorsList(opts.exclude) {
		re, err := regexp.Compile("^(?:" + item + ")$")
		if err != nil {
			return nil, fmt.Errorf("--exclude pattern %q: %v", item, err)
		}
		exclude = append(exclude, re)
	}
	return func(topic string) bool {
		for _, re := range exclude {
			if re.MatchString(topic) {
				return false
			}
		}
		if names[topic] {
			return true
		}
		for _, re := range include {
			if re.MatchString(topic) {
				return true
			}
		}
		return false
	}, nil
}

// isStopped: the wire's state name is STOPPED.
func isStopped(name string) bool {
	state, _ := mirrord.ParsePartitionState(name)
	return state == mirrord.Stopped
}
