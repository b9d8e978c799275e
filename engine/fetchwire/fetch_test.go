package fetchwire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// asKmsg rebuilds r as kmsg would have decoded it (without unknown tags):
// the form the tests compare.
func asKmsg(r Response) *kmsg.FetchResponse {
	out := kmsg.NewPtrFetchResponse()
	out.Version = Version
	out.ThrottleMillis, out.ErrorCode, out.SessionID = r.ThrottleMillis, r.ErrorCode, r.SessionID
	for topics := r.Topics(); ; {
		topic, ok := topics.Next()
		if !ok {
			break
		}
		kt := kmsg.NewFetchResponseTopic()
		kt.TopicID = topic.TopicID
		for partitions := topic.Partitions(); ; {
			p, ok := partitions.Next()
			if !ok {
				break
			}
			kp := kmsg.NewFetchResponseTopicPartition()
			kp.Partition, kp.ErrorCode = p.Partition, p.ErrorCode
			kp.HighWatermark, kp.LastStableOffset, kp.LogStartOffset = p.HighWatermark, p.LastStableOffset, p.LogStartOffset
			if !p.AbortedTransactions.Null() {
				kp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
			}
			for {
				txn, ok := p.AbortedTransactions.Next()
				if !ok {
					break
				}
				kp.AbortedTransactions = append(kp.AbortedTransactions, kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: txn.ProducerID, FirstOffset: txn.FirstOffset})
			}
			kp.PreferredReadReplica = p.PreferredReadReplica
			kp.RecordBatches = p.RecordBatches
			kp.DivergingEpoch.Epoch, kp.DivergingEpoch.EndOffset = p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset
			kp.CurrentLeader.LeaderID, kp.CurrentLeader.LeaderEpoch = p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch
			kp.SnapshotID.EndOffset, kp.SnapshotID.Epoch = p.SnapshotID.EndOffset, p.SnapshotID.Epoch
			kt.Partitions = append(kt.Partitions, kp)
		}
		out.Topics = append(out.Topics, kt)
	}
	return out
}

// withoutUnknown clears what this package does not read: unknown tagged
// fields, and the top-level NodeEndpoints of v16 that kmsg reads at any
// version.
func withoutUnknown(r *kmsg.FetchResponse) *kmsg.FetchResponse {
	r.UnknownTags, r.Brokers = kmsg.Tags{}, nil
	for i := range r.Topics {
		t := &r.Topics[i]
		t.UnknownTags = kmsg.Tags{}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.UnknownTags, p.DivergingEpoch.UnknownTags, p.CurrentLeader.UnknownTags, p.SnapshotID.UnknownTags = kmsg.Tags{}, kmsg.Tags{}, kmsg.Tags{}, kmsg.Tags{}
			for k := range p.AbortedTransactions {
				p.AbortedTransactions[k].UnknownTags = kmsg.Tags{}
			}
		}
	}
	return r
}

// sameAsKmsg checks that Parse reads body exactly as kmsg decodes it.
func sameAsKmsg(t testing.TB, body []byte) {
	t.Helper()
	want := kmsg.NewPtrFetchResponse()
	want.Version = Version
	if err := want.ReadFrom(body); err != nil {
		t.Fatalf("kmsg: %v", err)
	}
	got, err := Parse(body)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if g, w := asKmsg(got), withoutUnknown(want); !reflect.DeepEqual(g, w) {
		t.Fatalf("Parse read\n%+v\nkmsg decoded\n%+v", g, w)
	}
}

func encode(r *kmsg.FetchResponse) []byte {
	r.Version = Version
	return r.AppendTo(nil)
}

// partition returns a kmsg partition with every field set to a value of
// its own, the tagged fields absent.
func partition(index int32) kmsg.FetchResponseTopicPartition {
	p := kmsg.NewFetchResponseTopicPartition()
	p.Partition, p.ErrorCode = index, 0
	p.HighWatermark, p.LastStableOffset, p.LogStartOffset = 1000+int64(index), 900+int64(index), 10+int64(index)
	p.PreferredReadReplica = -1
	return p
}

func TestParseFields(t *testing.T) {
	topicA := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	topicB := [16]byte{0xff, 0xee}
	tests := []struct {
		name   string
		change func(r *kmsg.FetchResponse, p *kmsg.FetchResponseTopicPartition)
		check  func(t *testing.T, r Response, p Partition)
	}{
		{"throttle, error code, session id", func(r *kmsg.FetchResponse, _ *kmsg.FetchResponseTopicPartition) {
			r.ThrottleMillis, r.ErrorCode, r.SessionID = 250, 70, 1234567
		}, func(t *testing.T, r Response, _ Partition) {
			if r.ThrottleMillis != 250 || r.ErrorCode != 70 || r.SessionID != 1234567 {
				t.Errorf("got %d %d %d", r.ThrottleMillis, r.ErrorCode, r.SessionID)
			}
		}},
		{"partition error code", func(_ *kmsg.FetchResponse, p *kmsg.FetchResponseTopicPartition) { p.ErrorCode = 1 },
			func(t *testing.T, _ Response, p Partition) {
				if p.ErrorCode != 1 {
					t.Errorf("error code %d", p.ErrorCode)
				}
			}},
		{"offsets", func(_ *kmsg.FetchResponse, p *kmsg.FetchResponseTopicPartition) {
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = 1<<40, 1<<39, 1<<38
		}, func(t *testing.T, _ Response, p Partition) {
			if p.HighWatermark != 1<<40 || p.LastStableOffset != 1<<39 || p.LogStartOffset != 1<<38 {
				t.Errorf("offsets %d %d %d", p.HighWatermark, p.LastStableOffset, p.LogStartOffset)
			}
		}},
		{"aborted transactions", func(_ *kmsg.FetchResponse, p *kmsg.FetchResponseTopicPartition) {
			p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 7, FirstOffset: 70}, {ProducerID: 8, FirstOffset: 80}}
		}, func(t *testing.T, _ Response, p Partition) {
			if p.AbortedTransactions.Null() || p.AbortedTransactions.Len() != 2 {
				t.Fatalf("aborted transactions: null %v, %d", p.AbortedTransactions.Null(), p.AbortedTransactions.Len())
			}
			first, _ := p.AbortedTransactions.Next()
			second, _ := p.AbortedTransactions.Next()
			if _, more := p.AbortedTransactions.Next(); more || first != (AbortedTransaction{7, 70}) || second != (AbortedTransaction{8, 80}) {
				t.Errorf("aborted transactions %+v %+v (more: %v)", first, second, more)
			}
		}},
		{"aborted transactions null", func(*kmsg.FetchResponse, *kmsg.FetchResponseTopicPartition) {},
			func(t *testing.T, _ Response, p Partition) {
				if !p.AbortedTransactions.Null() {
					t.Error("not null")
				}
			}},
		{"preferred read replica", func(_ *kmsg.FetchResponse, p *kmsg.FetchResponseTopicPartition) { p.PreferredReadReplica = 3 },
			func(t *testing.T, _ Response, p Partition) {
				if p.PreferredReadReplica != 3 {
					t.Errorf("preferred read replica %d", p.PreferredReadReplica)
				}
			}},
		{"records", func(_ *kmsg.FetchResponse, p *kmsg.FetchResponseTopicPartition) { p.RecordBatches = []byte("batches") },
			func(t *testing.T, _ Response, p Partition) {
				if string(p.RecordBatches) != "batches" {
					t.Errorf("records %q", p.RecordBatches)
				}
			}},
		{"records null", func(*kmsg.FetchResponse, *kmsg.FetchResponseTopicPartition) {},
			func(t *testing.T, _ Response, p Partition) {
				if p.RecordBatches != nil {
					t.Errorf("records %q, want nil", p.RecordBatches)
				}
			}},
		{"diverging epoch", func(_ *kmsg.FetchResponse, p *kmsg.FetchResponseTopicPartition) {
			p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = 5, 500
		}, func(t *testing.T, _ Response, p Partition) {
			if p.DivergingEpoch != (DivergingEpoch{5, 500}) {
				t.Errorf("diverging epoch %+v", p.DivergingEpoch)
			}
		}},
		{"current leader", func(_ *kmsg.FetchResponse, p *kmsg.FetchResponseTopicPartition) {
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = 2, 9
		}, func(t *testing.T, _ Response, p Partition) {
			if p.CurrentLeader != (CurrentLeader{2, 9}) {
				t.Errorf("current leader %+v", p.CurrentLeader)
			}
		}},
		{"snapshot id", func(_ *kmsg.FetchResponse, p *kmsg.FetchResponseTopicPartition) {
			p.SnapshotID.EndOffset, p.SnapshotID.Epoch = 77, 4
		}, func(t *testing.T, _ Response, p Partition) {
			if p.SnapshotID != (SnapshotID{77, 4}) {
				t.Errorf("snapshot id %+v", p.SnapshotID)
			}
		}},
		{"tagged fields absent", func(*kmsg.FetchResponse, *kmsg.FetchResponseTopicPartition) {},
			func(t *testing.T, _ Response, p Partition) {
				if p.DivergingEpoch != (DivergingEpoch{-1, -1}) || p.CurrentLeader != (CurrentLeader{-1, -1}) || p.SnapshotID != (SnapshotID{-1, -1}) {
					t.Errorf("defaults %+v %+v %+v", p.DivergingEpoch, p.CurrentLeader, p.SnapshotID)
				}
			}},
		{"unknown tagged fields skipped", func(r *kmsg.FetchResponse, p *kmsg.FetchResponseTopicPartition) {
			r.UnknownTags.Set(9, []byte("top"))
			p.UnknownTags.Set(7, []byte("partition"))
			p.RecordBatches = []byte("after")
		}, func(t *testing.T, _ Response, p Partition) {
			if string(p.RecordBatches) != "after" {
				t.Errorf("records %q", p.RecordBatches)
			}
		}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			r := kmsg.NewPtrFetchResponse()
			// The partition under test sits between others, in the
			// second of two topics, so that skipping is checked too.
			ta, tb := kmsg.NewFetchResponseTopic(), kmsg.NewFetchResponseTopic()
			ta.TopicID, tb.TopicID = topicA, topicB
			ta.Partitions = []kmsg.FetchResponseTopicPartition{partition(0), partition(1)}
			tb.Partitions = []kmsg.FetchResponseTopicPartition{partition(0), partition(1), partition(2)}
			ta.Partitions[1].RecordBatches = []byte("other")
			r.Topics = []kmsg.FetchResponseTopic{ta, tb}
			test.change(r, &r.Topics[1].Partitions[1])
			if r.Topics[1].Partitions[1].UnknownTags.Len() > 0 {
				// Unknown tags in the tested partition and in the one
				// before it: skipping must step over them too.
				r.Topics[1].Partitions[0].UnknownTags.Set(3, []byte{1, 2, 3})
			}
			body := encode(r)
			sameAsKmsg(t, body)
			parsed, err := Parse(body)
			if err != nil {
				t.Fatal(err)
			}
			topics := parsed.Topics()
			first, _ := topics.Next()
			second, ok := topics.Next()
			if !ok || first.TopicID != topicA || second.TopicID != topicB || topics.Len() != 0 {
				t.Fatalf("topics %x %x", first.TopicID, second.TopicID)
			}
			partitions := second.Partitions()
			partitions.Next()
			p, _ := partitions.Next()
			if p.Partition != 1 || partitions.Len() != 1 {
				t.Fatalf("partition %d, %d left", p.Partition, partitions.Len())
			}
			test.check(t, parsed, p)
		})
	}
}

func TestParseEmpty(t *testing.T) {
	body := encode(kmsg.NewPtrFetchResponse())
	sameAsKmsg(t, body)
	r, err := Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	if topics := r.Topics(); topics.Len() != 0 {
		t.Fatalf("%d topics", topics.Len())
	}
}

func TestParseMalformed(t *testing.T) {
	r := kmsg.NewPtrFetchResponse()
	topic := kmsg.NewFetchResponseTopic()
	p := partition(0)
	p.RecordBatches = []byte("0123456789")
	p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = 1, 2
	topic.Partitions = []kmsg.FetchResponseTopicPartition{p}
	r.Topics = []kmsg.FetchResponseTopic{topic}
	whole := encode(r)
	// Every cut of a valid body short of its end is malformed.
	for cut := range len(whole) {
		if _, err := Parse(whole[:cut]); !errors.Is(err, ErrMalformed) {
			t.Fatalf("cut at %d of %d: %v", cut, len(whole), err)
		}
	}
	tests := []struct {
		name string
		body []byte
	}{
		{"topic count past the bytes", append(binary.BigEndian.AppendUint32(make([]byte, 6), 0), 0x7f)},
		{"partition count past the bytes", append(append(make([]byte, 10), 2), append(make([]byte, 16), 0x7f, 0)...)},
		{"records past the bytes", bytes.Replace(whole, []byte{11, '0'}, []byte{12, '0'}, 1)},
		{"diverging epoch short", bytes.Replace(whole, []byte{0, 13, 0, 0, 0, 1}, []byte{0, 5, 0, 0, 0, 1}, 1)},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			if _, err := Parse(test.body); !errors.Is(err, ErrMalformed) {
				t.Fatalf("got %v", err)
			}
		})
	}
}

// FuzzParse: Parse never panics and never reads past its input; what it
// accepts kmsg decodes the same; and whatever kmsg decodes, re-encoded by
// kmsg, Parse reads exactly as kmsg does.
func FuzzParse(f *testing.F) {
	r := kmsg.NewPtrFetchResponse()
	r.SessionID = 9
	topic := kmsg.NewFetchResponseTopic()
	topic.TopicID = [16]byte{1}
	p := partition(3)
	p.RecordBatches = []byte("records")
	p.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{{ProducerID: 1, FirstOffset: 2}}
	p.DivergingEpoch.Epoch, p.DivergingEpoch.EndOffset = 4, 40
	p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = 1, 5
	p.SnapshotID.EndOffset, p.SnapshotID.Epoch = 6, 7
	p.UnknownTags.Set(5, []byte{1})
	topic.Partitions = []kmsg.FetchResponseTopicPartition{p, partition(4)}
	r.Topics = []kmsg.FetchResponseTopic{topic, kmsg.NewFetchResponseTopic()}
	f.Add(encode(r))
	f.Add(encode(kmsg.NewPtrFetchResponse()))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		parsed, err := Parse(body)
		if err == nil {
			walk(t, parsed, body)
		}
		decoded := kmsg.NewPtrFetchResponse()
		decoded.Version = Version
		if kerr := decoded.ReadFrom(body); kerr != nil {
			return
		}
		if err == nil {
			if g, w := asKmsg(parsed), withoutUnknown(decoded); !reflect.DeepEqual(g, w) {
				t.Fatalf("Parse read\n%+v\nkmsg decoded\n%+v", g, w)
			}
		}
		sameAsKmsg(t, encode(decoded))
	})
}

// walk reads every field of r, checking that every slice it hands out
// lies inside body.
func walk(t *testing.T, r Response, body []byte) {
	topics := r.Topics()
	for range topics.Len() + 1 {
		topic, ok := topics.Next()
		if !ok {
			break
		}
		partitions := topic.Partitions()
		for range partitions.Len() + 1 {
			p, ok := partitions.Next()
			if !ok {
				break
			}
			if len(p.RecordBatches) > len(body) {
				t.Fatalf("records of %d bytes from a body of %d", len(p.RecordBatches), len(body))
			}
			for range p.AbortedTransactions.Len() + 1 {
				if _, ok := p.AbortedTransactions.Next(); !ok {
					break
				}
			}
		}
	}
	if topics.Len() != 0 {
		t.Fatalf("%d topics left after the walk", topics.Len())
	}
}

// TestParseAllocatesNothing: parsing and walking a response of 64
// partitions with records allocates nothing.
func TestParseAllocatesNothing(t *testing.T) {
	body := encode(benchResponse(64, 16<<10))
	allocs := testing.AllocsPerRun(100, func() {
		r, err := Parse(body)
		if err != nil {
			t.Fatal(err)
		}
		walk(t, r, body)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per response", allocs)
	}
}

// benchResponse is a response of partitions partitions of one topic,
// each with recordBytes of records.
func benchResponse(partitions int, recordBytes int) *kmsg.FetchResponse {
	r := kmsg.NewPtrFetchResponse()
	topic := kmsg.NewFetchResponseTopic()
	topic.TopicID = [16]byte{7}
	for i := range partitions {
		p := partition(int32(i))
		p.RecordBatches = bytes.Repeat([]byte{byte(i)}, recordBytes)
		topic.Partitions = append(topic.Partitions, p)
	}
	r.Topics = []kmsg.FetchResponseTopic{topic}
	return r
}

// BenchmarkParse compares this package with kmsg on the same body.
func BenchmarkParse(b *testing.B) {
	body := encode(benchResponse(64, 16<<10))
	b.Run("fetchwire", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			r, err := Parse(body)
			if err != nil {
				b.Fatal(err)
			}
			walk(nil, r, body)
		}
	})
	b.Run("kmsg", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			r := kmsg.NewPtrFetchResponse()
			r.Version = Version
			if err := r.ReadFrom(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
