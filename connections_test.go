package mirrord

import (
	"strings"
	"testing"
	"time"
)

func TestTakeConnectionProperties(t *testing.T) {
	for _, tc := range []struct {
		name  string
		props map[string]string
		check func(t *testing.T, got map[string]any)
		err   string
	}{
		{name: "none", props: map[string]string{}, check: func(t *testing.T, got map[string]any) {
			want := map[string]any{"queued": int64(0), "idle": time.Duration(0), "max": 0, "perIP": 0, "overrides": 0, "request": int32(0)}
			compareLimits(t, got, want)
		}},
		{name: "all", props: map[string]string{"queued.max.request.bytes": " 209715200", "connections.max.idle.ms": "60000", "max.connections": "100",
			"max.connections.per.ip": "10", "max.connections.per.ip.overrides": "127.0.0.2:20, 127.0.0.3:0", "socket.request.max.bytes": "1048576", "num.partitions": "3"},
			check: func(t *testing.T, got map[string]any) {
				want := map[string]any{"queued": int64(200 << 20), "idle": time.Minute, "max": 100, "perIP": 10, "overrides": 2, "request": int32(1 << 20)}
				compareLimits(t, got, want)
			}},
		{name: "idle never", props: map[string]string{"connections.max.idle.ms": "-1"}, check: func(t *testing.T, got map[string]any) {
			if got["idle"] != time.Duration(-1) {
				t.Errorf("idle %v, want -1 (never)", got["idle"])
			}
		}},
		{name: "per ip zero with overrides", props: map[string]string{"max.connections.per.ip": "0", "max.connections.per.ip.overrides": "127.0.0.2:1"},
			check: func(t *testing.T, got map[string]any) {
				if got["perIP"] != -1 {
					t.Errorf("per ip %v, want -1 (the overrides only)", got["perIP"])
				}
			}},
		{name: "per ip zero alone", props: map[string]string{"max.connections.per.ip": "0"}, err: "can be set to zero only if max.connections.per.ip.overrides"},
		{name: "unbounded queue", props: map[string]string{"queued.max.request.bytes": "-1"}, err: "no -1"},
		{name: "queue below a request", props: map[string]string{"queued.max.request.bytes": "1000"}, err: "must be larger or equal to socket.request.max.bytes"},
		{name: "idle zero", props: map[string]string{"connections.max.idle.ms": "0"}, err: "would close every connection"},
		{name: "bad number", props: map[string]string{"max.connections": "many"}, err: "Invalid value many for configuration max.connections"},
		{name: "bad override", props: map[string]string{"max.connections.per.ip.overrides": "127.0.0.2"}, err: "not host:count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := takeConnectionProperties(tc.props)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, key := range connectionPropertyNames {
				if _, ok := tc.props[key]; ok {
					t.Errorf("%s left in the properties for the node's checks", key)
				}
			}
			tc.check(t, map[string]any{"queued": cfg.QueuedMaxRequestBytes, "idle": cfg.ConnectionsMaxIdle, "max": cfg.MaxConnections,
				"perIP": cfg.MaxConnectionsPerIP, "overrides": len(cfg.MaxConnectionsPerIPOverrides), "request": cfg.MaxRequestBytes})
		})
	}
}

func compareLimits(t *testing.T, got, want map[string]any) {
	t.Helper()
	for key, w := range want {
		if got[key] != w {
			t.Errorf("%s = %v, want %v", key, got[key], w)
		}
	}
}
