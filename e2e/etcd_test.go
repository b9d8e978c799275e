package e2e

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/mirrord/mirrord/mirrordtest"
)

const (
	etcdRequestWait   = 10 * time.Second       // one request to a running etcd
	etcdDownWait      = 500 * time.Millisecond // a Get while etcd is stopped
	etcdDownFailMax   = 5 * time.Second        // ... must fail within this
	etcdReconnectWait = 60 * time.Second       // the client serves again after Start
	etcdReconnectTry  = 2 * time.Second        // one Get while reconnecting
	etcdReconnectPoll = 100 * time.Millisecond // between those Gets
	etcdReconnectMax  = 200                    // bound on those Gets
)

// TestEtcdStopStart: the etcd of the cluster tests (mirrordtest.StartEtcd,
// scripts/install-etcd.sh) serves clientv3 on its endpoint; stopped, a Get
// fails within its short context instead of hanging; started again on the
// same data directory and port, the same client reads the key back at the
// revision it was written at.
func TestEtcdStopStart(t *testing.T) {
	t.Parallel()
	started := time.Now()
	etcd := mirrordtest.StartEtcd(t)
	t.Logf("etcd serves on %v after %v", etcd.Endpoints(), time.Since(started).Round(time.Millisecond))
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   etcd.Endpoints(),
		DialTimeout: etcdRequestWait,
		Logger:      zap.NewNop(), // the retries while etcd is down log warnings
	})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()

	const key, value = "mirrord/e2e/etcd", "written before the stop"
	ctx, cancel := context.WithTimeout(t.Context(), etcdRequestWait)
	put, err := client.Put(ctx, key, value)
	cancel()
	if err != nil {
		t.Fatalf("put: %v", err)
	}
	written := put.Header.Revision
	readKey(t, client, key, value, written)

	if err := etcd.Stop(); err != nil {
		t.Fatal(err)
	}
	if etcd.Running() {
		t.Fatal("etcd runs after Stop")
	}
	if err := etcd.Stop(); !errors.Is(err, mirrordtest.ErrNotRunning) {
		t.Fatalf("second Stop: %v, want ErrNotRunning", err)
	}
	ctx, cancel = context.WithTimeout(t.Context(), etcdDownWait)
	started = time.Now()
	_, err = client.Get(ctx, key)
	took := time.Since(started)
	cancel()
	if err == nil {
		t.Fatal("a Get answered while etcd is stopped")
	}
	if took > etcdDownFailMax {
		t.Fatalf("a Get while etcd is stopped failed after %v, want within %v (context %v): %v", took, etcdDownFailMax, etcdDownWait, err)
	}
	t.Logf("Get while stopped: %v after %v", err, took.Round(time.Millisecond))

	endpoints := etcd.Endpoints()
	started = time.Now()
	if err := etcd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("etcd serves again after %v", time.Since(started).Round(time.Millisecond))
	if got := etcd.Endpoints(); len(got) != 1 || got[0] != endpoints[0] {
		t.Fatalf("endpoints after Start %v, want %v", got, endpoints)
	}
	if err := etcd.Start(); err == nil {
		t.Fatal("Start while running succeeded")
	}
	waitEtcdServes(t, client, key)
	readKey(t, client, key, value, written)
}

// readKey requires key to hold value, last written at revision.
func readKey(t *testing.T, client *clientv3.Client, key, value string, revision int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), etcdRequestWait)
	defer cancel()
	got, err := client.Get(ctx, key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if len(got.Kvs) != 1 {
		t.Fatalf("get %s: %d keys, want 1", key, len(got.Kvs))
	}
	if kv := got.Kvs[0]; string(kv.Value) != value || kv.ModRevision != revision {
		t.Fatalf("get %s: %q at revision %d, want %q at %d", key, kv.Value, kv.ModRevision, value, revision)
	}
}

// waitEtcdServes polls Get until the client, reconnecting after a Start,
// is answered: at most etcdReconnectMax tries within etcdReconnectWait.
func waitEtcdServes(t *testing.T, client *clientv3.Client, key string) {
	t.Helper()
	deadline := time.NewTimer(etcdReconnectWait)
	defer deadline.Stop()
	ticker := time.NewTicker(etcdReconnectPoll)
	defer ticker.Stop()
	var err error
	for try := 1; try <= etcdReconnectMax; try++ {
		ctx, cancel := context.WithTimeout(t.Context(), etcdReconnectTry)
		_, err = client.Get(ctx, key)
		cancel()
		if err == nil {
			t.Logf("served again after %d tries", try)
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("etcd not serving the client %v after Start: %v", etcdReconnectWait, err)
		case <-ticker.C:
		}
	}
	t.Fatalf("etcd not serving the client after %d tries: %v", etcdReconnectMax, err)
}
