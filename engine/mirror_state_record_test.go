package engine

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mirrord/mirrord/engine/mirrorstate"
	"github.com/mirrord/mirrord/netio"
)

var testMirrorStateKey = MirrorStateKey{Mirror: "dc-east", TopicID: netio.TopicID{0xde, 0xad, 15: 0xef}, Partition: 3}

// testMirrorStateValues are valid records of several states.
func testMirrorStateValues() []mirrorstate.Record {
	base := mirrorstate.Record{State: mirrorstate.Mirroring, Previous: mirrorstate.LogAlignment, StateEpoch: 9, LeaderEpoch: 20,
		SourceLeaderEpoch: 10, NextRetryAtMillis: -1, LastMirrorEpoch: -1, LastMirrorOffset: -1, TruncateTo: -1}
	failed := base
	failed.State, failed.Previous, failed.RetryCount, failed.Retryable = mirrorstate.Failed, mirrorstate.Mirroring, 2, true
	failed.NextRetryAtMillis, failed.Error = 1_700_000_000_123, "connection refused: ü"
	stopping := base
	stopping.State, stopping.Previous, stopping.StopStep = mirrorstate.Stopping, mirrorstate.Mirroring, mirrorstate.StopAbortTransactions
	stopping.LastMirrorEpoch, stopping.LastMirrorOffset = 10, 4096
	failedStop := stopping
	failedStop.State, failedStop.Previous, failedStop.Error = mirrorstate.Failed, mirrorstate.Stopping, "gave up after 20 retries: disk full"
	ule := base
	ule.State, ule.Previous, ule.TruncateTo = mirrorstate.ULERecovery, mirrorstate.Mirroring, 77
	return []mirrorstate.Record{base, failed, stopping, failedStop, ule}
}

func TestMirrorStateRecordRoundTrip(t *testing.T) {
	for _, value := range testMirrorStateValues() {
		key, encoded := EncodeMirrorStateRecord(testMirrorStateKey, value)
		gotKey, gotValue, err := DecodeMirrorStateRecord(key, encoded)
		if err != nil || gotKey != testMirrorStateKey || gotValue != value {
			t.Fatalf("%v: decoded %v %v %v", value, gotKey, gotValue, err)
		}
		if len(encoded) != mirrorStateValueFixedLen+len(value.Error) {
			t.Fatalf("%v: %d bytes", value, len(encoded))
		}
	}
}

// The format is pinned: a change needs a new version byte.
func TestMirrorStateRecordGolden(t *testing.T) {
	key, value := EncodeMirrorStateRecord(testMirrorStateKey, testMirrorStateValues()[1])
	const wantKey = "00" + "0007" + "64632d65617374" + "dead00000000000000000000000000ef" + "00000003"
	const wantValue = "00" + "09" + "04" + "00" + "01" + "0000000000000009" + "00000014" + "0000000a" + "00000002" +
		"0000018bcfe5687b" + "ffffffff" + "ffffffffffffffff" + "ffffffffffffffff" +
		"0016" + "636f6e6e656374696f6e20726566757365643a20c3bc"
	if got := hex.EncodeToString(key); got != wantKey {
		t.Errorf("key %s", got)
	}
	if got := hex.EncodeToString(value); got != wantValue {
		t.Errorf("value %s\nwant  %s", got, wantValue)
	}
}

func TestMirrorStateRecordCorrupt(t *testing.T) {
	key, value := EncodeMirrorStateRecord(testMirrorStateKey, testMirrorStateValues()[1])
	patch := func(b []byte, at int, with ...byte) []byte {
		out := bytes.Clone(b)
		copy(out[at:], with)
		return out
	}
	for _, c := range []struct {
		name       string
		key, value []byte
	}{
		{"empty key", nil, value},
		{"key version", patch(key, 0, 1), value},
		{"key truncated", key[:len(key)-1], value},
		{"key trailing", append(bytes.Clone(key), 0), value},
		{"mirror name", patch(key, 3, '/'), value},
		{"empty mirror name", append([]byte{0, 0, 0}, key[10:]...), value},
		{"negative partition", patch(key, len(key)-4, 0xff), value},
		{"tombstone", key, nil},
		{"value version", key, patch(value, 0, 1)},
		{"value truncated", key, value[:len(value)-1]},
		{"value trailing", key, append(bytes.Clone(value), 0)},
		{"state UNKNOWN", key, patch(value, 1, 0)},
		{"state out of range", key, patch(value, 1, 10)},
		{"previous is state", key, patch(value, 2, byte(mirrorstate.Failed))},
		{"FAILED from PAUSED", key, patch(value, 2, byte(mirrorstate.Paused))},
		{"stop step outside a stop", key, patch(value, 3, byte(mirrorstate.StopAbortTransactions))},
		{"retryable byte", key, patch(value, 4, 2)},
		{"state epoch 0", key, patch(value, 5, 0, 0, 0, 0, 0, 0, 0, 0)},
		{"negative leader epoch", key, patch(value, 13, 0xff)},
		{"next retry without retry", key, patch(value, 4, 0)},
		{"error length", key, patch(value, 53, 0xff, 0xff)},
		{"truncate outside ULE_RECOVERY", key, patch(value, 45, 0)},
	} {
		_, _, err := DecodeMirrorStateRecord(c.key, c.value)
		if !errors.Is(err, ErrMirrorStateCorrupt) {
			t.Errorf("%s: %v, want ErrMirrorStateCorrupt", c.name, err)
		}
	}
}

func TestMirrorStateRecordEncodeChecks(t *testing.T) {
	bad := testMirrorStateValues()[0]
	bad.State = mirrorstate.Unknown
	if got := panicText(func() { EncodeMirrorStateRecord(testMirrorStateKey, bad) }); !strings.Contains(got, "EncodeMirrorStateRecord") {
		t.Fatalf("encoding an UNKNOWN record: panic %q", got)
	}
}

// FuzzMirrorStateRecord: decoding never panics, fails only with
// ErrMirrorStateCorrupt, and what it accepts re-encodes to the same
// bytes (the encoding is canonical) and restores a machine.
func FuzzMirrorStateRecord(f *testing.F) {
	for _, value := range testMirrorStateValues() {
		key, encoded := EncodeMirrorStateRecord(testMirrorStateKey, value)
		f.Add(key, encoded)
	}
	f.Add([]byte{}, []byte{})
	f.Fuzz(func(t *testing.T, keyBytes, valueBytes []byte) {
		key, value, err := DecodeMirrorStateRecord(keyBytes, valueBytes)
		if err != nil {
			if !errors.Is(err, ErrMirrorStateCorrupt) {
				t.Fatalf("error %v without ErrMirrorStateCorrupt", err)
			}
			return
		}
		gotKey, gotValue := EncodeMirrorStateRecord(key, value)
		if !bytes.Equal(gotKey, keyBytes) || !bytes.Equal(gotValue, valueBytes) {
			t.Fatalf("re-encoded %x %x, decoded from %x %x", gotKey, gotValue, keyBytes, valueBytes)
		}
		if p := mirrorstate.Restore(value, reconnectBackoff, processJitter{}); p.Record() != value {
			t.Fatalf("restored %v from %v", p.Record(), value)
		}
	})
}

// panicText runs f and returns what it panicked with ("" if it did not).
func panicText(f func()) (text string) {
	defer func() {
		if r := recover(); r != nil {
			text = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}
