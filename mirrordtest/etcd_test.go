package mirrordtest

import (
	"errors"
	"net"
	"testing"
	"time"
)

// etcdExitedWithin bounds a Start on a taken port: etcd exits on the bind
// error, and Start must see that instead of polling for ReadyWait.
const etcdExitedWithin = 20 * time.Second

// TestEtcdStartOnTakenPort: a Start whose client port was taken while etcd
// was stopped fails as soon as etcd exits (errExited), and leaves the
// Etcd able to start on the same port once it is free again.
func TestEtcdStartOnTakenPort(t *testing.T) {
	etcd := StartEtcd(t)
	if err := etcd.Stop(); err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", etcd.Endpoints()[0])
	if err != nil {
		t.Fatalf("take the stopped etcd's port: %v", err)
	}
	started := time.Now()
	err = etcd.Start()
	took := time.Since(started)
	taken.Close()
	if !errors.Is(err, errExited) || took > etcdExitedWithin {
		t.Fatalf("Start on a taken port: %v after %v, want errExited within %v", err, took, etcdExitedWithin)
	}
	if etcd.Running() {
		t.Fatal("etcd runs after a failed Start")
	}
	if err := etcd.Start(); err != nil {
		t.Fatalf("Start on the freed port: %v", err)
	}
	if !etcd.Running() {
		t.Fatal("etcd not running after Start")
	}
}
