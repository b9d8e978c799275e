package e2e

// Kafka 4.4's VerifiableConsumer (the Java consumer, classic group
// protocol) in a group on mirrord: three members, one killed mid-run.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mirrord/mirrord/kafkatest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	verifiableTopic      = "verifiable"
	verifiablePartitions = int32(6)
	verifiableMembers    = 3
	verifiableSession    = 6 * time.Second // --session-timeout: Kafka's group.min.session.timeout.ms
	verifiableHeartbeat  = time.Second     // heartbeat.interval.ms
	// The consumer protocol's session timeout and heartbeat interval,
	// mirrord's group.consumer.session.timeout.ms and
	// group.consumer.heartbeat.interval.ms (serve flags): Kafka's 45 s
	// would make the test wait 45 s for the kill to be noticed.
	verifiableConsumerSession   = 10 * time.Second
	verifiableConsumerHeartbeat = 2 * time.Second
	// verifiableMoveSlack is the time the survivors may take past the
	// session timeout to rejoin (a heartbeat learns of the rebalance) and
	// sync, on a loaded machine.
	verifiableMoveSlack   = 5 * time.Second
	verifiableBatch       = 60   // records per produce, spread over the partitions
	verifiableBatchesMax  = 2000 // bounds the producer
	verifiableKillAfter   = 1500 // records consumed before the kill
	verifiableAfterMove   = 1200 // records produced after the partitions moved
	verifiableStartWait   = 2 * time.Minute
	verifiablePollEvery   = 100 * time.Millisecond
	verifiableEventsBytes = 1 << 20 // read per poll of one member's events
)

// vcEvent is the part of VerifiableConsumer's JSON events the test reads.
type vcEvent struct {
	Name       string `json:"name"`
	Timestamp  int64  `json:"timestamp"` // ms since the epoch
	Partitions []struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Count     int64  `json:"count"`
		MinOffset int64  `json:"minOffset"`
		MaxOffset int64  `json:"maxOffset"`
	} `json:"partitions"`
	Offsets []struct {
		Topic     string `json:"topic"`
		Partition int32  `json:"partition"`
		Offset    int64  `json:"offset"`
	} `json:"offsets"`
	Success bool   `json:"success"`
	Error   string `json:"error"`
}

// vcMember is one VerifiableConsumer process and what its events said.
type vcMember struct {
	proc       *kafkatest.ToolProcess
	read       int64  // bytes of its stdout parsed
	partial    []byte // an incomplete last line
	assigned   map[int32]bool
	assignedAt time.Time // of the last partitions_assigned
	consumed   int64
	commits    map[int32]int64 // last successful commit per partition
	failed     int             // unsuccessful commits
	killed     bool
}

// poll parses the events written since the last poll.
func (m *vcMember) poll(t *testing.T, seen *vcSeen) {
	t.Helper()
	f, err := os.Open(m.proc.StdoutPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(m.read, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(io.LimitReader(f, verifiableEventsBytes))
	if err != nil {
		t.Fatal(err)
	}
	m.read += int64(len(data))
	lines := strings.Split(string(append(m.partial, data...)), "\n")
	m.partial = []byte(lines[len(lines)-1])
	for _, line := range lines[:len(lines)-1] {
		var e vcEvent
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%s: event %q: %v", m.proc.Name, line, err)
		}
		m.apply(t, e, seen)
	}
}

func (m *vcMember) apply(t *testing.T, e vcEvent, seen *vcSeen) {
	t.Helper()
	switch e.Name {
	case "partitions_assigned": // the classic protocol's eager rebalance: the whole new assignment
		for _, p := range e.Partitions {
			m.assigned[p.Partition] = true
		}
		m.assignedAt = time.UnixMilli(e.Timestamp)
	case "partitions_revoked":
		for _, p := range e.Partitions {
			delete(m.assigned, p.Partition)
		}
	case "records_consumed":
		for _, p := range e.Partitions {
			if p.Topic != verifiableTopic || p.Count != p.MaxOffset-p.MinOffset+1 {
				t.Fatalf("%s: consumed %d records of %s-%d in [%d, %d]: a gap in a topic without transactions or compaction", m.proc.Name, p.Count, p.Topic, p.Partition, p.MinOffset, p.MaxOffset)
			}
			seen.add(p.Partition, p.MinOffset, p.MaxOffset+1)
			m.consumed += p.Count
		}
	case "offsets_committed":
		if !e.Success {
			m.failed++ // a commit during a rebalance fails: Kafka's CommitFailedException
			return
		}
		for _, o := range e.Offsets {
			if o.Offset < m.commits[o.Partition] {
				t.Fatalf("%s: committed %d to partition %d after %d", m.proc.Name, o.Offset, o.Partition, m.commits[o.Partition])
			}
			m.commits[o.Partition] = o.Offset
		}
	}
}

// vcSeen is, per partition, how many times each offset was consumed by
// any member.
type vcSeen struct{ counts map[int32][]int }

func (s *vcSeen) add(partition int32, from, to int64) {
	c := s.counts[partition]
	for int64(len(c)) < to {
		c = append(c, 0)
	}
	for o := from; o < to; o++ {
		c[o]++
	}
	s.counts[partition] = c
}

// missing returns the first offset below end never consumed, or -1.
func (s *vcSeen) missing(partition int32, end int64) int64 {
	c := s.counts[partition]
	for o := range end {
		if o >= int64(len(c)) || c[o] == 0 {
			return o
		}
	}
	return -1
}

// vcProducer writes batches of verifiableBatch records round robin over
// the partitions, paced, until stopped.
type vcProducer struct {
	acked atomic.Int64
	stop  chan struct{}
	done  chan struct{}
	err   error
}

func startVerifiableProducer(ctx context.Context, client *kgo.Client) *vcProducer {
	p := &vcProducer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		tick := time.NewTicker(50 * time.Millisecond) // pacing, about 1200 records/s
		defer tick.Stop()
		for batch := range verifiableBatchesMax {
			records := make([]*kgo.Record, verifiableBatch)
			for i := range records {
				n := batch*verifiableBatch + i
				records[i] = &kgo.Record{Topic: verifiableTopic, Partition: int32(n) % verifiablePartitions, Value: []byte(fmt.Sprint(n))}
			}
			if p.err = client.ProduceSync(ctx, records...).FirstErr(); p.err != nil {
				return
			}
			p.acked.Add(verifiableBatch)
			select {
			case <-p.stop:
				return
			case <-ctx.Done():
				p.err = ctx.Err()
				return
			case <-tick.C:
			}
		}
	}()
	return p
}

// TestVerifiableConsumerMemberKilled: three VerifiableConsumers (classic
// protocol, range assignor, commits after each poll) share a topic of 6
// partitions while franz-go produces; one is killed (SIGKILL) mid-run.
// Its partitions move to the two others after the session timeout (within
// verifiableMoveSlack of it), every produced record is consumed (a record
// consumed twice after the kill is allowed, as Kafka allows it), the
// committed offsets, read with OffsetFetch every poll, never go back, and
// end at the log end offsets.
func TestVerifiableConsumerMemberKilled(t *testing.T) {
	t.Parallel()
	testVerifiableConsumers(t, vcScenario{
		protocol: "classic",
		flags:    []string{"--session-timeout", fmt.Sprint(verifiableSession.Milliseconds())},
		props:    fmt.Sprintf("heartbeat.interval.ms=%d\nmax.poll.records=200\n", verifiableHeartbeat.Milliseconds()),
		stop: func(t *testing.T, p *kafkatest.ToolProcess) {
			p.Kill()
		},
		moveWithin: verifiableSession + verifiableMoveSlack,
	})
}

// TestVerifiableConsumerConsumerProtocol: the same with the KIP-848
// consumer protocol (group.protocol=consumer: the server assigns, the
// session and heartbeat are the server's, here verifiableConsumerSession
// and verifiableConsumerHeartbeat instead of Kafka's 45 s and 5 s), a
// member killed (SIGKILL): its partitions move once the server's session
// timeout passes, and nothing is skipped.
func TestVerifiableConsumerConsumerProtocol(t *testing.T) {
	t.Parallel()
	testVerifiableConsumers(t, vcScenario{
		protocol: "consumer",
		serve: []string{"--group-consumer-session-timeout-ms", fmt.Sprint(verifiableConsumerSession.Milliseconds()),
			"--group-consumer-heartbeat-interval-ms", fmt.Sprint(verifiableConsumerHeartbeat.Milliseconds())},
		props: "max.poll.records=200\n",
		stop: func(t *testing.T, p *kafkatest.ToolProcess) {
			p.Kill()
		},
		// The session timeout, then two heartbeat intervals: one to learn
		// of the new target assignment, one to report the partitions taken.
		moveWithin: verifiableConsumerSession + 2*verifiableConsumerHeartbeat + verifiableMoveSlack,
	})
}

// vcScenario is a group protocol and how a member goes.
type vcScenario struct {
	protocol   string   // --group-protocol
	serve      []string // mirrord serve flags
	flags      []string // more VerifiableConsumer flags
	props      string   // the consumer's properties file
	stop       func(*testing.T, *kafkatest.ToolProcess)
	moveWithin time.Duration // the victim's partitions have moved by then
}

func testVerifiableConsumers(t *testing.T, sc vcScenario) {
	libs := kafkaLibs(t)
	s := startServer(t, sc.serve...)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	createTopics(ctx, t, s.addr, map[string]int32{verifiableTopic: verifiablePartitions})
	dir := t.TempDir()
	config := filepath.Join(dir, "consumer.properties")
	if err := os.WriteFile(config, []byte(sc.props), 0o644); err != nil {
		t.Fatal(err)
	}
	members := make([]*vcMember, verifiableMembers)
	for i := range members {
		args := append([]string{"--bootstrap-server", s.addr, "--topic", verifiableTopic, "--group-id", "verifiable", "--group-protocol", sc.protocol,
			"--reset-policy", "earliest", "--command-config", config}, sc.flags...)
		proc, err := kafkatest.StartTool(libs, dir, fmt.Sprintf("consumer-%d", i), "org.apache.kafka.tools.VerifiableConsumer", args...)
		if err != nil {
			t.Fatal(err)
		}
		members[i] = &vcMember{proc: proc, assigned: map[int32]bool{}, commits: map[int32]int64{}}
		t.Cleanup(func() {
			if err := proc.Stop(); err != nil {
				t.Error(err)
			}
			if t.Failed() {
				t.Log(proc.StderrTail())
			}
		})
	}
	seen := &vcSeen{counts: map[int32][]int{}}
	admin := kadm.NewClient(newClient(t, s.addr))
	committed := map[int32]int64{}
	// step polls every member's events and the group's committed offsets
	// (which must never go back) and reports whether done holds.
	step := func(done func() bool) bool {
		for _, m := range members {
			if !m.killed {
				m.poll(t, seen)
			}
		}
		fetched, err := admin.FetchOffsets(ctx, "verifiable")
		if err != nil {
			t.Fatalf("fetch offsets: %v", err)
		}
		fetched.Each(func(o kadm.OffsetResponse) {
			if o.Err != nil {
				t.Fatalf("fetch offsets %s-%d: %v", o.Topic, o.Partition, o.Err)
			}
			if o.At < committed[o.Partition] {
				t.Fatalf("partition %d: committed offset went back from %d to %d", o.Partition, committed[o.Partition], o.At)
			}
			committed[o.Partition] = o.At
		})
		return done()
	}
	var status string // what the last done call found missing, for the failure message
	waitFor := func(what string, wait time.Duration, done func() bool) {
		t.Helper()
		tick := time.NewTicker(verifiablePollEvery)
		defer tick.Stop()
		deadline := time.Now().Add(wait)
		for !step(done) { // bounded by the deadline
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %v; assignments %v; %s", what, wait, assignments(members), status)
			}
			for _, m := range members {
				select {
				case <-m.proc.Exited():
					if !m.killed {
						t.Fatalf("%s exited", m.proc.Name)
					}
				default:
				}
			}
			<-tick.C
		}
	}
	// covers says whether the live members own every partition, each once.
	covers := func(live []*vcMember) bool {
		owned := map[int32]bool{}
		for _, m := range live {
			for p := range m.assigned {
				if owned[p] {
					return false
				}
				owned[p] = true
			}
		}
		return len(owned) == int(verifiablePartitions)
	}

	started := time.Now()
	waitFor("three members own two partitions each", verifiableStartWait, func() bool {
		for _, m := range members {
			if len(m.assigned) != 2 {
				return false
			}
		}
		return covers(members)
	})
	t.Logf("the group is stable with three members after %v", time.Since(started).Round(time.Millisecond))

	producer := startVerifiableProducer(ctx, newClient(t, s.addr))
	defer func() {
		producer.halt()
		<-producer.done
	}()
	waitFor("the members consume", time.Minute, func() bool {
		var total int64
		for _, m := range members {
			if m.consumed == 0 {
				return false
			}
			total += m.consumed
		}
		return total >= verifiableKillAfter
	})
	victim, survivors := members[1], []*vcMember{members[0], members[2]}
	owned := keys(victim.assigned)
	sc.stop(t, victim.proc)
	victim.poll(t, seen) // the events it wrote before it died
	victim.killed = true
	killed := time.Now()
	t.Logf("%s went (partitions %v) after %d records produced", victim.proc.Name, owned, producer.acked.Load())

	waitFor("the survivors own every partition", sc.moveWithin+10*time.Second, func() bool {
		return covers(survivors) && survivors[0].assignedAt.After(killed) && survivors[1].assignedAt.After(killed)
	})
	latest := survivors[0].assignedAt
	if survivors[1].assignedAt.After(latest) {
		latest = survivors[1].assignedAt
	}
	moved := latest.Sub(killed)
	t.Logf("%s protocol: the victim's partitions moved %v after it went; assignments %v", sc.protocol, moved.Round(time.Millisecond), assignments(survivors))
	if moved > sc.moveWithin {
		t.Errorf("the partitions moved %v after the victim went, want within %v", moved, sc.moveWithin)
	}

	atMove := producer.acked.Load()
	waitFor("the producer writes after the move", time.Minute, func() bool { return producer.acked.Load() >= atMove+verifiableAfterMove })
	producer.halt()
	<-producer.done
	if producer.err != nil {
		t.Fatalf("produce: %v", producer.err)
	}
	ends, err := admin.ListEndOffsets(ctx, verifiableTopic)
	if err != nil {
		t.Fatal(err)
	}
	end := map[int32]int64{}
	var total int64
	ends.Each(func(o kadm.ListedOffset) { end[o.Partition] = o.Offset; total += o.Offset })
	if total != producer.acked.Load() {
		t.Fatalf("log end offsets %v sum to %d, produced %d", end, total, producer.acked.Load())
	}
	waitFor("every record consumed and committed", time.Minute, func() bool {
		for p := range verifiablePartitions {
			if missing := seen.missing(p, end[p]); missing >= 0 || committed[p] != end[p] {
				status = fmt.Sprintf("partition %d: end %d, committed %d, offset %d not consumed (-1: all are)", p, end[p], committed[p], missing)
				return false
			}
		}
		return true
	})
	var duplicates, failed int
	for _, c := range seen.counts {
		for _, n := range c {
			duplicates += max(n-1, 0)
		}
	}
	for _, m := range members {
		failed += m.failed
	}
	t.Logf("%d records produced and consumed (%d consumed twice), %d failed commits, committed %v, in %v", total, duplicates, failed, committed, time.Since(started).Round(time.Millisecond))
}

func (p *vcProducer) halt() {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
}

func assignments(members []*vcMember) string {
	var parts []string
	for _, m := range members {
		parts = append(parts, fmt.Sprintf("%s%v", m.proc.Name, keys(m.assigned)))
	}
	return strings.Join(parts, " ")
}

func keys(set map[int32]bool) []int32 {
	var out []int32
	for p := range verifiablePartitions {
		if set[p] {
			out = append(out, p)
		}
	}
	return out
}
