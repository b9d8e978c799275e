package mirrord

// The settings of a cluster node. A node joins a cluster when its
// properties name etcd (etcd.endpoints, serve's --etcd-endpoints) and its
// node.id (--node-id); without them it runs alone, as it always has.
//
//	etcd.endpoints              etcd's client addresses, comma-separated (mirrord's own key)
//	node.id                     the node's ID, 0 or more (Kafka's name); alone, the data directory's
//	node.lease.ms               the node's lease in etcd (mirrord's own key): 10000
//	default.replication.factor  replicas of a new topic, capped by the live nodes: 1 (Kafka's default)
//	broker.rack                 the node's rack, which placement spreads replicas over
//	replica.lag.time.max.ms     a follower not caught up for this long leaves the ISR: 30000 (Kafka's)

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/mirrord/mirrord/engine"
)

// clusterPropertyNames are the keys takeClusterProperties reads.
var clusterPropertyNames = []string{"etcd.endpoints", "node.id", "node.lease.ms", "default.replication.factor", "broker.rack", "replica.lag.time.max.ms"}

// takeClusterProperties moves the cluster keys out of props: nil when the
// node runs alone. replica.lag.time.max.ms goes to node.
func takeClusterProperties(props map[string]string, node *engine.NodeConfig) (*engine.ClusterConfig, error) {
	endpoints, clustered := props["etcd.endpoints"]
	if !clustered {
		for _, key := range clusterPropertyNames[1:] {
			if _, ok := props[key]; ok {
				return nil, fmt.Errorf("mirrord: %s is for a node of a cluster: set etcd.endpoints (--etcd-endpoints) too", key)
			}
		}
		return nil, nil
	}
	cc := &engine.ClusterConfig{}
	for _, e := range strings.Split(endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			cc.Endpoints = append(cc.Endpoints, e)
		}
	}
	if len(cc.Endpoints) == 0 {
		return nil, fmt.Errorf("mirrord: etcd.endpoints %q: want host:port[,host:port...]", endpoints)
	}
	delete(props, "etcd.endpoints")
	id, ok, err := takeNumber(props, "node.id", 0, math.MaxInt32)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("mirrord: a node of a cluster needs node.id (--node-id)")
	}
	cc.NodeID = int32(id)
	if ms, ok, err := takeNumber(props, "node.lease.ms", 1000, time.Hour.Milliseconds()); err != nil {
		return nil, err
	} else if ok {
		cc.LeaseTTL = time.Duration(ms) * time.Millisecond
	}
	if rf, ok, err := takeNumber(props, "default.replication.factor", 1, math.MaxInt16); err != nil {
		return nil, err
	} else if ok {
		cc.ReplicationFactor = int(rf)
	}
	if ms, ok, err := takeNumber(props, "replica.lag.time.max.ms", 100, time.Hour.Milliseconds()); err != nil {
		return nil, err
	} else if ok {
		node.ReplicaLagTimeMax = time.Duration(ms) * time.Millisecond
	}
	if rack, ok := props["broker.rack"]; ok {
		cc.Rack = strings.TrimSpace(rack)
		delete(props, "broker.rack")
	}
	return cc, nil
}
