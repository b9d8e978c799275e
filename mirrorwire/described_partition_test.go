package mirrorwire

import (
	"bytes"
	"reflect"
	"testing"
)

// TestDescribedPartitionLeaderAndISR: a partition's leader and ISR on a
// cluster travel as tags 5 and 6, each absent when unknown (a node
// alone), so that a node alone answers the bytes it answered before they
// existed; a reader that does not know the tags reads the rest the same.
func TestDescribedPartitionLeaderAndISR(t *testing.T) {
	base := func() DescribeClusterMirrorsPartition {
		var p DescribeClusterMirrorsPartition
		p.Default()
		p.PartitionIndex, p.StateValue, p.DestinationOffset = 1, "MIRRORING", 7
		return p
	}
	alone := base()
	for _, tc := range []struct {
		name     string
		leader   int32
		isr      []int32
		wantTags []byte // the partition's tagged fields as written
	}{
		{"node alone", -1, nil, []byte{0}},
		{"leader and ISR", 3, []int32{3, 1, 2}, []byte{2, 5, 4, 0, 0, 0, 3, 6, 13, 4, 0, 0, 0, 3, 0, 0, 0, 1, 0, 0, 0, 2}},
		{"leader node 0", 0, []int32{0}, []byte{2, 5, 4, 0, 0, 0, 0, 6, 5, 2, 0, 0, 0, 0}},
		{"offline: no leader, the last ISR", -1, []int32{2}, []byte{1, 6, 5, 2, 0, 0, 0, 2}},
	} {
		p := base()
		p.Leader, p.ISR = tc.leader, tc.isr
		encoded := appendDescribedPartition(nil, &p)
		prefix := appendDescribedPartition(nil, &alone)
		prefix = prefix[:len(prefix)-1] // the node alone's tags: none
		if !bytes.HasPrefix(encoded, prefix) || !bytes.Equal(encoded[len(prefix):], tc.wantTags) {
			t.Errorf("%s: % x, want % x then the tags % x", tc.name, encoded, prefix, tc.wantTags)
			continue
		}
		d := newReader(encoded)
		if got := readDescribedPartition(&d); d.complete() != nil || !reflect.DeepEqual(got, p) {
			t.Errorf("%s: read %+v (%v), want %+v", tc.name, got, d.complete(), p)
		}
		// A reader that knows neither tag: renumber them beyond any known.
		old := bytes.Clone(encoded)
		at := len(prefix) + 1
		for range old[len(prefix)] { // bounded by the tag count, at most 2
			old[at] += 20
			at += 2 + int(old[at+1])
		}
		d = newReader(old)
		if got := readDescribedPartition(&d); d.complete() != nil || !reflect.DeepEqual(got, alone) {
			t.Errorf("%s, read without tags 5 and 6: %+v (%v), want %+v", tc.name, got, d.complete(), alone)
		}
	}
}
