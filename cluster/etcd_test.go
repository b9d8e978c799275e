package cluster

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// The tests of this package share one 3-member etcd cluster, started in the
// test process on the first call to testEtcd and closed by TestMain. Each
// test works under its own cluster ID, so tests do not see each other's keys.

const (
	etcdMembers      = 3
	etcdStartTimeout = 60 * time.Second // the members' election on a loaded machine under -race
)

var (
	etcdOnce      sync.Once
	etcdServers   []*embed.Etcd
	etcdEndpoints []string
	etcdDir       string
	etcdErr       error
)

func TestMain(m *testing.M) {
	code := m.Run()
	stopEtcd()
	os.Exit(code)
}

// testEtcd returns the client endpoints of the shared etcd cluster, starting
// it on first use.
func testEtcd(t *testing.T) []string {
	t.Helper()
	etcdOnce.Do(func() { etcdEndpoints, etcdErr = startEtcd() })
	if etcdErr != nil {
		t.Fatalf("start etcd: %v", etcdErr)
	}
	return etcdEndpoints
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

// freeLoopbackPorts returns n distinct free TCP ports on 127.0.0.1, holding
// each listener until all are chosen so that no port is returned twice.
func freeLoopbackPorts(n int) ([]int, error) {
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func loopbackURL(port int) url.URL {
	return url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", port)}
}

func startEtcd() ([]string, error) {
	dir, err := os.MkdirTemp("", "cluster-etcd-")
	if err != nil {
		return nil, err
	}
	etcdDir = dir
	ports, err := freeLoopbackPorts(2 * etcdMembers)
	if err != nil {
		return nil, err
	}
	var initial []string
	for i := range etcdMembers {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, ports[2*i+1]))
	}
	var endpoints []string
	for i := range etcdMembers {
		cfg := embed.NewConfig()
		cfg.Name = fmt.Sprintf("m%d", i)
		cfg.Dir = fmt.Sprintf("%s/m%d", dir, i)
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop()) // shutdown logs "errors" of closed listeners
		cfg.TickMs = 50
		cfg.ElectionMs = 1000
		client, peer := loopbackURL(ports[2*i]), loopbackURL(ports[2*i+1])
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
		cfg.InitialCluster = strings.Join(initial, ",")
		cfg.InitialClusterToken = "cluster-test"
		cfg.ClusterState = embed.ClusterStateFlagNew
		server, err := embed.StartEtcd(cfg)
		if err != nil {
			stopEtcd()
			return nil, fmt.Errorf("member m%d: %w", i, err)
		}
		etcdServers = append(etcdServers, server)
		endpoints = append(endpoints, client.Host)
	}
	ctx, cancel := context.WithTimeout(context.Background(), etcdStartTimeout)
	defer cancel()
	for i, server := range etcdServers {
		select {
		case <-server.Server.ReadyNotify():
		case err := <-server.Err():
			stopEtcd()
			return nil, fmt.Errorf("member m%d: %w", i, err)
		case <-ctx.Done():
			stopEtcd()
			return nil, fmt.Errorf("member m%d not ready after %v", i, etcdStartTimeout)
		}
	}
	return endpoints, nil
}

func stopEtcd() {
	for _, server := range etcdServers {
		server.Close()
	}
	etcdServers = nil
	if etcdDir != "" {
		os.RemoveAll(etcdDir)
	}
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
