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
	reserved  int64 // IDs below this are reserved on disk
	blockSize int64
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
	if p.nextID >= p.reserved {
		if err := p.reserveLocked(p.nextID + p.blockSize); err != nil {
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
func (p *producerIDs) reserveAbove(id int64) error {
	if id <= p.above.Load() {
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
	p.nextID = id + 1
	p.above.Store(id)
	return nil
}

// reserveLocked persists end as the end of the reserved block (p.mu held).
func (p *producerIDs) reserveLocked(end int64) error {
	if err := logstore.WriteFileAtomic(p.fs, p.dir, producerIDBlockName, fmt.Appendf(nil, "0\n%d\n", end)); err != nil {
		return fmt.Errorf("broker: reserve producer IDs below %d: %w", end, err)
	}
	p.reserved = end
	return nil
}
