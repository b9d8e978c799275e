package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"text/tabwriter"
	"time"

	"github.com/mirrord/mirrord/netio"
)

// stopLag is one partition of `--stop --dry-run`: what a stop now would
// leave behind on the source.
type stopLag struct {
	Topic               string `json:"topic"`
	Partition           int32  `json:"partition"`
	State               string `json:"state"`
	SourceHighWatermark int64  `json:"sourceHighWatermark"`
	LogEndOffset        int64  `json:"logEndOffset"`
	LagRecords          int64  `json:"lagRecords"` // -1: unknown
	LagMillis           int64  `json:"lagMillis"`  // -1: unknown
}

// stopDryRun reports, per partition of the topics --stop selects, the lag
// in records and in time a stop now would leave behind. It stops nothing.
func stopDryRun(ctx context.Context, client *mirrorsClient, opts mirrorsOptions, out io.Writer) error {
	selects, err := topicSelector(opts)
	if err != nil {
		return err
	}
	resp, err := client.request(ctx, &netio.DescribeClusterMirrorsRequest{MirrorNames: []string{opts.mirror}})
	if err != nil {
		return err
	}
	r := resp.(*netio.DescribeClusterMirrorsResponse)
	if err := kafkaError(r.ErrorCode, r.ErrorMessage); err != nil {
		return fmt.Errorf("stop --dry-run: %w", err)
	}
	lags := []stopLag{}
	for _, m := range r.Mirrors {
		if err := kafkaError(m.ErrorCode, m.ErrorMessage); err != nil {
			return fmt.Errorf("stop --dry-run: mirror %q: %w", m.MirrorName, err)
		}
		for _, t := range m.Topics {
			if !selects(t.TopicName) {
				continue
			}
			for _, p := range t.Partitions {
				lags = append(lags, stopLag{Topic: t.TopicName, Partition: p.PartitionIndex, State: p.StateValue,
					SourceHighWatermark: p.SourceOffset, LogEndOffset: p.DestinationOffset, LagRecords: p.Lag, LagMillis: p.LagMillis})
			}
		}
	}
	if opts.json {
		encoder := json.NewEncoder(out)
		encoder.SetIndent("", "  ")
		return encoder.Encode(struct {
			Mirror     string    `json:"mirror"`
			Partitions []stopLag `json:"partitions"`
		}{opts.mirror, lags})
	}
	return printStopLags(out, opts.mirror, lags)
}

func printStopLags(out io.Writer, mirror string, lags []stopLag) error {
	if len(lags) == 0 {
		_, err := fmt.Fprintf(out, "Mirror %s: no mirrored partition matched; a stop would change nothing.\n", mirror)
		return err
	}
	table := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(table, "TOPIC\tPARTITION\tSTATE\tSOURCE-HW\tLOCAL-LEO\tLAG-RECORDS\tLAG-TIME")
	var records int64
	var worst time.Duration
	unknown := 0
	for _, l := range lags {
		lagTime := "-"
		if l.LagMillis >= 0 {
			lagTime = (time.Duration(l.LagMillis) * time.Millisecond).String()
			worst = max(worst, time.Duration(l.LagMillis)*time.Millisecond)
		}
		if l.LagRecords >= 0 {
			records += l.LagRecords
		} else if l.State != "STOPPED" {
			unknown++
		}
		fmt.Fprintf(table, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", l.Topic, l.Partition, l.State,
			offsetText(l.SourceHighWatermark), offsetText(l.LogEndOffset), offsetText(l.LagRecords), lagTime)
	}
	if err := table.Flush(); err != nil {
		return err
	}
	summary := fmt.Sprintf("A stop now would leave %d records behind on the source (largest lag in time %v).", records, worst)
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
