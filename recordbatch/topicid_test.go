package recordbatch_test

import (
	"testing"

	"github.com/mirrord/mirrord/recordbatch"
)

func TestTopicIDString(t *testing.T) {
	tests := []struct {
		id   recordbatch.TopicID
		text string
	}{
		{recordbatch.TopicID{}, "AAAAAAAAAAAAAAAAAAAAAA"},
		{recordbatch.TopicID{0xfb, 0xff, 0xbf}, "-_-_AAAAAAAAAAAAAAAAAA"}, // '-' and '_' of base64url
		{recordbatch.TopicID{15: 1}, "AAAAAAAAAAAAAAAAAAAAAQ"},
	}
	for _, test := range tests {
		if got := test.id.String(); got != test.text {
			t.Errorf("%x: String %q, want %q", test.id, got, test.text)
		}
		if got, err := recordbatch.ParseTopicID(test.text); err != nil || got != test.id {
			t.Errorf("ParseTopicID(%q) = %x, %v; want %x", test.text, got, err, test.id)
		}
	}
}

func TestParseTopicIDRejects(t *testing.T) {
	for _, text := range []string{
		"",
		"AAAAAAAAAAAAAAAAAAAAA",    // 21 characters: 15 bytes
		"AAAAAAAAAAAAAAAAAAAAAAAA", // 24 characters: 18 bytes
		"AAAAAAAAAAAAAAAAAAAAAA==", // padded
		"+/+/AAAAAAAAAAAAAAAAAA",   // standard base64, not URL-safe
		"AAAAAAAAAAAAAAAAAAAA!A",
	} {
		if id, err := recordbatch.ParseTopicID(text); err == nil {
			t.Errorf("ParseTopicID(%q) = %x, want an error", text, id)
		}
	}
}

func TestNewTopicID(t *testing.T) {
	seen := map[recordbatch.TopicID]bool{}
	for range 64 {
		id := recordbatch.NewTopicID()
		if id == (recordbatch.TopicID{}) || seen[id] {
			t.Fatalf("NewTopicID gave %s: zero or repeated", id)
		}
		seen[id] = true
		if back, err := recordbatch.ParseTopicID(id.String()); err != nil || back != id {
			t.Fatalf("%s does not parse back: %x, %v", id, back, err)
		}
	}
}
