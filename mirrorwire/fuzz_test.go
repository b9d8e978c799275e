package mirrorwire

// Fuzz target for every mirror message decoder (messages.go). The
// first input byte picks the message kind, the rest is its body. A
// decoder must not panic; what it accepts must re-encode to bytes that
// decode to the same message, re-encode to the same bytes, and are no
// longer than the input (the encoding is canonical: unknown tags dropped,
// shortest varints).

import (
	"bytes"
	"reflect"
	"testing"
)

func FuzzMirrorMessages(f *testing.F) {
	kinds := mirrorMessageKinds()
	indexOf := func(m mirrorMessage) byte {
		for i, kind := range kinds {
			if reflect.TypeOf(kind) == reflect.TypeOf(m) && kind.Key() == m.Key() {
				return byte(i)
			}
		}
		f.Fatalf("no kind for %T key %d", m, m.Key())
		return 0
	}
	for _, sample := range mirrorSamples() {
		f.Add(sample.AppendTo([]byte{indexOf(sample)}))
	}
	for i := range kinds {
		f.Add([]byte{byte(i)})
		f.Add([]byte{byte(i), 1, 1, 1, 1, 1, 1, 1, 1})
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		kind := kinds[int(data[0])%len(kinds)]
		body := data[1:]
		decoded, err := decodeLike(t, kind, body)
		if err != nil {
			return
		}
		encoded := decoded.AppendTo(nil)
		if len(encoded) > len(body) {
			t.Fatalf("%T: %d bytes re-encoded as %d", kind, len(body), len(encoded))
		}
		again, err := decodeLike(t, kind, encoded)
		if err != nil {
			t.Fatalf("%T: re-encoding does not decode: %v", kind, err)
		}
		if !reflect.DeepEqual(again, decoded) {
			t.Fatalf("%T: decoded\n%+v\nthen\n%+v", kind, decoded, again)
		}
		if twice := again.AppendTo(nil); !bytes.Equal(twice, encoded) {
			t.Fatalf("%T: encodings differ\n% x\n% x", kind, encoded, twice)
		}
	})
}
