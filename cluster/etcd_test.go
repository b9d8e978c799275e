package cluster

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mirrord/mirrord/cluster/etcdtest"
)

// The tests of this package share one 3-member etcd cluster, started in the
// test process on the first call to testEtcd and closed by TestMain. Each
// test works under its own cluster ID, so tests do not see each other's keys.

const etcdMembers = 3

var (
	etcdOnce sync.Once
	etcd     *etcdtest.Cluster
	etcdErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if etcd != nil {
		etcd.Close()
	}
	os.Exit(code)
}

// testEtcd returns the client endpoints of the shared etcd cluster, starting
// it on first use.
func testEtcd(t *testing.T) []string {
	t.Helper()
	etcdOnce.Do(func() { etcd, etcdErr = etcdtest.Start(etcdMembers) })
	if etcdErr != nil {
		t.Fatalf("start etcd: %v", etcdErr)
	}
	return etcd.Endpoints()
}

// testClient returns a client of the shared etcd cluster, closed at the end
// of the test.
func testClient(t *testing.T) *clientv3.Client {
	t.Helper()
	client, err := clientv3.New(clientv3.Config{Endpoints: testEtcd(t), DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("etcd client: %v", err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

func TestEtcdStarts(t *testing.T) {
	client := testClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := client.Put(ctx, "/cluster-test/hello", "world"); err != nil {
		t.Fatal(err)
	}
	resp, err := client.Get(ctx, "/cluster-test/hello")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "world" {
		t.Fatalf("get: %v %v", resp, err)
	}
}
