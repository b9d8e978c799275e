package logstore

import (
	"hash/maphash"
	"math/bits"

	rb "github.com/mirrord/mirrord/recordbatch"
)

// OffsetMap is the cleaner's bounded key -> latest offset map (Kafka's
// SkimpyOffsetMap): open addressing over a fixed array of slots, each a
// 128-bit hash of the key and an offset, 24 bytes, so its memory is fixed
// when it is made (log.cleaner.dedupe.buffer.size). Two keys with the
// same 128-bit hash are taken for one, as Kafka takes two keys with the
// same MD5 digest: the chance is negligible.
//
// It fills to loadFactor of its slots (log.cleaner.io.buffer.load.factor,
// 0.9); Full then says the cleaning must stop mapping and clean what it
// mapped. One cleaner owns one map and reuses it; it is not safe for
// concurrent use.
type OffsetMap struct {
	hashes  [][2]uint64
	offsets []rb.Offset
	used    int
	limit   int
	latest  rb.Offset // the last offset mapped (Kafka's latestOffset); -1 when none
	seeds   [2]maphash.Seed
}

// offsetMapSlotBytes is the memory of one slot: a 128-bit hash and an offset.
const offsetMapSlotBytes = 24

// NewOffsetMap makes a map of memoryBytes (at least one slot) that
// accepts new keys up to loadFactor of its slots (at least one key).
func NewOffsetMap(memoryBytes int64, loadFactor float64) *OffsetMap {
	slots := max(int(memoryBytes/offsetMapSlotBytes), 2)
	m := &OffsetMap{
		hashes:  make([][2]uint64, slots),
		offsets: make([]rb.Offset, slots),
		limit:   min(max(int(float64(slots)*loadFactor), 1), slots-1),
		seeds:   [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
	}
	m.latest = -1 // the slots are zero: empty, and not yet touched
	return m
}

// Clear empties the map for the next cleaning.
func (m *OffsetMap) Clear() {
	if m.used > 0 {
		clear(m.hashes)
	}
	m.used, m.latest = 0, -1
}

// Len is the number of keys mapped; Capacity how many it accepts.
func (m *OffsetMap) Len() int      { return m.used }
func (m *OffsetMap) Capacity() int { return m.limit }

// Full reports that the map takes no more keys (Kafka stops at the same
// point: when the count reaches the limit, even for a key already there).
func (m *OffsetMap) Full() bool { return m.used >= m.limit }

// Latest is the last offset the cleaning mapped (batches wholly read),
// -1 when none.
func (m *OffsetMap) Latest() rb.Offset { return m.latest }

func (m *OffsetMap) setLatest(o rb.Offset) { m.latest = max(m.latest, o) }

// hash never returns the zero pair, which marks an empty slot.
func (m *OffsetMap) hash(key []byte) [2]uint64 {
	h := [2]uint64{maphash.Bytes(m.seeds[0], key), maphash.Bytes(m.seeds[1], key)}
	if h == ([2]uint64{}) {
		h[0] = 1
	}
	return h
}

// slot returns the slot of h: where it is, or the empty one where it goes
// (linear probing from the hash's home slot; the map is never full, so a
// probe ends within len(slots) steps).
func (m *OffsetMap) slot(h [2]uint64) int {
	n := uint64(len(m.hashes))
	home, _ := bits.Mul64(h[0], n) // h[0] scaled to [0, n)
	for i, probes := home, uint64(0); probes < n; probes++ {
		if s := m.hashes[i]; s == h || s == ([2]uint64{}) {
			return int(i)
		}
		if i++; i == n {
			i = 0
		}
	}
	panic("logstore: offset map has no free slot")
}

// Put maps key to offset (the later offset of a key wins, as the map is
// filled in offset order). The caller checks Full first.
func (m *OffsetMap) Put(key []byte, offset rb.Offset) {
	h := m.hash(key)
	i := m.slot(h)
	if m.hashes[i] != h {
		if m.used >= len(m.hashes)-1 {
			panic("logstore: offset map overfilled")
		}
		m.hashes[i] = h
		m.used++
	}
	m.offsets[i] = offset
}

// Get returns the latest offset of key, or -1 when it is not mapped.
func (m *OffsetMap) Get(key []byte) rb.Offset {
	h := m.hash(key)
	i := m.slot(h)
	if m.hashes[i] != h {
		return -1
	}
	return m.offsets[i]
}
