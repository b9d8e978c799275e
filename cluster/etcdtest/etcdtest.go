// Package etcdtest starts etcd inside a test process: a cluster of embedded
// members (go.etcd.io/etcd/server/v3/embed) on 127.0.0.1 ports, for the
// fast tests of the cluster code. The e2e suite runs the etcd binary
// instead (mirrordtest).
package etcdtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// StartTimeout bounds the members' first election (a loaded machine, -race).
const StartTimeout = 60 * time.Second

// Cluster is a running embedded etcd cluster.
type Cluster struct {
	servers   []*embed.Etcd
	endpoints []string
	dir       string
}

// Start starts members etcd members on free 127.0.0.1 ports, their data
// under a new temporary directory, and returns once all are ready.
func Start(members int) (*Cluster, error) {
	dir, err := os.MkdirTemp("", "etcdtest-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir}
	ports, err := freeLoopbackPorts(2 * members)
	if err != nil {
		c.Close()
		return nil, err
	}
	var initial []string
	for i := range members {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, ports[2*i+1]))
	}
	for i := range members {
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
		cfg.InitialClusterToken = "etcdtest"
		cfg.ClusterState = embed.ClusterStateFlagNew
		server, err := embed.StartEtcd(cfg)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("etcdtest: member m%d: %w", i, err)
		}
		c.servers = append(c.servers, server)
		c.endpoints = append(c.endpoints, client.Host)
	}
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	for i, server := range c.servers {
		select {
		case <-server.Server.ReadyNotify():
		case err := <-server.Err():
			c.Close()
			return nil, fmt.Errorf("etcdtest: member m%d: %w", i, err)
		case <-ctx.Done():
			c.Close()
			return nil, fmt.Errorf("etcdtest: member m%d not ready after %v", i, StartTimeout)
		}
	}
	return c, nil
}

// Endpoints are the members' client addresses (host:port).
func (c *Cluster) Endpoints() []string { return c.endpoints }

// Close stops every member and removes their data.
func (c *Cluster) Close() {
	for _, server := range c.servers {
		server.Close()
	}
	c.servers = nil
	os.RemoveAll(c.dir)
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
