package broker

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mirrord/mirrord/logstore"
	"github.com/mirrord/mirrord/netio"
	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/mirrord/mirrord/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
)

// timedBatch is a batch of records with the given timestamps (base
// timestamp the first one's).
func timedBatch(timestamps ...int64) []byte {
	records := make([]rb.Record, len(timestamps))
	for i, ts := range timestamps {
		records[i] = rb.Record{Value: []byte{byte(i)}, TimestampDelta: ts - timestamps[0]}
	}
	return rb.Append(nil, rb.Spec{BaseTimestamp: timestamps[0], ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Records: records})
}

// sizedBatch is a batch of one record whose batch is exactly size bytes.
func sizedBatch(size int) []byte {
	empty := len(rb.Append(nil, rb.Spec{BaseTimestamp: -1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Records: []rb.Record{{Value: []byte{}}}}))
	// A value of n bytes adds n and the growth of its length varint.
	for n := size - empty; n >= 0; n-- {
		b := rb.Append(nil, rb.Spec{BaseTimestamp: -1, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Records: []rb.Record{{Value: make([]byte, n)}}})
		if len(b) == size {
			return b
		}
	}
	panic(fmt.Sprintf("no batch of %d bytes", size))
}

func TestProduceLimits(t *testing.T) {
	const now = 1_800_000_000_000
	const hour = 3_600_000
	withBase5 := timedBatch(now)
	rb.Batch(withBase5).SetBaseOffset(5)
	zeroCount := timedBatch(now)
	zeroCount[rb.HeaderSize-1] = 0 // recordCount 0
	rb.Batch(zeroCount).SetCRC(rb.Batch(zeroCount).ComputeCRC())
	limits := produceLimits{maxMessageBytes: 200, timestampBeforeMax: 2 * hour, timestampAfterMax: hour}
	for _, tc := range []struct {
		name    string
		batch   []byte
		want    *kerr.Error
		records []int32 // the batch indexes refused, for INVALID_TIMESTAMP
		// logStart: the refusal carries the log start offset (a
		// netio.RecordsError), as Kafka's LogValidator refusals do.
		logStart bool
	}{
		{"a batch of the limit", sizedBatch(200), nil, nil, false},
		{"a batch over the limit", sizedBatch(201), kerr.MessageTooLarge, nil, false},
		{"timestamps within the window", timedBatch(now, now-2*hour, now+hour), nil, nil, false},
		{"no timestamp", timedBatch(-1), nil, nil, false},
		{"one timestamp too new", timedBatch(now, now+hour+1), kerr.InvalidTimestamp, []int32{1}, true},
		{"timestamps too old and too new", timedBatch(now-2*hour-1, now, now+2*hour), kerr.InvalidTimestamp, []int32{0, 2}, true},
		{"a base offset other than 0", withBase5, kerr.InvalidRecord, nil, true},
		{"no records", zeroCount, kerr.InvalidRecord, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testPartition(t)
			p.limits.Store(&limits)
			p.now = func() time.Time { return time.UnixMilli(now) }
			_, err := produceTo(p, tc.batch, "")
			wantCode(t, tc.name, err, tc.want)
			var refused *netio.RecordsError
			if got := errors.As(err, &refused); got != tc.logStart {
				t.Fatalf("%v: carries the log start offset %v, want %v", err, got, tc.logStart)
			}
			if tc.want == nil {
				if end := p.log.LogEndOffset(); end == 0 {
					t.Fatal("nothing appended")
				}
				return
			}
			if end := p.log.LogEndOffset(); end != 0 {
				t.Fatalf("log end %d after a refusal, want 0", end)
			}
			if tc.want != kerr.InvalidTimestamp {
				return
			}
			if refused.Message != invalidTimestampMessage {
				t.Fatalf("message %q, want Kafka's %q", refused.Message, invalidTimestampMessage)
			}
			var got []int32
			for _, r := range refused.Records {
				got = append(got, r.BatchIndex)
				want := fmt.Sprintf("of message with offset %d is out of range. The timestamp should be within [%d, %d]", r.BatchIndex, now-2*hour, now+hour)
				if !strings.Contains(r.Message, want) {
					t.Fatalf("record %d: %q, want it to say %q", r.BatchIndex, r.Message, want)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.records) {
				t.Fatalf("records refused %v, want %v", got, tc.records)
			}
		})
	}
}

func TestTopicProduceLimits(t *testing.T) {
	node, err := Open(Config{FS: vfs.OS, DataDir: filepath.Join(t.TempDir(), "data"), Log: logstore.DefaultConfig(), MessageMaxBytes: 5000}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		topic   string
		configs map[string]string
		want    *kerr.Error
		limits  produceLimits
	}{
		{"defaults", nil, nil, produceLimits{maxMessageBytes: 5000, timestampBeforeMax: defaultTimestampBeforeMax, timestampAfterMax: defaultTimestampAfterMax, keepCodec: true}},
		{"own", map[string]string{"max.message.bytes": "100", "message.timestamp.before.max.ms": "7", "message.timestamp.after.max.ms": "0"}, nil,
			produceLimits{maxMessageBytes: 100, timestampBeforeMax: 7, timestampAfterMax: 0, keepCodec: true}},
		{"zstd-log-append-time", map[string]string{"compression.type": "zstd", "compression.zstd.level": "-5", "compression.gzip.level": "9", "message.timestamp.type": "LogAppendTime"}, nil,
			produceLimits{maxMessageBytes: 5000, timestampBeforeMax: defaultTimestampBeforeMax, timestampAfterMax: defaultTimestampAfterMax,
				compression: rb.CodecZstd, levels: [5]int{rb.CodecGzip: 9, rb.CodecZstd: -5}, logAppendTime: true}},
		{"uncompressed", map[string]string{"compression.type": "uncompressed", "compression.lz4.level": "17"}, nil,
			produceLimits{maxMessageBytes: 5000, timestampBeforeMax: defaultTimestampBeforeMax, timestampAfterMax: defaultTimestampAfterMax,
				compression: rb.CodecNone, levels: [5]int{rb.CodecLZ4: 17}}},
		{"unknown-codec", map[string]string{"compression.type": "brotli"}, kerr.InvalidConfig, produceLimits{}},
		{"codec-case", map[string]string{"compression.type": "GZIP"}, kerr.InvalidConfig, produceLimits{}},
		{"gzip-level-0", map[string]string{"compression.gzip.level": "0"}, kerr.InvalidConfig, produceLimits{}},
		{"lz4-level-18", map[string]string{"compression.lz4.level": "18"}, kerr.InvalidConfig, produceLimits{}},
		{"zstd-level-23", map[string]string{"compression.zstd.level": "23"}, kerr.InvalidConfig, produceLimits{}},
		{"timestamp-type", map[string]string{"message.timestamp.type": "logappendtime"}, kerr.InvalidConfig, produceLimits{}},
		{"negative-size", map[string]string{"max.message.bytes": "-1"}, kerr.InvalidConfig, produceLimits{}},
		{"size-over-int32", map[string]string{"max.message.bytes": "2147483648"}, kerr.InvalidConfig, produceLimits{}},
		{"negative-after", map[string]string{"message.timestamp.after.max.ms": "-5"}, kerr.InvalidConfig, produceLimits{}},
		{"not-a-number", map[string]string{"message.timestamp.before.max.ms": "soon"}, kerr.InvalidConfig, produceLimits{}},
	} {
		_, err := node.CreateTopic(ctx, tc.topic, 2, tc.configs, false)
		wantCode(t, tc.topic, err, tc.want)
		if err != nil {
			if _, ok := node.Topic(tc.topic); ok {
				t.Fatalf("%s: created despite %v", tc.topic, err)
			}
			continue
		}
		for i := range int32(2) {
			p, err := node.LocalPartition(tc.topic, i)
			if err != nil {
				t.Fatal(err)
			}
			if got := *p.limits.Load(); got != tc.limits {
				t.Fatalf("%s-%d: limits %+v, want %+v", tc.topic, i, got, tc.limits)
			}
		}
	}
	if got := nodeProduceLimits(Config{}).maxMessageBytes; got != 1048588 {
		t.Fatalf("default message.max.bytes %d, want Kafka's 1048588", got)
	}
}

// TestLeaderEpochOfEmptyLog checks the epochs a partition answers while
// no batch carries its leader epoch: Kafka's leader enters its epoch at
// the log end offset when it becomes leader.
func TestLeaderEpochOfEmptyLog(t *testing.T) {
	p := testPartition(t)
	type answer struct {
		epoch  rb.Epoch
		offset rb.Offset
	}
	check := func(what string, requested rb.Epoch, want answer) {
		t.Helper()
		if e, o := p.EndOffsetForEpoch(requested); (answer{e, o}) != want {
			t.Fatalf("%s: OffsetForLeaderEpoch(%d) = %v, want %v", what, requested, answer{e, o}, want)
		}
	}
	listed := func(what string, timestamp int64, want answer) {
		t.Helper()
		offset, _, epoch, err := p.ListOffset(timestamp, netio.ReadUncommitted)
		if err != nil || (answer{epoch, offset}) != want {
			t.Fatalf("%s: ListOffset(%d) = %v, %v; want %v", what, timestamp, answer{epoch, offset}, err, want)
		}
	}
	check("new", 0, answer{0, 0})
	check("new", 1, answer{-1, -1})
	check("new", -1, answer{-1, -1})
	listed("new", -2, answer{0, 0})
	listed("new", -1, answer{0, 0})

	p.localEpoch.Store(3)
	check("epoch 3 claimed", 3, answer{3, 0})
	check("epoch 3 claimed", 1, answer{1, 0})
	check("epoch 3 claimed", 4, answer{-1, -1})
	if _, err := produceTo(p, timedBatch(1, 2), ""); err != nil {
		t.Fatal(err)
	}
	check("two records at epoch 3", 3, answer{3, 2})
	p.localEpoch.Store(5)
	check("epoch 5 claimed", 4, answer{3, 2})
	check("epoch 5 claimed", 5, answer{5, 2})
	check("epoch 5 claimed", 2, answer{2, 0})
	check("epoch 5 claimed", 6, answer{-1, -1})
	listed("epoch 5 claimed", -2, answer{3, 0})
	listed("epoch 5 claimed", -1, answer{5, 2})
}
