package records

import (
	"bytes"
	"testing"

	"github.com/mirrord/mirrord/recordbatch"
)

// TestCompressRoundTrip: every codec's output decompresses to its input,
// in the framing Decompress (and Kafka) reads.
func TestCompressRoundTrip(t *testing.T) {
	section := bytes.Repeat([]byte("a records section, compressible "), 3000) // over one xerial block
	for _, codec := range []recordbatch.Codec{recordbatch.CodecNone, recordbatch.CodecGzip, recordbatch.CodecSnappy, recordbatch.CodecLZ4, recordbatch.CodecZstd} {
		t.Run(codec.String(), func(t *testing.T) {
			header := make([]byte, recordbatch.HeaderSize)
			out, err := Compress(bytes.Clone(header), codec, section)
			if err != nil {
				t.Fatal(err)
			}
			if codec != recordbatch.CodecNone && len(out)-len(header) >= len(section) {
				t.Fatalf("%d bytes compressed to %d", len(section), len(out)-len(header))
			}
			b := recordbatch.Batch(out)
			b[21+1] = byte(codec) // attributes: the codec bits
			got, err := Decompress(nil, b, 0)
			if err != nil || !bytes.Equal(got, section) {
				t.Fatalf("round trip: %d bytes, %v", len(got), err)
			}
		})
	}
}
