package broker

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	rb "github.com/mirrord/mirrord/recordbatch"
)

// benchmarkBatch is a non-idempotent batch of 200 records of about 300
// bytes of log-like text (compressible 3x to 6x, as real payloads are).
func benchmarkBatch() []byte {
	random := rand.New(rand.NewPCG(1, 1))
	words := []string{"user", "order", "created", "updated", "status", "ok", "error", "latency_ms", "eu-west-1", "payment", "cart", "session"}
	var recs []rb.Record
	for i := range 200 {
		var value []byte
		for len(value) < 300 {
			value = fmt.Appendf(value, `{"%s":%d,"%s":"%s"} `, words[random.IntN(len(words))], random.IntN(1_000_000), words[random.IntN(len(words))], words[random.IntN(len(words))])
		}
		recs = append(recs, rb.Record{Key: fmt.Appendf(nil, "key-%d", random.IntN(10_000)), Value: value, TimestampDelta: int64(i)})
	}
	return rb.Append(nil, rb.Spec{BaseTimestamp: formatNow, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, Records: recs})
}

// BenchmarkProduceFormat is Produce throughput, in MB/s of uncompressed
// records, of a batch kept in the producer's codec beside one rebuilt in
// the topic's (and one stamped LogAppendTime in place). The log is an
// in-memory one, truncated out of the timer every truncateEvery batches.
func BenchmarkProduceFormat(b *testing.B) {
	const truncateEvery = 256
	plain := benchmarkBatch()
	for _, bc := range []struct {
		name    string
		sent    rb.Codec
		configs map[string]string
	}{
		{"producer/none", rb.CodecNone, nil},
		{"producer/lz4", rb.CodecLZ4, nil},
		{"producer/zstd", rb.CodecZstd, nil},
		{"logappendtime/lz4", rb.CodecLZ4, map[string]string{"message.timestamp.type": "LogAppendTime"}},
		{"none-to-lz4", rb.CodecNone, map[string]string{"compression.type": "lz4"}},
		{"none-to-zstd", rb.CodecNone, map[string]string{"compression.type": "zstd"}},
		{"none-to-gzip", rb.CodecNone, map[string]string{"compression.type": "gzip"}},
		{"none-to-snappy", rb.CodecNone, map[string]string{"compression.type": "snappy"}},
		{"snappy-to-lz4", rb.CodecSnappy, map[string]string{"compression.type": "lz4"}},
		{"zstd-to-lz4", rb.CodecZstd, map[string]string{"compression.type": "lz4"}},
		{"lz4-to-zstd", rb.CodecLZ4, map[string]string{"compression.type": "zstd"}},
		{"lz4-to-none", rb.CodecLZ4, map[string]string{"compression.type": "uncompressed"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			sent := inCodec(b, plain, bc.sent)
			p := formatPartition(b, bc.configs)
			buf := make([]byte, len(sent))
			b.SetBytes(int64(len(rb.Batch(plain).Records())))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if i%truncateEvery == truncateEvery-1 {
					b.StopTimer()
					if _, err := p.truncateTo(0, 0); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				copy(buf, sent) // the append stamps the request's bytes
				if _, err := produceTo(p, buf, ""); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			stored, err := p.log.BatchBytes(nil, 0)
			if err != nil || !bytes.Equal(stored[:8], make([]byte, 8)) {
				b.Fatalf("stored: %v", err)
			}
			b.ReportMetric(float64(len(sent)), "sent-bytes/op")
			b.ReportMetric(float64(len(stored)), "stored-bytes/op")
		})
	}
}
