package console

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText writes the plain-text status page of s: the node and its log
// dir, the offline partitions, the FAILED partitions with their errors,
// then each mirror with whether its source answers, its syncs in one
// line each, and its partitions' state, lag (in records and in time, as
// /metrics reports them; "-" while the source high watermark is unknown,
// ">=N" while it is older than the staleness bound, with its age beside
// it) and throughput.
func WriteText(w io.Writer, s Status) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "mirrord node %d, cluster %s, %s\n", s.Node.ID, s.Node.ClusterID, s.Node.Address)
	fmt.Fprintln(tw, logDirLine(s.Node.LogDir))
	if len(s.Offline) > 0 {
		fmt.Fprintf(tw, "\nOFFLINE: %d partition(s) whose log cannot be opened answer KAFKA_STORAGE_ERROR:\n", len(s.Offline))
		for _, o := range s.Offline {
			fmt.Fprintf(tw, "  %s-%d: %s\n", o.Topic, o.Partition, oneLine(o.Error))
		}
	}
	if len(s.Failed) > 0 {
		fmt.Fprintf(tw, "\nFAILED: %d partition(s):\n", len(s.Failed))
		for _, f := range s.Failed {
			fmt.Fprintf(tw, "  mirror %s, %s-%d: %s (%s)\n", f.Mirror, f.Topic, f.Partition, oneLine(f.Error), failedNote(f))
		}
	}
	if len(s.Mirrors) == 0 {
		fmt.Fprintln(tw, "\nno mirrors")
	}
	for _, m := range s.Mirrors {
		writeMirrorText(tw, m, s.At)
	}
	return tw.Flush()
}

// failedNote is "from MIRRORING, 3 retries" or "from MIRRORING, waits for
// --recover".
func failedNote(f FailedPartition) string {
	if f.WaitsForRecover {
		return "from " + f.Previous + ", waits for --recover"
	}
	return fmt.Sprintf("from %s, %d retries", f.Previous, f.Attempts)
}

func writeMirrorText(tw io.Writer, m Mirror, now time.Time) {
	counts := ""
	separator := ": "
	for _, c := range m.States {
		counts += fmt.Sprintf("%s%d %s", separator, c.Count, c.State)
		separator = ", "
	}
	fmt.Fprintf(tw, "\nmirror %s: source %s (cluster %s), %d partitions%s\n", m.Name, m.SourceBootstrap, m.SourceClusterID, len(m.Partitions), counts)
	if m.SourceUnreachableSince != nil {
		since := *m.SourceUnreachableSince
		text := fmt.Sprintf("source unreachable since %s (%s ago)", since.UTC().Format(time.RFC3339), ageText(max(now.Sub(since), 0)))
		if m.SourceError != "" {
			text += ": " + oneLine(m.SourceError)
		}
		fmt.Fprintln(tw, text)
	}
	fmt.Fprintln(tw, groupSyncLine(m.GroupSync, now))
	fmt.Fprintln(tw, syncLine("topic config", "topic configs synced", "topics", m.ConfigSync, now))
	fmt.Fprintln(tw, syncLine("ACL", "ACLs synced", "ACLs of the source held here", m.ACLSync, now))
	fmt.Fprintln(tw, syncLine("transactional ID", "transactional IDs synced", "transactional IDs", m.TransactionSync, now))
	if len(m.Partitions) == 0 {
		return
	}
	stale := 0
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tSTATE\tSOURCE HW\tHW AGE\tLOG END\tEPOCH\tSOURCE EPOCH\tLAG RECORDS\tLAG SECONDS\tBYTES\tBYTES/S")
	for _, p := range m.Partitions {
		lag := "-"
		if p.LagRecords >= 0 {
			lag = strconv.FormatInt(p.LagRecords, 10)
		}
		if p.LagAtLeast {
			lag, stale = ">="+lag, stale+1
		}
		age := time.Duration(-1)
		if p.SourceHighWatermarkAgeSeconds >= 0 {
			age = time.Duration(p.SourceHighWatermarkAgeSeconds * float64(time.Second))
		}
		rate := "-"
		if p.BytesPerSecond >= 0 {
			rate = strconv.FormatFloat(p.BytesPerSecond, 'f', 0, 64)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%d\t%d\t%d\t%s\t%.3f\t%d\t%s\n", p.Topic, p.Partition, p.State, p.SourceHighWatermark,
			ageText(age), p.LogEndOffset, p.LeaderEpoch, p.SourceLeaderEpoch, lag, p.LagSeconds, p.Bytes, rate)
	}
	if stale > 0 {
		fmt.Fprintf(tw, "%d partitions: the source high watermark is older than %v, so their lag is a lower bound (>=).\n",
			stale, time.Duration(m.StaleAfterSeconds*float64(time.Second)))
	}
	fmt.Fprintln(tw, dryRunLine(m.DryRun))
}

// dryRunLine is the failover dry run's summary: what a stop now would
// leave behind, and the command that says it per partition.
func dryRunLine(d DryRun) string {
	atLeast := ""
	if d.AtLeast {
		atLeast = "at least "
	}
	text := fmt.Sprintf("failover dry run: a stop now would leave %s%d records behind on the source (largest lag in time %s)",
		atLeast, d.Records, seconds(d.LagSeconds).Round(time.Millisecond))
	if d.Unknown > 0 {
		text += fmt.Sprintf(", %d partitions' lag unknown", d.Unknown)
	}
	if d.GroupOffsetLag >= 0 {
		text += fmt.Sprintf("; consumer group offset lag %d", d.GroupOffsetLag)
	}
	return text + "; per partition: " + d.DryRunCommand
}

// logDirLine is the line on the data directory's space.
func logDirLine(space LogDir) string {
	switch {
	case !space.Known:
		return "log dir: free space unknown"
	case space.Low:
		return fmt.Sprintf("log dir: LOW SPACE, %d bytes free, below log.dir.reserve.bytes %d: Produce, CreateTopics, CreatePartitions and mirror appends are refused (KAFKA_STORAGE_ERROR) until space returns",
			space.FreeBytes, space.ReserveBytes)
	}
	return fmt.Sprintf("log dir: %d bytes free, log.dir.reserve.bytes %d", space.FreeBytes, space.ReserveBytes)
}

// groupSyncLine is the line on a mirror's group offset sync: the round
// ("group offsets synced T (D ago, took D): N groups synced, M skipped
// (members on this node)", its failures), then the groups' offset lag,
// its sum and the group with the most.
func groupSyncLine(g GroupSync, now time.Time) string {
	if g.At == nil {
		return "no group offset sync round yet"
	}
	text := fmt.Sprintf("group offsets synced %s (%s ago, took %s): %d groups synced, %d skipped (members on this node)",
		g.At.UTC().Format(time.RFC3339), ageText(max(now.Sub(*g.At), 0)), seconds(g.DurationSeconds).Round(time.Millisecond), g.Synced, g.Skipped)
	text += failures(g.Sync)
	if len(g.Groups) > 0 {
		text += fmt.Sprintf("; offset lag %d over %d groups (most: %s %d)", g.OffsetLag, len(g.Groups), g.Groups[0].Group, g.Groups[0].OffsetLag)
	}
	return text
}

// syncLine is the line on one of a mirror's other syncs: "ACLs synced T
// (D ago, took D): N ACLs of the source held here", its failures; or that
// the sync has not run (and why, when it is off).
func syncLine(name, synced, items string, s Sync, now time.Time) string {
	if s.At == nil {
		if s.Error != "" {
			return "no " + name + " sync round: " + oneLine(s.Error)
		}
		return "no " + name + " sync round yet"
	}
	return fmt.Sprintf("%s %s (%s ago, took %s): %d %s", synced, s.At.UTC().Format(time.RFC3339), ageText(max(now.Sub(*s.At), 0)),
		seconds(s.DurationSeconds).Round(time.Millisecond), s.Synced, items) + failures(s)
}

func failures(s Sync) string {
	text := ""
	if s.FailedRounds > 0 {
		text += fmt.Sprintf("; %d rounds failed", s.FailedRounds)
	}
	if s.Error != "" {
		text += "; the last round failed: " + oneLine(s.Error)
	}
	return text
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// ageText prints a duration: whole seconds from a second on, "-" when
// unknown (negative).
func ageText(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	if d >= time.Second {
		d = d.Round(time.Second)
	}
	return d.String()
}

// oneLine joins the lines of s (as the CLI does).
func oneLine(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' }), "; ")
}
