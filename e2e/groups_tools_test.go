package e2e

// Kafka's command-line group tools against mirrord: kafka-console-consumer
// --group and kafka-consumer-groups (ConsumerGroupCommand).

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord/kafkatest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const groupCommand = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"

// groupTool runs kafka-consumer-groups with args against addr and returns
// its standard output and error. succeed says whether it must succeed (exit 0
// and no ERROR line) or fail.
func groupTool(ctx context.Context, t *testing.T, libs, addr string, succeed bool, args ...string) (stdout, stderr string) {
	t.Helper()
	out, errOut, err := kafkatest.RunToolOutputs(ctx, libs, nil, groupCommand, append([]string{"--bootstrap-server", addr}, args...)...)
	failed := err != nil || bytes.Contains(errOut, []byte(" ERROR ")) || bytes.Contains(out, []byte("Error:"))
	if succeed && (failed || bytes.Contains(errOut, []byte("UnsupportedVersion"))) {
		t.Fatalf("kafka-consumer-groups %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, errOut)
	}
	if !succeed && !failed {
		t.Fatalf("kafka-consumer-groups %s succeeded, want an error\nstdout:\n%s", strings.Join(args, " "), out)
	}
	return string(out), string(errOut)
}

// groupRow is a row of kafka-consumer-groups --describe.
type groupRow struct{ current, end, lag int64 } // current and lag are -1 for "-"

// describeGroup runs --describe for group and returns its rows by
// partition of topic.
func describeGroup(ctx context.Context, t *testing.T, libs, addr, group, topic string) map[int32]groupRow {
	t.Helper()
	out, _ := groupTool(ctx, t, libs, addr, true, "--describe", "--group", group)
	rows := map[int32]groupRow{}
	number := func(s string) int64 {
		if s == "-" {
			return -1
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("--describe: %q is not a number in\n%s", s, out)
		}
		return n
	}
	for line := range strings.SplitSeq(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[0] != group || f[1] != topic {
			continue
		}
		rows[int32(number(f[2]))] = groupRow{current: number(f[3]), end: number(f[4]), lag: number(f[5])}
	}
	return rows
}

// consoleGroupConsume runs kafka-console-consumer in group until it
// printed count values, and returns them sorted.
func consoleGroupConsume(ctx context.Context, t *testing.T, libs, addr, topic, group string, count int, extra ...string) []string {
	t.Helper()
	args := append([]string{"--bootstrap-server", addr, "--topic", topic, "--group", group,
		"--max-messages", fmt.Sprint(count), "--timeout-ms", consoleConsumeWait}, extra...)
	out, err := kafkatest.RunTool(ctx, libs, nil, "org.apache.kafka.tools.consumer.ConsoleConsumer", args...)
	if err != nil {
		t.Fatalf("kafka-console-consumer --group %s: %v", group, err)
	}
	values := strings.Fields(string(out))
	slices.Sort(values)
	return values
}

// produceValues writes count records "p<partition>-<n>" to each partition
// (n from first on) and returns their values.
func produceValues(ctx context.Context, t *testing.T, client *kgo.Client, topic string, counts map[int32]int, first map[int32]int) []string {
	t.Helper()
	var records []*kgo.Record
	var values []string
	for p, count := range counts {
		for n := first[p]; n < first[p]+count; n++ {
			v := fmt.Sprintf("p%d-%d", p, n)
			records = append(records, &kgo.Record{Topic: topic, Partition: p, Value: []byte(v)})
			values = append(values, v)
		}
	}
	if err := client.ProduceSync(ctx, records...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	return values
}

// TestConsumerGroupsTool: kafka-console-consumer --group reads a topic and
// commits; kafka-consumer-groups --list and --describe show the group and
// its lag (against what was produced); with a member in the group
// --reset-offsets and --delete are refused; once it left,
// --reset-offsets --to-earliest --execute makes the console consumer read
// everything again, --delete-offsets drops one partition's offset and
// --delete the group.
func TestConsumerGroupsTool(t *testing.T) {
	t.Parallel()
	libs := kafkaLibs(t)
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	const topic, group = "tools", "tools-group"
	createTopics(ctx, t, s.addr, map[string]int32{topic: 3})
	client := newClient(t, s.addr)
	produced := produceValues(ctx, t, client, topic, map[int32]int{0: 10, 1: 20, 2: 30}, nil)
	slices.Sort(produced)

	started := time.Now()
	if got := consoleGroupConsume(ctx, t, libs, s.addr, topic, group, len(produced), "--from-beginning"); !slices.Equal(got, produced) {
		t.Fatalf("kafka-console-consumer --group: %d values, want the %d produced\n%v", len(got), len(produced), got)
	}
	if out, _ := groupTool(ctx, t, libs, s.addr, true, "--list"); !slices.Contains(strings.Fields(out), group) {
		t.Fatalf("--list: %q, want %s", out, group)
	}
	want := map[int32]groupRow{0: {10, 10, 0}, 1: {20, 20, 0}, 2: {30, 30, 0}}
	if got := describeGroup(ctx, t, libs, s.addr, group, topic); !equalRows(got, want) {
		t.Fatalf("--describe after the console consumer: %v, want %v", got, want)
	}
	more := produceValues(ctx, t, client, topic, map[int32]int{0: 5, 2: 7}, map[int32]int{0: 10, 2: 30})
	produced = append(produced, more...)
	slices.Sort(produced)
	want = map[int32]groupRow{0: {10, 15, 5}, 1: {20, 20, 0}, 2: {30, 37, 7}}
	if got := describeGroup(ctx, t, libs, s.addr, group, topic); !equalRows(got, want) {
		t.Fatalf("--describe after more records: %v, want %v", got, want)
	}

	// A member in the group: the tool shows it and refuses to reset or delete.
	member := newClient(t, s.addr, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit())
	admin := kadm.NewClient(client)
	waitGroupState(ctx, t, admin, group, "Stable", 1)
	out, _ := groupTool(ctx, t, libs, s.addr, true, "--describe", "--group", group, "--members")
	if !strings.Contains(out, group) || !strings.Contains(out, " 3 ") {
		t.Fatalf("--describe --members: want one member with 3 partitions:\n%s", out)
	}
	out, errOut := groupTool(ctx, t, libs, s.addr, false, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
	if !strings.Contains(out+errOut, "inactive") {
		t.Fatalf("--reset-offsets with a member: want Kafka's \"can only be reset if the group is inactive\":\n%s\n%s", out, errOut)
	}
	out, errOut = groupTool(ctx, t, libs, s.addr, false, "--delete", "--group", group)
	if !strings.Contains(out, "GroupNotEmptyException") {
		t.Fatalf("--delete with a member: want NON_EMPTY_GROUP:\n%s\n%s", out, errOut)
	}
	member.Close() // LeaveGroup
	waitGroupState(ctx, t, admin, group, "Empty", 0)

	out, _ = groupTool(ctx, t, libs, s.addr, true, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
	if strings.Count(out, " "+topic+" ") != 3 {
		t.Fatalf("--reset-offsets --to-earliest: want 3 partitions reset:\n%s", out)
	}
	want = map[int32]groupRow{0: {0, 15, 15}, 1: {0, 20, 20}, 2: {0, 37, 37}}
	if got := describeGroup(ctx, t, libs, s.addr, group, topic); !equalRows(got, want) {
		t.Fatalf("--describe after --reset-offsets --to-earliest: %v, want %v", got, want)
	}
	if got := consoleGroupConsume(ctx, t, libs, s.addr, topic, group, len(produced)); !slices.Equal(got, produced) {
		t.Fatalf("kafka-console-consumer --group after the reset: %d values, want the %d produced\n%v", len(got), len(produced), got)
	}

	out, _ = groupTool(ctx, t, libs, s.addr, true, "--delete-offsets", "--group", group, "--topic", topic+":0")
	if !strings.Contains(out, "Successful") {
		t.Fatalf("--delete-offsets: %s", out)
	}
	want = map[int32]groupRow{1: {20, 20, 0}, 2: {37, 37, 0}}
	if got := describeGroup(ctx, t, libs, s.addr, group, topic); !equalRows(got, want) {
		t.Fatalf("--describe after --delete-offsets of partition 0: %v, want %v", got, want)
	}
	if out, _ = groupTool(ctx, t, libs, s.addr, true, "--delete", "--group", group); !strings.Contains(out, "successful") {
		t.Fatalf("--delete: %s", out)
	}
	if out, _ = groupTool(ctx, t, libs, s.addr, true, "--list"); slices.Contains(strings.Fields(out), group) {
		t.Fatalf("--list after --delete: %q still has %s", out, group)
	}
	if offsets, err := admin.FetchOffsets(ctx, group); err != nil || len(offsets) != 0 {
		t.Fatalf("offsets after --delete: %v %v, want none", offsets, err)
	}
	t.Logf("console consumer and kafka-consumer-groups: %v", time.Since(started).Round(time.Millisecond))
}

func equalRows(got, want map[int32]groupRow) bool {
	if len(got) != len(want) {
		return false
	}
	for p, w := range want {
		if got[p] != w {
			return false
		}
	}
	return true
}

// waitGroupState polls DescribeGroups until group is in state with
// members members.
func waitGroupState(ctx context.Context, t *testing.T, admin *kadm.Client, group, state string, members int) kadm.DescribedGroup {
	t.Helper()
	var last kadm.DescribedGroup
	deadline := time.Now().Add(time.Minute)
	for attempt := 0; ; attempt++ { // bounded by the deadline
		described, err := admin.DescribeGroups(ctx, group)
		if err != nil {
			t.Fatalf("describe groups: %v", err)
		}
		last = described[group]
		if last.Err == nil && last.State == state && len(last.Members) == members {
			return last
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s: state %s with %d members (error %v) after %d looks in a minute, want %s with %d", group, last.State, len(last.Members), last.Err, attempt, state, members)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(50 * time.Millisecond): // the poll interval
		}
	}
}
