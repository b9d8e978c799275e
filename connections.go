package mirrord

// The listeners' connection and request-memory limits, by Kafka's broker
// config names, parsed and checked as Kafka checks them (KafkaConfig),
// and the node's memory ceiling they make (README "Memory").

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/mirrord/mirrord/netio"
	"github.com/mirrord/mirrord/recordbatch/records"
)

// connectionPropertyNames are the keys takeConnectionProperties takes.
var connectionPropertyNames = []string{"socket.request.max.bytes", "queued.max.request.bytes", "connections.max.idle.ms",
	"max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides"}

// decompressionBytes is what validating and rewriting produced records
// may hold beyond their frames, node-wide: every decoder in use takes its
// state from records' budget.
const decompressionBytes = records.DecompressBudget

// takeConnectionProperties moves the connection keys out of props into a
// netio.Config's limits.
func takeConnectionProperties(props map[string]string) (netio.Config, error) {
	var cfg netio.Config
	number := func(key string, min, max int64) (int64, bool, error) {
		text, ok := props[key]
		if !ok {
			return 0, false, nil
		}
		delete(props, key)
		n, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
		if err != nil || n < min || n > max {
			return 0, false, fmt.Errorf("mirrord: Invalid value %s for configuration %s: a number in [%d, %d]", strings.TrimSpace(text), key, min, max)
		}
		return n, true, nil
	}
	if n, ok, err := number("socket.request.max.bytes", 1, math.MaxInt32); err != nil {
		return cfg, err
	} else if ok {
		cfg.MaxRequestBytes = int32(n)
	}
	// Kafka's -1 (its default) is unbounded; mirrord keeps request memory
	// bounded, so the value must be one.
	if n, ok, err := number("queued.max.request.bytes", 1, math.MaxInt64); err != nil {
		return cfg, fmt.Errorf("%w (mirrord keeps request memory bounded: no -1)", err)
	} else if ok {
		cfg.QueuedMaxRequestBytes = n
	}
	// Kafka's negative is "never"; 0 would close every connection between
	// two requests.
	if n, ok, err := number("connections.max.idle.ms", math.MinInt64, math.MaxInt64/int64(time.Millisecond)); err != nil {
		return cfg, err
	} else if ok {
		switch {
		case n == 0:
			return cfg, fmt.Errorf("mirrord: connections.max.idle.ms 0 would close every connection between requests (a negative value never closes idle ones)")
		case n < 0:
			cfg.ConnectionsMaxIdle = -1
		default:
			cfg.ConnectionsMaxIdle = time.Duration(n) * time.Millisecond
		}
	}
	if n, ok, err := number("max.connections", 1, math.MaxInt32); err != nil {
		return cfg, err
	} else if ok {
		cfg.MaxConnections = int(n)
	}
	if text, ok := props["max.connections.per.ip.overrides"]; ok {
		delete(props, "max.connections.per.ip.overrides")
		overrides, err := netio.ParseMaxConnectionsPerIPOverrides(text)
		if err != nil {
			return cfg, fmt.Errorf("mirrord: %w", err)
		}
		cfg.MaxConnectionsPerIPOverrides = overrides
	}
	if n, ok, err := number("max.connections.per.ip", 0, math.MaxInt32); err != nil {
		return cfg, err
	} else if ok {
		cfg.MaxConnectionsPerIP = int(n)
		if n == 0 {
			if len(cfg.MaxConnectionsPerIPOverrides) == 0 {
				return cfg, fmt.Errorf("mirrord: max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides property is set.")
			}
			cfg.MaxConnectionsPerIP = -1 // none but the overrides
		}
	}
	if limits := cfg.WithDefaults(); limits.QueuedMaxRequestBytes < int64(limits.MaxRequestBytes) {
		return cfg, fmt.Errorf("mirrord: queued.max.request.bytes must be larger or equal to socket.request.max.bytes (%d < %d)", limits.QueuedMaxRequestBytes, limits.MaxRequestBytes)
	}
	return cfg, nil
}
