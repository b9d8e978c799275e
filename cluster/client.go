package cluster

import (
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// reconnectBackoffMax bounds the wait between two attempts to reach etcd
// again. gRPC's default grows to 2 minutes; a node must renew its lease
// within the lease's TTL of etcd's return (a returning etcd gives every
// lease a full TTL again), so it tries again at least every second.
const reconnectBackoffMax = time.Second

// NewClient is a client of the etcd at endpoints for a node or a tool:
// etcd's own log is dropped (the node logs what matters), and it
// reconnects within reconnectBackoffMax of etcd's return.
func NewClient(endpoints []string, dialTimeout time.Duration) (*clientv3.Client, error) {
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: dialTimeout,
		Logger:      zap.NewNop(),
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: reconnectBackoffMax},
			MinConnectTimeout: dialTimeout,
		})},
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: etcd at %v: %w", endpoints, err)
	}
	return client, nil
}
