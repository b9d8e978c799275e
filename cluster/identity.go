package cluster

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// clusterIDKey holds the ID of the mirrord cluster an etcd serves. It sits
// beside the clusters' prefixes and never under one: a cluster ID is a
// base64 UUID, which has no '.'.
const clusterIDKey = "/mirrord/cluster.id"

// ClaimClusterID returns the cluster ID etcd holds, first storing proposed
// there when it holds none: the first node to start names the cluster
// (with its data directory's ID, or a new one), and every later node
// takes that name, as KRaft brokers take the cluster ID their storage was
// formatted with. One transaction, so two first nodes cannot both win;
// named reports whether this call named it.
func ClaimClusterID(ctx context.Context, client *clientv3.Client, proposed string) (id string, named bool, err error) {
	resp, err := client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(clusterIDKey), "=", 0)).
		Then(clientv3.OpPut(clusterIDKey, proposed)).
		Else(clientv3.OpGet(clusterIDKey)).
		Commit()
	if err != nil {
		return "", false, fmt.Errorf("cluster: claim the cluster ID: %w", err)
	}
	if resp.Succeeded {
		return proposed, true, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return "", false, fmt.Errorf("cluster: claim the cluster ID: %s vanished between compare and get", clusterIDKey)
	}
	return string(kvs[0].Value), false, nil
}

// ClusterID reads the cluster ID etcd holds; ok is false when no node has
// named one yet.
func ClusterID(ctx context.Context, client *clientv3.Client) (id string, ok bool, err error) {
	resp, err := client.Get(ctx, clusterIDKey)
	if err != nil {
		return "", false, fmt.Errorf("cluster: read the cluster ID: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return "", false, nil
	}
	return string(resp.Kvs[0].Value), true, nil
}
