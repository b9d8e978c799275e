package logstore

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/mirrord/mirrord/epoch"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
)

var (
	modelSeed  = flag.Uint64("model.seed", 0, "run the model test with this one seed")
	modelSeeds = flag.Int("model.seeds", 40, "number of seeds the model test runs")
)

// model is the in-memory reference for a Log: the batches a reader can
// see (each holds an offset >= logStart), the log start offset, the
// leader-epoch cache, and how many leading batches are surely durable.
type model struct {
	batches  [][]byte
	start    rb.Offset
	emptyEnd rb.Offset // the log end offset when there are no batches
	epochs   *epoch.Cache
	durable  int
	// appended holds the CRC-covered bytes of every batch appended, for
	// the crash check (bounded by the steps of one run).
	appended map[string]bool
}

func (m *model) logEndOffset() rb.Offset {
	if len(m.batches) == 0 {
		return m.emptyEnd
	}
	return rb.Batch(m.batches[len(m.batches)-1]).NextOffset()
}

func (m *model) latestEpoch() rb.Epoch {
	if e, ok := m.epochs.Latest(); ok {
		return e.Epoch
	}
	return rb.NoEpoch
}

func (m *model) append(batches []byte) {
	first := m.logEndOffset() == m.start
	for it := rb.NewIter(batches, false); it.Next(); first = false {
		b := it.Batch()
		if b.LeaderEpoch() > m.latestEpoch() {
			start := b.BaseOffset()
			if _, ok := m.epochs.Latest(); first && !ok {
				start = min(start, m.start) // the first epoch of an empty log starts at its log start
			}
			m.epochs.Assign(b.LeaderEpoch(), start)
		}
		m.batches = append(m.batches, slices.Clone(b))
		m.appended[covered(b)] = true
	}
}

func (m *model) truncateTo(o rb.Offset) {
	if o >= m.logEndOffset() {
		return
	}
	if o < m.start {
		m.reset(o)
		return
	}
	keep := 0
	for keep < len(m.batches) && rb.Batch(m.batches[keep]).LastOffset() < o {
		keep++
	}
	if keep == 0 {
		m.reset(m.start) // nothing visible is left
		return
	}
	for _, b := range m.batches[keep:] {
		delete(m.appended, covered(b)) // truncated: it must never come back
	}
	m.batches = m.batches[:keep]
	m.epochs.TruncateFromEnd(m.logEndOffset())
	m.durable = len(m.batches)
}

// reset is the log emptied and started at o: every segment is gone, so
// no batch appended before may come back.
func (m *model) reset(o rb.Offset) {
	m.batches, m.start, m.emptyEnd, m.durable = nil, o, o, 0
	m.epochs.TruncateFromEnd(0)
	clear(m.appended)
}

func (m *model) advanceStart(o rb.Offset) {
	if o <= m.start {
		return
	}
	if o > m.logEndOffset() {
		m.reset(o)
		return
	}
	m.start = o
	drop := 0
	for drop < len(m.batches) && rb.Batch(m.batches[drop]).LastOffset() < o {
		drop++
	}
	if drop == len(m.batches) {
		m.emptyEnd = m.logEndOffset()
	}
	m.batches = m.batches[drop:]
	m.durable = max(0, m.durable-drop)
	m.epochs.TruncateFromStart(o)
	m.epochs.TruncateFromEnd(m.logEndOffset())
}

// afterCrash checks that the recovered batches are a prefix of the
// model's that holds at least the durable ones, and adopts them. Bytes
// outside the CRC (baseOffset, partitionLeaderEpoch) may differ in the
// unsynced part: a crash can corrupt them undetectably, as in Kafka.
func (m *model) afterCrash(recovered []rb.Batch) string {
	n := len(recovered)
	if n < m.durable {
		return fmt.Sprintf("recovered %d batches, want at least the %d durable", n, m.durable)
	}
	for i, b := range recovered {
		if i < m.durable {
			if !bytes.Equal(b, m.batches[i]) {
				return fmt.Sprintf("recovered durable batch %d differs from the model's", i)
			}
			continue
		}
		// Past the durable prefix: a batch the model appended, equal in
		// its CRC-covered bytes. Usually the model's batch at i; but a
		// corrupt base offset (not covered by the CRC, in Kafka's format)
		// can also bring back a batch that had fallen below the log start.
		if i < len(m.batches) && sameCovered(b, m.batches[i]) {
			continue
		}
		if !m.appended[covered(b)] {
			return fmt.Sprintf("recovered batch %d (offsets %d-%d, %d bytes) is no batch the model appended", i, b.BaseOffset(), b.LastOffset(), len(b))
		}
	}
	m.batches = m.batches[:0]
	for _, b := range recovered {
		m.batches = append(m.batches, slices.Clone(b))
	}
	if n == 0 {
		m.emptyEnd = m.start
	}
	m.durable = n
	m.epochs.TruncateFromEnd(m.logEndOffset())
	return ""
}

// covered is a batch's bytes that its CRC protects, with its length.
func covered(b []byte) string { return string(b[8:12]) + string(b[16:]) }

func sameCovered(a, b []byte) bool { return covered(a) == covered(b) }

// generator makes batches with increasing timestamps.
type generator struct {
	rng   *rand.Rand
	clock int64
}

func (g *generator) batches(next rb.Offset, leaderEpoch rb.Epoch, count int) []byte {
	var out []byte
	for range count {
		if g.rng.IntN(8) == 0 {
			next += rb.Offset(1 + g.rng.IntN(50)) // a compaction gap
		}
		records := make([]rb.Record, 1+g.rng.IntN(5))
		for i := range records {
			records[i] = rb.Record{Value: bytes.Repeat([]byte{byte(next)}, g.rng.IntN(300)), TimestampDelta: int64(i)}
		}
		g.clock += int64(1 + g.rng.IntN(1000))
		start := len(out)
		out = rb.Append(out, rb.Spec{BaseOffset: next, LeaderEpoch: leaderEpoch, BaseTimestamp: g.clock, ProducerID: -1, Records: records})
		next = rb.Batch(out[start:]).NextOffset()
	}
	return out
}

func TestModel(t *testing.T) {
	seeds := make([]uint64, 0, *modelSeeds)
	if *modelSeed != 0 {
		seeds = append(seeds, *modelSeed)
	} else {
		base := uint64(time.Now().UnixNano())
		for i := range *modelSeeds {
			seeds = append(seeds, base+uint64(i))
		}
	}
	for _, seed := range seeds {
		if !runModel(t, seed, 300) {
			t.Fatalf("model test failed; rerun with: go test ./logstore -run TestModel -model.seed=%d", seed)
		}
	}
}

func runModel(t *testing.T, seed uint64, steps int) (ok bool) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed))
	fs := vfs.NewMem()
	cfg := DefaultConfig()
	cfg.SegmentBytes = int64(7000 + rng.IntN(8192))
	cfg.IndexIntervalBytes = int64(rng.IntN(600))
	cfg.IndexBytesMax = 12 * (4 + rng.IntN(40))
	cfg.Flush = []FlushPolicy{FlushEveryAppend, FlushOS}[rng.IntN(2)]

	dir := "/data/t-0"
	log, err := Open(fs, dir, cfg)
	if err != nil {
		t.Errorf("seed %d: open: %v", seed, err)
		return false
	}
	cache, _ := epoch.New(nil)
	m := &model{epochs: cache, appended: map[string]bool{}}
	gen := &generator{rng: rng, clock: 1_700_000_000_000}
	leaderEpoch := rb.Epoch(0)
	fail := func(step int, op string, format string, args ...any) bool {
		t.Errorf("seed %d step %d (%s), config %+v: %s", seed, step, op, cfg, fmt.Sprintf(format, args...))
		return false
	}
	for step := range steps {
		var op string
		switch r := rng.IntN(100); {
		case r < 45:
			op = "append"
			if rng.IntN(6) == 0 {
				leaderEpoch += rb.Epoch(1 + rng.IntN(3))
			}
			batches := gen.batches(m.logEndOffset()+rb.Offset(rng.IntN(3)), leaderEpoch, 1+rng.IntN(4))
			if _, err := log.Append(batches); err != nil {
				return fail(step, op, "%v", err)
			}
			m.append(batches)
		case r < 55:
			op = "append-assign"
			batches := gen.batches(0, rb.NoEpoch, 1+rng.IntN(3))
			if _, err := log.AppendAssign(batches, leaderEpoch); err != nil {
				return fail(step, op, "%v", err)
			}
			m.append(batches)
		case r < 62:
			op = "append-invalid"
			if !appendInvalid(t, rng, gen, log, m, leaderEpoch) {
				return fail(step, op, "an invalid append was accepted or changed the log")
			}
		case r < 70:
			op = "truncate"
			target := m.start - 2 + rb.Offset(rng.IntN(int(m.logEndOffset()-m.start)+4))
			target = max(target, 0)
			op = fmt.Sprintf("truncate to %d", target)
			if err := log.TruncateTo(target); err != nil {
				return fail(step, op, "%v", err)
			}
			m.truncateTo(target)
		case r < 76:
			op = "advance-start"
			target := m.start + rb.Offset(rng.IntN(int(m.logEndOffset()-m.start)+3))
			op = fmt.Sprintf("advance start to %d", target)
			if err := log.AdvanceLogStart(target); err != nil {
				return fail(step, op, "%v", err)
			}
			m.advanceStart(target)
		case r < 80:
			op = "roll"
			if err := log.Roll(); err != nil {
				return fail(step, op, "%v", err)
			}
			m.durable = len(m.batches)
		case r < 84:
			op = "flush"
			if err := log.Flush(); err != nil {
				return fail(step, op, "%v", err)
			}
			m.durable = len(m.batches)
		case r < 90:
			op = "close-reopen"
			if err := log.Close(); err != nil {
				return fail(step, op, "close: %v", err)
			}
			if log, err = Open(fs, dir, cfg); err != nil {
				return fail(step, op, "open: %v", err)
			}
			m.durable = len(m.batches)
		default:
			op = "crash"
			fs.Crash(rng)
			if log, err = Open(fs, dir, cfg); err != nil {
				return fail(step, op, "open: %v", err)
			}
			got, err := readAll(log)
			if err != nil {
				return fail(step, op, "read: %v", err)
			}
			if msg := m.afterCrash(got); msg != "" {
				return fail(step, op, "%s", msg)
			}
		}
		if cfg.Flush == FlushEveryAppend && op != "crash" {
			m.durable = len(m.batches)
		}
		if msg := compare(log, m, rng); msg != "" {
			return fail(step, op, "%s", msg)
		}
	}
	if err := log.Close(); err != nil {
		t.Errorf("seed %d: close: %v", seed, err)
		return false
	}
	return true
}

// appendInvalid tries one kind of bad append and checks it is refused
// with ErrInvalidAppend and changes nothing.
func appendInvalid(t *testing.T, rng *rand.Rand, gen *generator, log *Log, m *model, leaderEpoch rb.Epoch) bool {
	next := m.logEndOffset()
	var batches []byte
	switch rng.IntN(4) {
	case 0: // overlaps the log end
		if next == 0 {
			return true
		}
		batches = gen.batches(next-1, leaderEpoch, 1)
		rb.Batch(batches).SetBaseOffset(next - 1) // undo any gap the generator made
	case 1: // a flipped bit in the CRC range of the second batch
		batches = gen.batches(next, leaderEpoch, 2)
		batches[len(batches)-1-rng.IntN(10)] ^= 0x10
	case 2: // a decreasing epoch
		if m.latestEpoch() <= 0 {
			return true
		}
		batches = gen.batches(next, m.latestEpoch()-1, 1)
	case 3: // a torn last batch
		batches = gen.batches(next, leaderEpoch, 2)
		batches = batches[:len(batches)-1-rng.IntN(30)]
	}
	before := log.Size()
	_, err := log.Append(batches)
	if !errors.Is(err, ErrInvalidAppend) {
		t.Logf("invalid append (%d bytes, log end %d): got %v", len(batches), next, err)
		return false
	}
	return log.Size() == before && log.LogEndOffset() == next
}

// readAll reads every batch from the log start to the log end.
func readAll(log *Log) ([]rb.Batch, error) {
	var out []rb.Batch
	offset, end := log.LogStartOffset(), log.LogEndOffset()
	for offset < end {
		buf, err := log.ReadBytes(nil, offset, 1<<20, end, true)
		if err != nil {
			return nil, err
		}
		if len(buf) == 0 {
			break
		}
		it := rb.NewIter(buf, true)
		for it.Next() {
			out = append(out, it.Batch())
			offset = it.Batch().NextOffset()
		}
		if err := it.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// compare checks the log against the model; it returns what differs.
func compare(log *Log, m *model, rng *rand.Rand) string {
	if got, want := log.LogStartOffset(), m.start; got != want {
		return fmt.Sprintf("log start offset %d, model %d", got, want)
	}
	if got, want := log.LogEndOffset(), m.logEndOffset(); got != want {
		return fmt.Sprintf("log end offset %d, model %d", got, want)
	}
	if got, want := log.Epochs(), m.epochs.Entries(); !slices.Equal(got, want) {
		return fmt.Sprintf("epochs %v, model %v", got, want)
	}
	if hw := log.HighWatermark(); hw < m.start || hw > m.logEndOffset() {
		return fmt.Sprintf("high watermark %d outside [%d, %d]", hw, m.start, m.logEndOffset())
	}
	if msg := checkIndexLayout(log); msg != "" {
		return msg
	}
	got, err := readAll(log)
	if err != nil {
		return fmt.Sprintf("read: %v", err)
	}
	if len(got) != len(m.batches) {
		return fmt.Sprintf("read %d batches, model %d", len(got), len(m.batches))
	}
	for i := range got {
		if !bytes.Equal(got[i], m.batches[i]) {
			return fmt.Sprintf("batch %d (offset %d) differs from the model's (offset %d)", i, got[i].BaseOffset(), rb.Batch(m.batches[i]).BaseOffset())
		}
	}
	// A point read from a random offset starts at the batch holding it or
	// the first one after it.
	if end := m.logEndOffset(); end > m.start {
		offset := m.start + rb.Offset(rng.Int64N(int64(end-m.start)))
		buf, err := log.ReadBytes(nil, offset, int64(1+rng.IntN(200)), end, true)
		if err != nil {
			return fmt.Sprintf("read at %d: %v", offset, err)
		}
		want := firstBatchFrom(m.batches, offset)
		if want == nil {
			if len(buf) != 0 {
				return fmt.Sprintf("read at %d returned %d bytes, model has nothing", offset, len(buf))
			}
		} else if b, err := rb.Parse(buf); err != nil || !bytes.Equal(b, want) {
			return fmt.Sprintf("read at %d: first batch differs from the model's (offset %d): %v", offset, rb.Batch(want).BaseOffset(), err)
		}
		timestamp := rb.Batch(m.batches[rng.IntN(len(m.batches))]).MaxTimestamp() - int64(rng.IntN(3))
		if msg := compareTimestamp(log, m, timestamp); msg != "" {
			return msg
		}
	}
	return ""
}

func firstBatchFrom(batches [][]byte, offset rb.Offset) []byte {
	for _, b := range batches {
		if rb.Batch(b).LastOffset() >= offset {
			return b
		}
	}
	return nil
}

func compareTimestamp(log *Log, m *model, timestamp int64) string {
	offset, ok, err := log.OffsetForTimestamp(timestamp)
	if err != nil {
		return fmt.Sprintf("offset for timestamp %d: %v", timestamp, err)
	}
	var want []byte
	for _, b := range m.batches {
		if rb.Batch(b).MaxTimestamp() >= timestamp {
			want = b
			break
		}
	}
	switch {
	case want == nil && ok:
		return fmt.Sprintf("offset for timestamp %d: got %d, model has none", timestamp, offset)
	case want != nil && !ok:
		return fmt.Sprintf("offset for timestamp %d: none, model has offset %d", timestamp, rb.Batch(want).BaseOffset())
	case want != nil && !bytes.Equal(firstBatchFrom(m.batches, offset), want):
		return fmt.Sprintf("offset for timestamp %d: got %d, model's batch is at %d", timestamp, offset, rb.Batch(want).BaseOffset())
	}
	return ""
}
