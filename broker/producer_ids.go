package broker

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/vfs"
)

// producerIDs hands out producer IDs unique across restarts: it reserves
// them in blocks, persisting the end of the current block (file
// producer-id-block, "0\n<next free id>\n") before handing out any ID of
// it, as Kafka's controller allocates blocks to brokers.
type producerIDs struct {
	fs  vfs.FS
	dir string

	// above is the greatest ID reserveAbove was asked for: its fast path,
	// taken by every mirrored batch, reads it without the lock.
	above atomic.Int64

	mu        sync.Mutex
	nextID    int64
	reserved  int64 // IDs below this are reserved on disk, or in the cluster
	blockSize int64
	// allocate, in a cluster, reserves a block of the cluster's IDs (none
	// below minStart) and returns its first (SetProducerIDAllocator);
	// nil alone, where the file keeps the blocks.
	allocate func(minStart, size int64) (int64, error)
	// cluster is allocate != nil, for reserveAbove's path without the
	// lock; raising is set while a background reservation runs.
	cluster, raising atomic.Bool
}

// SetProducerIDAllocator makes the node take its producer IDs from its
// cluster's blocks (etcd's), so that no two nodes hand out one ID; the
// block in hand is dropped. Set it before the node serves.
func (n *Node) SetProducerIDAllocator(allocate func(minStart, size int64) (int64, error)) {
	p := n.txns.ids
	p.mu.Lock()
	defer p.mu.Unlock()
	p.allocate, p.reserved = allocate, p.nextID
	p.cluster.Store(allocate != nil)
}

const producerIDBlockName = "producer-id-block"

func openProducerIDs(fs vfs.FS, dir string) (*producerIDs, error) {
	ids := &producerIDs{fs: fs, dir: dir, blockSize: 1000}
	ids.above.Store(-1)
	name := path.Join(dir, producerIDBlockName)
	data, ok, err := logstore.ReadFile(fs, name)
	if err != nil || !ok {
		return ids, err
	}
	version, value, _ := strings.Cut(strings.TrimSpace(string(data)), "\n")
	next, perr := strconv.ParseInt(value, 10, 64)
	if version != "0" || perr != nil || next < 0 {
		return nil, fmt.Errorf("broker: %s: corrupt (want \"0\\n<id>\\n\", got %q)", name, data)
	}
	ids.nextID, ids.reserved = next, next
	return ids, nil
}

func (p *producerIDs) next() (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	// In a cluster an ID a mirror appended may be past the block in hand
	// (reserveAbove does not wait for the cluster's blocks).
	if !p.moveAbove() || p.nextID >= p.reserved {
		if err := p.reserveLocked(max(p.nextID, p.above.Load()+1) + p.blockSize); err != nil {
			return -1, err
		}
	}
	id := p.nextID
	p.nextID++
	return id, nil
}

// reserveAbove makes every ID handed out from now on greater than id (a
// producer ID of a mirror's source, which may write here after a
// failover), reserving a new block if id is past the current one.
//
// In a cluster it never waits on etcd (it runs on the append path, under
// the partition's lock): it raises the floor next() reserves above, and a
// background reservation takes a block of the cluster's above it so that
// the other nodes' blocks are too. Until that reservation is written
// (milliseconds; while etcd is away, until it returns or this node next
// hands out an ID) another node may hand out an ID of the source's.
func (p *producerIDs) reserveAbove(id int64) error {
	if id <= p.above.Load() {
		return nil
	}
	if p.cluster.Load() {
		for seen := p.above.Load(); id > seen && !p.above.CompareAndSwap(seen, id); seen = p.above.Load() {
		}
		if p.raising.CompareAndSwap(false, true) {
			go p.raiseClusterBlock()
		}
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if id < p.nextID {
		p.above.Store(max(p.above.Load(), id))
		return nil
	}
	if id+1 >= p.reserved {
		if err := p.reserveLocked(id + 1 + p.blockSize); err != nil {
			return err
		}
	}
	p.nextID = max(p.nextID, id+1) // a cluster's new block may start above id+1
	p.above.Store(id)
	return nil
}

// raiseClusterBlock takes a block of the cluster's above the floor
// reserveAbove raised, if the block in hand is not above it (one attempt:
// a later reserveAbove or next() tries again).
func (p *producerIDs) raiseClusterBlock() {
	defer p.raising.Store(false)
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.moveAbove() {
		_ = p.reserveLocked(p.above.Load() + 1 + p.blockSize) // its failure: next() reserves before it hands out an ID
	}
}

// moveAbove moves the next ID past the floor reserveAbove raised, within
// the block in hand; false if the floor is past the block (p.mu held).
func (p *producerIDs) moveAbove() bool {
	above := p.above.Load()
	switch {
	case p.nextID > above:
		return true
	case above+1 < p.reserved:
		p.nextID = above + 1
		return true
	}
	return false
}

// reserveLocked reserves the IDs below end (p.mu held): it persists end
// as the end of the reserved block, or in a cluster takes the next block
// of the cluster's from end - blockSize on.
func (p *producerIDs) reserveLocked(end int64) error {
	if p.allocate != nil {
		start, err := p.allocate(max(end-p.blockSize, p.above.Load()+1, 0), p.blockSize)
		if err != nil {
			return fmt.Errorf("broker: reserve producer IDs of the cluster: %w", err)
		}
		p.nextID, p.reserved = start, start+p.blockSize
		return nil
	}
	if err := logstore.WriteFileAtomic(p.fs, p.dir, producerIDBlockName, fmt.Appendf(nil, "0\n%d\n", end)); err != nil {
		return fmt.Errorf("broker: reserve producer IDs below %d: %w", end, err)
	}
	p.reserved = end
	return nil
}
