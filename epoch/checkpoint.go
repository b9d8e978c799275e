package epoch

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/mirrord/mirrord/recordbatch"
)

// ErrCorruptCheckpoint is wrapped by every Decode error: the bytes are not a
// leader-epoch-checkpoint file as Encode writes it.
var ErrCorruptCheckpoint = errors.New("epoch: corrupt checkpoint")

// CheckpointVersion is the only version of the checkpoint format, Kafka's
// LeaderEpochCheckpointFile.CURRENT_VERSION.
const CheckpointVersion = 0

// entryLineBytesMin is the length of the shortest entry line, "0 0\n"; it
// bounds how many entries a file of a given size can hold.
const entryLineBytesMin = 4

// Encode returns the checkpoint file for entries (see the package
// documentation for the format). The entries must satisfy the cache's
// invariants, as Cache.Entries does; anything else is a caller bug and
// panics, so that no file is written that Decode would refuse.
func Encode(entries []Entry) []byte {
	if i, reason := firstInvalid(entries); i >= 0 {
		panic(fmt.Sprintf("epoch: encode entry %d (%v): %s", i, entries[i], reason))
	}
	b := make([]byte, 0, 8+len(entries)*16)
	b = strconv.AppendInt(b, CheckpointVersion, 10)
	b = append(b, '\n')
	b = strconv.AppendInt(b, int64(len(entries)), 10)
	b = append(b, '\n')
	for _, e := range entries {
		b = strconv.AppendInt(b, int64(e.Epoch), 10)
		b = append(b, ' ')
		b = strconv.AppendInt(b, int64(e.StartOffset), 10)
		b = append(b, '\n')
	}
	return b
}

// Decode parses a checkpoint file strictly: it accepts exactly the bytes
// Encode produces for some valid list of entries (see the package
// documentation). Every error wraps ErrCorruptCheckpoint and names the
// 1-based line at fault.
func Decode(b []byte) ([]Entry, error) {
	r := lineReader{rest: b}
	version, err := r.number("version", 0, math.MaxInt32)
	if err != nil {
		return nil, err
	}
	if version != CheckpointVersion {
		return nil, r.corrupt("version %d, want %d", version, CheckpointVersion)
	}
	count, err := r.number("entry count", 0, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	// The loop ends early at the end of the input; the capacity is bounded
	// by what the input can hold, not by what the count line claims.
	entries := make([]Entry, 0, min(count, int64(len(r.rest)/entryLineBytesMin)))
	for i := range count {
		if len(r.rest) == 0 {
			r.line++
			return nil, r.corrupt("missing entry %d of %d: file ends", i+1, count)
		}
		e, err := r.entry()
		if err != nil {
			return nil, err
		}
		if reason := invalidAfter(entries, e); reason != "" {
			return nil, r.corrupt("%v: %s", e, reason)
		}
		entries = append(entries, e)
	}
	if len(r.rest) > 0 {
		r.line++
		return nil, r.corrupt("data after the %d entries the count announced", count)
	}
	return entries, nil
}

// lineReader walks a checkpoint file one "\n"-terminated line at a time and
// builds errors that name the current line.
type lineReader struct {
	rest []byte
	line int // 1-based number of the line last returned; 0 before the first
}

func (r *lineReader) corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: line %d: %s", ErrCorruptCheckpoint, r.line, fmt.Sprintf(format, args...))
}

// next returns the next line without its "\n". what names the line's
// content for the error when there is none or it has no "\n".
func (r *lineReader) next(what string) ([]byte, error) {
	r.line++
	if len(r.rest) == 0 {
		return nil, r.corrupt("missing %s: file ends", what)
	}
	end := bytes.IndexByte(r.rest, '\n')
	if end < 0 {
		return nil, r.corrupt("%s %q: no newline at the end", what, r.rest)
	}
	line := r.rest[:end]
	r.rest = r.rest[end+1:]
	return line, nil
}

// number reads a line holding one number in [lowest, highest].
func (r *lineReader) number(what string, lowest, highest int64) (int64, error) {
	line, err := r.next(what)
	if err != nil {
		return 0, err
	}
	return r.parse(what, line, lowest, highest)
}

// entry reads a line "<epoch> <startOffset>".
func (r *lineReader) entry() (Entry, error) {
	line, err := r.next("entry")
	if err != nil {
		return Entry{}, err
	}
	epochText, offsetText, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return Entry{}, r.corrupt("entry %q: want \"<epoch> <start offset>\"", line)
	}
	epoch, err := r.parse("epoch", epochText, 0, math.MaxInt32)
	if err != nil {
		return Entry{}, err
	}
	offset, err := r.parse("start offset", offsetText, 0, math.MaxInt64)
	if err != nil {
		return Entry{}, err
	}
	return Entry{Epoch: recordbatch.Epoch(epoch), StartOffset: recordbatch.Offset(offset)}, nil
}

// parse reads a canonical decimal number (digits only, no sign, no leading
// zero) in [lowest, highest].
func (r *lineReader) parse(what string, text []byte, lowest, highest int64) (int64, error) {
	if !canonicalDecimal(text) {
		return 0, r.corrupt("%s %q: not a decimal number without sign or leading zero", what, text)
	}
	n, err := strconv.ParseInt(string(text), 10, 64)
	if err != nil || n < lowest || n > highest {
		return 0, r.corrupt("%s %s: out of range [%d, %d]", what, text, lowest, highest)
	}
	return n, nil
}

func canonicalDecimal(text []byte) bool {
	if len(text) == 0 || (text[0] == '0' && len(text) > 1) {
		return false
	}
	for _, c := range text {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
