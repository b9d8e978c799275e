package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKcatBalancedConsumer: kcat -G (librdkafka's balanced consumer)
// consumes a topic of 4 partitions and commits; then two kcat -G in the
// same group share the partitions (two each, disjoint), resume at the
// committed offsets, and commit the new records when they stop (SIGTERM).
func TestKcatBalancedConsumer(t *testing.T) {
	t.Parallel()
	kcat := findKcat(t)
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	const topic, group, partitions, perRound = "kcatgroup", "kcat-group", int32(4), 25
	createTopics(ctx, t, s.addr, map[string]int32{topic: partitions})
	client := newClient(t, s.addr)
	produce := func(round int) {
		var records []*kgo.Record
		for p := range partitions {
			for n := range perRound {
				records = append(records, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%d-%d", round, n)})
			}
		}
		if err := client.ProduceSync(ctx, records...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	admin := kadm.NewClient(client)
	committedAll := func(want int64) bool {
		offsets, err := admin.FetchOffsets(ctx, group)
		if err != nil {
			t.Fatalf("fetch offsets: %v", err)
		}
		for p := range partitions {
			if o, ok := offsets.Lookup(topic, p); !ok || o.At != want {
				return false
			}
		}
		return true
	}
	started := time.Now()
	produce(0)
	out := runKcat(ctx, t, kcat, nil, "-b", s.addr, "-G", group, "-o", "beginning", "-c", fmt.Sprint(int(partitions)*perRound), "-f", "%p %o\n", topic)
	if seen := distinctLines(out); seen != int(partitions)*perRound {
		t.Fatalf("kcat -G: %d distinct records, want %d\n%s", seen, int(partitions)*perRound, out)
	}
	if !committedAll(perRound) {
		t.Fatalf("after kcat -G: committed offsets are not %d on every partition", perRound)
	}

	produce(1)
	dir := t.TempDir()
	var procs []*exec.Cmd
	var outputs []string
	for i := range 2 {
		path := filepath.Join(dir, fmt.Sprintf("kcat-%d.out", i))
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(kcat, "-u", "-b", s.addr, "-G", group, "-f", "%p %o\n", topic)
		cmd.Stdout, cmd.Stderr = f, f
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		t.Cleanup(func() {
			cmd.Process.Kill()
			<-exited
		})
		procs, outputs = append(procs, cmd), append(outputs, path)
	}
	described := waitGroupState(ctx, t, admin, group, "Stable", 2)
	owner := map[int32]int{}
	for i, m := range described.Members {
		assigned, ok := m.Assigned.AsConsumer()
		if !ok {
			t.Fatalf("member %s: not a consumer protocol assignment", m.MemberID)
		}
		for _, at := range assigned.Topics {
			for _, p := range at.Partitions {
				if _, twice := owner[p]; twice || at.Topic != topic {
					t.Fatalf("%s-%d assigned twice or to the wrong topic: %+v", at.Topic, p, described.Members)
				}
				owner[p] = i
			}
		}
	}
	if len(owner) != int(partitions) || count(owner, 0) != 2 {
		t.Fatalf("assignment %v, want two partitions for each member", owner)
	}
	// Both resume at the committed offsets: between them they print
	// exactly the second round's offsets, each once.
	want := map[string]bool{}
	for p := range partitions {
		for o := perRound; o < 2*perRound; o++ {
			want[fmt.Sprintf("%d %d", p, o)] = true
		}
	}
	deadline := time.Now().Add(time.Minute)
	for { // bounded by the deadline
		got := map[string]int{}
		for _, path := range outputs {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for line := range strings.SplitSeq(string(data), "\n") {
				if line != "" && !strings.HasPrefix(line, "%") {
					got[line]++
				}
			}
		}
		if len(got) == len(want) && allOnce(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("two kcat -G printed %d records in a minute, want the %d of the second round each once: %v", len(got), len(want), got)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(100 * time.Millisecond): // the poll interval
		}
	}
	for _, cmd := range procs {
		cmd.Process.Signal(syscall.SIGTERM) // kcat closes its consumer: a last commit and LeaveGroup
	}
	waitGroupState(ctx, t, admin, group, "Empty", 0)
	if !committedAll(2 * perRound) {
		t.Fatalf("after the two kcat -G stopped: committed offsets are not %d on every partition", 2*perRound)
	}
	t.Logf("kcat -G alone, then two sharing %d partitions: %v", partitions, time.Since(started).Round(time.Millisecond))
}

func distinctLines(out []byte) int {
	seen := map[string]bool{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		seen[line] = true
	}
	return len(seen)
}

func count(owner map[int32]int, member int) int {
	n := 0
	for _, m := range owner {
		if m == member {
			n++
		}
	}
	return n
}

func allOnce(got map[string]int, want map[string]bool) bool {
	for line, n := range got {
		if n != 1 || !want[line] {
			return false
		}
	}
	return true
}
