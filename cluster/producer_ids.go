package cluster

import (
	"context"
	"fmt"
	"strconv"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// producerIDsKey holds the cluster's next producer ID not yet given to a
// node. It sits beside the cluster's prefix, not under it, so that the
// nodes' caches do not reconcile at each block handed out.
func producerIDsKey(clusterID string) string { return "/mirrord/" + clusterID + ".producer-ids" }

// AllocateProducerIDs reserves a block of size producer IDs for one node,
// none below minStart, and returns its first: a compare-and-swap on the
// cluster's next free ID, as Kafka's controller hands brokers blocks
// (AllocateProducerIds). No two nodes ever get overlapping blocks, so two
// producers of a cluster never share an ID, whichever node they asked.
func AllocateProducerIDs(ctx context.Context, client *clientv3.Client, clusterID string, minStart, size int64) (int64, error) {
	if size < 1 || minStart < 0 {
		return -1, fmt.Errorf("cluster: producer ID block of %d from %d", size, minStart)
	}
	key := producerIDsKey(clusterID)
	for { // until a swap lands: each lost one is another node's won; ctx bounds it
		resp, err := client.Get(ctx, key)
		if err != nil {
			return -1, fmt.Errorf("cluster: allocate producer IDs: %w", err)
		}
		next, rev := int64(0), int64(0)
		if len(resp.Kvs) == 1 {
			if next, err = strconv.ParseInt(string(resp.Kvs[0].Value), 10, 64); err != nil || next < 0 {
				return -1, fmt.Errorf("cluster: %s holds %q, not a producer ID", key, resp.Kvs[0].Value)
			}
			rev = resp.Kvs[0].ModRevision
		}
		start := max(next, minStart)
		txn, err := client.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpPut(key, strconv.FormatInt(start+size, 10))).
			Commit()
		if err != nil {
			return -1, fmt.Errorf("cluster: allocate producer IDs: %w", err)
		}
		if txn.Succeeded {
			return start, nil
		}
	}
}
