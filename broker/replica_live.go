package broker

import "sync/atomic"

// liveNodes is the cluster's live nodes as the node last heard them
// (SetLiveNodes); nil: every node counts as live, as alone.
type liveNodes = atomic.Pointer[map[int32]bool]

// SetLiveNodes tells the node which nodes of its cluster are live. A
// leader's high watermark waits for a caught-up follower outside the ISR
// only while that follower's node is live (Kafka's
// Partition.maybeIncrementLeaderHW asks metadataCache.hasAliveBroker): a
// follower that died just after catching up must not hold acks=-1 for
// replica.lag.time.max.ms once the cluster has dropped it. The ISR
// goroutine makes a pass at once, as the high watermark may now rise.
func (n *Node) SetLiveNodes(ids []int32) {
	set := make(map[int32]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	n.live.Store(&set)
	n.isr.kick()
}

// nodeLive reports whether node id is live by the cluster's last word.
func (p *Partition) nodeLive(id int32) bool {
	if p.node == nil {
		return true
	}
	set := p.node.live.Load()
	return set == nil || (*set)[id]
}
