package engine

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/mirrord/mirrord/netio"
)

// A failover must not wait on the source it fails over from. The source
// here stops answering Metadata mid-refresh (a source that froze, or was
// killed while the mirror's request was on the wire) and the mirror's
// request timeout is ten minutes: the stop still completes, because an
// admin request never waits on the owner's metadata request.
func TestMirrorStopDoesNotWaitOnHungSource(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	var hang atomic.Bool
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // before Close: cleanups run last first
	cluster.ControlKey(int16(kmsg.Metadata), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cluster.KeepControl()
		// The owner's refresh asks for every topic (Topics null); the
		// client's own metadata names topics.
		if hang.Load() && req.(*kmsg.MetadataRequest).Topics == nil {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-release
		}
		return nil, nil, false
	})
	sourceAddr := cluster.ListenAddrs()[0]
	target, targetAddr := startNode(t, filepath.Join(t.TempDir(), "target"))
	produceMixed(t, sourceAddr, "orders", 2, 1)
	config := mirrorConfig(sourceAddr)
	config["request.timeout.ms"] = "600000"
	startMirroringWith(t, target, config, "orders")
	source, targetClient := newClient(t, sourceAddr), newClient(t, targetAddr)
	waitMirrored(t, source, targetClient, "orders", 2)

	hang.Store(true)
	select { // the next refresh (every 200 ms) is now on the wire, unanswered
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatal("the mirror sent no metadata refresh in a minute")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	results, err := target.Mirrors().SetTopicsDesiredState(ctx, "m", netio.StopMirroring, netio.TopicSelection{Names: []string{"orders"}})
	if err != nil || len(results) != 1 || results[0].Err != nil {
		t.Fatalf("stop while the source hangs: %v %+v", err, results)
	}
	checkMirrorTopicGuarded(t, target, "orders", false)
}
