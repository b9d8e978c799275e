package mirrord

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord/engine"
)

func TestClusterSettings(t *testing.T) {
	s, err := settingsOf(t, "etcd.endpoints=127.0.0.1:2379, 127.0.0.2:2379\nnode.id=3\nnode.lease.ms=4000\ndefault.replication.factor=3\nbroker.rack=r1\nreplica.lag.time.max.ms=5000\n")
	if err != nil {
		t.Fatal(err)
	}
	want := &engine.ClusterConfig{NodeID: 3, Endpoints: []string{"127.0.0.1:2379", "127.0.0.2:2379"}, LeaseTTL: 4 * time.Second, ReplicationFactor: 3, Rack: "r1"}
	if !reflect.DeepEqual(s.cluster, want) {
		t.Errorf("cluster settings %+v, want %+v", s.cluster, want)
	}
	if s.node.ReplicaLagTimeMax != 5*time.Second {
		t.Errorf("replica.lag.time.max.ms: %v", s.node.ReplicaLagTimeMax)
	}
	if s, err := settingsOf(t, "log.retention.ms=1000\n"); err != nil || s.cluster != nil {
		t.Errorf("a node alone: %+v, %v", s.cluster, err)
	}
	for text, want := range map[string]string{
		"node.id=2\n":                                                              "node.id is for a node of a cluster: set etcd.endpoints",
		"node.lease.ms=2000\n":                                                     "node.lease.ms is for a node of a cluster",
		"etcd.endpoints=127.0.0.1:2379\n":                                          "needs node.id",
		"etcd.endpoints= , \nnode.id=1\n":                                          "etcd.endpoints",
		"etcd.endpoints=127.0.0.1:2379\nnode.id=-1\n":                              "node.id -1 out of range",
		"etcd.endpoints=127.0.0.1:2379\nnode.id=1\nnode.lease.ms=10\n":             "node.lease.ms 10 out of range",
		"etcd.endpoints=127.0.0.1:2379\nnode.id=1\ndefault.replication.factor=0\n": "default.replication.factor 0 out of range",
	} {
		if _, err := settingsOf(t, text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error with %q", text, err, want)
		}
	}
}
