package e2e

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	groupKillRounds     = 3
	groupKillPartitions = int32(3)
	groupKillRecords    = 30 // per partition
)

// commitLedger is, per partition, the last offset sent in a commit and
// the last one a commit answered without error.
type commitLedger struct {
	mu       sync.Mutex
	sent     map[int32]int64
	answered map[int32]int64
	commits  int
	// reached is closed when commits reaches killAfter.
	killAfter int
	reached   chan struct{}
}

// commitLoop commits increasing offsets of every partition of topic for
// group "g", one commit request at a time, as an assign() consumer or
// kafka-consumer-groups does (no generation), until ctx is done.
func commitLoop(ctx context.Context, admin *kadm.Client, topic string, next int64, ledger *commitLedger) {
	for ; ctx.Err() == nil; next++ { // bounded by ctx
		offsets := make(kadm.Offsets)
		ledger.mu.Lock()
		for p := range groupKillPartitions {
			offsets.Add(kadm.Offset{Topic: topic, Partition: p, At: next, LeaderEpoch: -1})
			ledger.sent[p] = next
		}
		ledger.mu.Unlock()
		resp, err := admin.CommitOffsets(ctx, "g", offsets)
		if err != nil || resp.Error() != nil {
			continue // the server is down or restarting: try the next offset
		}
		ledger.mu.Lock()
		for p := range groupKillPartitions {
			ledger.answered[p] = next
		}
		ledger.commits++
		if ledger.commits == ledger.killAfter {
			close(ledger.reached)
		}
		ledger.mu.Unlock()
	}
}

func fetchGroupOffsets(ctx context.Context, t *testing.T, addr string) map[int32]int64 {
	t.Helper()
	offsets, err := kadm.NewClient(newClient(t, addr)).FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	out := map[int32]int64{}
	offsets.Each(func(o kadm.OffsetResponse) {
		if o.Err != nil {
			t.Fatalf("fetch offsets %s-%d: %v", o.Topic, o.Partition, o.Err)
		}
		out[o.Partition] = o.At
	})
	return out
}

// TestGroupCommitsSurviveKill: mirrord is killed (SIGKILL) while offsets
// of a group are committed, over seeded rounds; after each restart every
// partition's committed offset is at least the last one a commit answered
// (no answered commit is lost) and at most the last one sent, and never
// below the last round's. Then a franz-go group consumer resumes each
// partition at its committed offset.
func TestGroupCommitsSurviveKill(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(newSeed(t), 0))
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	const topic = "committed"
	createTopics(ctx, t, s.addr, map[string]int32{topic: groupKillPartitions})
	producer := newClient(t, s.addr)
	for i := range groupKillRecords * int(groupKillPartitions) {
		r := &kgo.Record{Topic: topic, Partition: int32(i) % groupKillPartitions, Value: []byte{byte(i)}}
		if err := producer.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	producer.Close()

	last := map[int32]int64{}
	next := int64(0)
	for round := range groupKillRounds {
		ledger := &commitLedger{sent: map[int32]int64{}, answered: map[int32]int64{}, killAfter: 5 + rng.IntN(40), reached: make(chan struct{})}
		admin := kadm.NewClient(newClient(t, s.addr, kgo.RetryTimeout(2*time.Second)))
		loopCtx, stopLoop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); commitLoop(loopCtx, admin, topic, next, ledger) }()
		select {
		case <-ledger.reached:
		case <-time.After(time.Minute):
			t.Fatalf("round %d: fewer than %d commits answered in a minute", round, ledger.killAfter)
		}
		s.kill()
		s.start()
		stopLoop()
		<-done
		fetched := fetchGroupOffsets(ctx, t, s.addr)
		ledger.mu.Lock()
		for p := range groupKillPartitions {
			got, answered, sent := fetched[p], ledger.answered[p], ledger.sent[p]
			if got < answered || got > sent || got < last[p] {
				t.Fatalf("round %d, partition %d: committed %d after the kill; answered %d, sent %d, last round %d", round, p, got, answered, sent, last[p])
			}
			last[p] = got
			next = max(next, sent+1)
		}
		t.Logf("round %d: killed after %d answered commits; committed now %v", round, ledger.commits, fetched)
		ledger.mu.Unlock()
	}

	// A group consumer starts each partition at the committed offset
	// (commits ran past the records: the consumer waits at the end, so
	// commit a point inside the log first).
	admin := kadm.NewClient(newClient(t, s.addr))
	offsets := make(kadm.Offsets)
	for p := range groupKillPartitions {
		offsets.Add(kadm.Offset{Topic: topic, Partition: p, At: int64(p) + 7, LeaderEpoch: -1})
	}
	if resp, err := admin.CommitOffsets(ctx, "g", offsets); err != nil || resp.Error() != nil {
		t.Fatalf("commit: %v %v", err, resp.Error())
	}
	consumer := newClient(t, s.addr, kgo.ConsumerGroup("g"), kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()), kgo.DisableAutoCommit())
	first := map[int32]int64{}
	for deadline := time.Now().Add(time.Minute); len(first) < int(groupKillPartitions); { // bounded by the deadline
		if time.Now().After(deadline) {
			t.Fatalf("the group consumer polled %v in a minute", first)
		}
		pollCtx, cancelPoll := context.WithTimeout(ctx, time.Second)
		consumer.PollFetches(pollCtx).EachRecord(func(r *kgo.Record) {
			if _, ok := first[r.Partition]; !ok {
				first[r.Partition] = r.Offset
			}
		})
		cancelPoll()
	}
	for p := range groupKillPartitions {
		if first[p] != int64(p)+7 {
			t.Fatalf("partition %d: the group consumer started at %d, want the committed %d", p, first[p], p+7)
		}
	}
}
