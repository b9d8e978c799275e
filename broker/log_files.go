package broker

import "github.com/mirrord/mirrord/logstore"

// LogFiles is what the node's partition logs hold open (descriptors and
// index mappings) and how the bound on it does (log.open.files.max,
// log.index.cache.max.bytes).
func (n *Node) LogFiles() logstore.FileCacheStats { return n.dir.FileCacheStats() }
