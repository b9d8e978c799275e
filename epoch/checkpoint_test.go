package epoch_test

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/mirrord/mirrord/epoch"
)

func TestEncode(t *testing.T) {
	cases := []struct {
		name    string
		entries []epoch.Entry
		want    string
	}{
		{"empty", nil, "0\n0\n"},
		{"one", []epoch.Entry{e(0, 0)}, "0\n1\n0 0\n"},
		// The example of Kafka's LeaderEpochCheckpointFile comment.
		{"kafka example", []epoch.Entry{e(0, 1), e(1, 2)}, "0\n2\n0 1\n1 2\n"},
		{"extremes", []epoch.Entry{e(0, 0), e(math.MaxInt32, math.MaxInt64)},
			fmt.Sprintf("0\n2\n0 0\n%d %d\n", int32(math.MaxInt32), int64(math.MaxInt64))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := epoch.Encode(tc.entries)
			if string(got) != tc.want {
				t.Errorf("Encode(%v) = %q, want %q", tc.entries, got, tc.want)
			}
			back, err := epoch.Decode(got)
			if err != nil {
				t.Fatalf("Decode(Encode(%v)): %v", tc.entries, err)
			}
			if !slices.Equal(back, tc.entries) {
				t.Errorf("Decode(Encode(%v)) = %v", tc.entries, back)
			}
		})
	}
}

func TestEncodePanicsOnInvalidEntries(t *testing.T) {
	mustPanic(t, "Encode of decreasing epochs", func() { epoch.Encode([]epoch.Entry{e(2, 0), e(1, 5)}) })
	mustPanic(t, "Encode of a negative epoch", func() { epoch.Encode([]epoch.Entry{e(-1, 0)}) })
}

func TestCheckpointRoundTripOfCache(t *testing.T) {
	c := threeEpochs(t)
	c.Assign(12, 90)
	c.TruncateFromStart(20)
	entries, err := epoch.Decode(epoch.Encode(c.Entries()))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	reopened := mustNew(t, entries...)
	if got, want := reopened.Entries(), c.Entries(); !slices.Equal(got, want) {
		t.Errorf("reopened cache = %v, want %v", got, want)
	}
}

func TestDecodeRejects(t *testing.T) {
	cases := []struct {
		name     string
		file     string
		wantLine int
		wantText string // part of the error after the line number
	}{
		{"empty file", "", 1, "missing version"},
		{"version without newline", "0", 1, "no newline"},
		{"version 1", "1\n0\n", 1, "version 1, want 0"},
		{"negative version", "-1\n0\n", 1, "version"},
		{"version with sign", "+0\n0\n", 1, "version"},
		{"version with space", "0 \n0\n", 1, "version"},
		{"crlf", "0\r\n0\r\n", 1, "version"},
		{"missing count", "0\n", 2, "missing entry count"},
		{"count without newline", "0\n0", 2, "no newline"},
		{"count not a number", "0\nx\n", 2, "entry count"},
		{"negative count", "0\n-1\n", 2, "entry count"},
		{"count leading zero", "0\n01\n3 0\n", 2, "entry count"},
		{"count overflows", "0\n99999999999999999999\n", 2, "out of range"},
		{"fewer entries than count", "0\n3\n1 0\n2 5\n", 5, "missing entry 3 of 3"},
		{"huge count", "0\n9223372036854775807\n1 0\n", 4, "missing entry 2 of"},
		{"more entries than count", "0\n1\n1 0\n2 5\n", 4, "data after the 1 entries"},
		{"trailing blank line", "0\n0\n\n", 3, "data after"},
		{"last entry without newline", "0\n1\n1 0", 3, "no newline"},
		{"entry without space", "0\n1\n10\n", 3, "want \"<epoch> <start offset>\""},
		{"entry with two spaces", "0\n1\n1  0\n", 3, "start offset"},
		{"entry with tab", "0\n1\n1\t0\n", 3, "want \"<epoch> <start offset>\""},
		{"entry with three fields", "0\n1\n1 0 2\n", 3, "start offset"},
		{"entry with trailing space", "0\n1\n1 0 \n", 3, "start offset"},
		{"empty entry line", "0\n1\n\n", 3, "want"},
		{"negative epoch", "0\n1\n-1 0\n", 3, "epoch \"-1\""},
		{"epoch past int32", "0\n1\n2147483648 0\n", 3, "epoch 2147483648: out of range"},
		{"epoch leading zero", "0\n1\n07 0\n", 3, "epoch \"07\""},
		{"negative offset", "0\n1\n1 -5\n", 3, "start offset \"-5\""},
		{"offset past int64", "0\n1\n1 9223372036854775808\n", 3, "out of range"},
		{"offset with sign", "0\n1\n1 +5\n", 3, "start offset"},
		{"equal epochs", "0\n2\n1 0\n1 5\n", 4, "epoch not above"},
		{"decreasing epochs", "0\n3\n1 0\n4 5\n2 9\n", 5, "epoch not above"},
		{"equal offsets", "0\n2\n1 5\n2 5\n", 4, "start offset not above"},
		{"decreasing offsets", "0\n2\n1 5\n2 4\n", 4, "start offset not above"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			entries, err := epoch.Decode([]byte(tc.file))
			if err == nil {
				t.Fatalf("Decode(%q) = %v, want an error", tc.file, entries)
			}
			if !errors.Is(err, epoch.ErrCorruptCheckpoint) {
				t.Errorf("error %v does not wrap ErrCorruptCheckpoint", err)
			}
			if want := fmt.Sprintf("epoch: corrupt checkpoint: line %d: ", tc.wantLine); !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q does not start with %q", err, want)
			}
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("error %q does not contain %q", err, tc.wantText)
			}
		})
	}
}

// FuzzDecode checks that Decode never panics, that every error wraps
// ErrCorruptCheckpoint, and that whatever it accepts is a valid cache whose
// encoding is the input itself (Decode accepts only canonical files).
func FuzzDecode(f *testing.F) {
	seeds := []string{
		"", "0\n0\n", "0\n1\n0 0\n", "0\n2\n0 1\n1 2\n", "0\n3\n3 0\n5 40\n9 70\n",
		"1\n0\n", "0\n2\n1 0\n1 5\n", "0\n1\n2147483647 9223372036854775807\n",
		"0\n9223372036854775807\n", "0\n1\n1 0 \n", "0\r\n0\r\n", "0\n01\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		entries, err := epoch.Decode(b)
		if err != nil {
			if !errors.Is(err, epoch.ErrCorruptCheckpoint) || !strings.Contains(err.Error(), ": line ") {
				t.Fatalf("Decode(%q): error %v does not wrap ErrCorruptCheckpoint or name a line", b, err)
			}
			return
		}
		c, err := epoch.New(entries)
		if err != nil {
			t.Fatalf("Decode(%q) = %v, which New refuses: %v", b, entries, err)
		}
		encoded := epoch.Encode(c.Entries())
		if !bytes.Equal(encoded, b) {
			t.Fatalf("Encode(Decode(%q)) = %q, want the input", b, encoded)
		}
		again, err := epoch.Decode(encoded)
		if err != nil || !slices.Equal(again, entries) {
			t.Fatalf("Decode(Encode(%v)) = %v, %v", entries, again, err)
		}
	})
}
