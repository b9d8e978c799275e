package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Registration is a node's entry in the registry: its key nodes/<nodeID>,
// put with a lease that a keep-alive goroutine renews until Close. If the
// keep-alive ends on its own (etcd unreachable for the lease's TTL, or the
// lease revoked), Lost is closed: the node is no longer live for the
// controller and must Join again.
type Registration struct {
	client *clientv3.Client
	node   Node
	lease  clientv3.LeaseID
	cancel context.CancelFunc
	lost   chan struct{} // closed when the keep-alive goroutine returns

	closeOnce sync.Once
	closeErr  error
}

// Join registers node in the cluster under a lease of the given TTL (at
// least a second; etcd may raise it to its minimum) and keeps the lease
// alive until Close. A node ID already registered under a live lease is
// refused with ErrDuplicateNode, as Kafka refuses a duplicate broker
// registration until the old session expires.
func Join(ctx context.Context, client *clientv3.Client, clusterID string, node Node, ttl time.Duration) (*Registration, error) {
	if ttl < time.Second {
		return nil, fmt.Errorf("cluster: lease TTL %v is under a second", ttl)
	}
	grant, err := client.Grant(ctx, int64(ttl/time.Second))
	if err != nil {
		return nil, fmt.Errorf("cluster: node %d: lease: %w", node.ID, err)
	}
	key := nodeKey(clusterID, node.ID)
	resp, err := client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, encodeJSON(node), clientv3.WithLease(grant.ID))).
		Commit()
	if err == nil && !resp.Succeeded {
		err = fmt.Errorf("cluster: node %d: %w", node.ID, ErrDuplicateNode)
	}
	if err != nil {
		if _, revokeErr := client.Revoke(context.WithoutCancel(ctx), grant.ID); revokeErr != nil {
			err = fmt.Errorf("%w (and revoking its lease: %v)", err, revokeErr)
		}
		return nil, err
	}
	return keepAlive(ctx, client, node, grant.ID)
}

// keepAlive renews lease, the lease of node's key, until Close.
func keepAlive(ctx context.Context, client *clientv3.Client, node Node, lease clientv3.LeaseID) (*Registration, error) {
	keepAliveCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	alive, err := client.KeepAlive(keepAliveCtx, lease)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("cluster: node %d: keep-alive: %w", node.ID, err)
	}
	r := &Registration{client: client, node: node, lease: lease, cancel: cancel, lost: make(chan struct{})}
	go func() {
		defer close(r.lost)
		for range alive { // the client renews; the channel closes when the lease is gone or keepAliveCtx ends
		}
	}()
	return r, nil
}

// Rejoin registers a node whose registration was lost. When its lease
// still lives in etcd, the keep-alive resumes on it and the node's key
// never left the registry: etcd was unreachable for longer than the TTL
// (the client gave the lease up), but a restarted or re-elected etcd
// gives every lease a full TTL again, so nothing saw the node go. When
// the lease is gone, the node joins anew (Join; ErrDuplicateNode cannot
// happen for a key whose lease is gone). lost must have ended (Lost).
func Rejoin(ctx context.Context, lost *Registration, clusterID string, ttl time.Duration) (*Registration, error) {
	resp, err := lost.client.TimeToLive(ctx, lost.lease)
	if err != nil {
		return nil, fmt.Errorf("cluster: node %d: lease: %w", lost.node.ID, err)
	}
	if resp.TTL > 0 {
		if r, err := keepAlive(ctx, lost.client, lost.node, lost.lease); err == nil {
			return r, nil
		}
	}
	return Join(ctx, lost.client, clusterID, lost.node, ttl)
}

// Lost is closed when the registration's keep-alive has ended, by Close or
// because the lease could not be renewed.
func (r *Registration) Lost() <-chan struct{} { return r.lost }

// Close stops the keep-alive, waits for its goroutine, and revokes the
// lease, which deletes the node's key: the node leaves the live set at once
// rather than after its TTL. Calls after the first return the first's
// result.
func (r *Registration) Close(ctx context.Context) error {
	r.closeOnce.Do(func() {
		r.cancel()
		<-r.lost
		if _, err := r.client.Revoke(ctx, r.lease); err != nil {
			r.closeErr = fmt.Errorf("cluster: node %d: revoke lease: %w", r.node.ID, err)
		}
	})
	return r.closeErr
}

// LiveNodes returns the registered nodes, by ID.
func LiveNodes(ctx context.Context, client *clientv3.Client, clusterID string) ([]Node, error) {
	state, err := readState(ctx, client, clusterID)
	if err != nil {
		return nil, err
	}
	return state.liveNodes(), nil
}

// Drain sets (drain true) or clears node nodeID's drain mark, the key
// drain/<nodeID>. The mark is a key of its own rather than a field of the
// node's registry value because that value is the node's, under the node's
// lease: an operator's mark must survive the node's restart (a node
// drained for maintenance stays drained when it comes back) and must be
// settable while the node is down. Its presence is the mark; its value is
// "{}". Setting a set mark or clearing a clear one is not an error.
func Drain(ctx context.Context, client *clientv3.Client, clusterID string, nodeID int32, drain bool) error {
	key := drainKey(clusterID, nodeID)
	var err error
	if drain {
		_, err = client.Put(ctx, key, "{}")
	} else {
		_, err = client.Delete(ctx, key)
	}
	if err != nil {
		return fmt.Errorf("cluster: drain node %d (%v): %w", nodeID, drain, err)
	}
	return nil
}
