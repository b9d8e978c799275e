package broker

import (
	"fmt"
	"path"
	"strconv"
	"strings"
	"sync"

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

	mu        sync.Mutex
	nextID    int64
	reserved  int64 // IDs below this are reserved on disk
	blockSize int64
}

const producerIDBlockName = "producer-id-block"

func openProducerIDs(fs vfs.FS, dir string) (*producerIDs, error) {
	ids := &producerIDs{fs: fs, dir: dir, blockSize: 1000}
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
		end := p.nextID + p.blockSize
		if err := logstore.WriteFileAtomic(p.fs, p.dir, producerIDBlockName, fmt.Appendf(nil, "0\n%d\n", end)); err != nil {
			return -1, fmt.Errorf("broker: reserve producer IDs: %w", err)
		}
		p.reserved = end
	}
	id := p.nextID
	p.nextID++
	return id, nil
}
