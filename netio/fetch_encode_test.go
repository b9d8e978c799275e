package netio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	rb "github.com/mirrord/mirrord/recordbatch"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fetchEncodeCase is one partition of the encoder test: what both
// encoders are given.
type fetchEncodeCase struct {
	topic     string
	omit      bool // in the reply but left out of the response (sessions)
	partition fetchPartition
	records   []byte
}

// fetchEncodeCases covers several topics and partitions (one topic in
// two runs), empty record sets, errors, aborted transactions (null, empty,
// some), a preferred replica, every tag, and records larger than a socket
// buffer and the connection's write buffer.
func fetchEncodeCases(rng *rand.Rand) []fetchEncodeCase {
	record := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	partition := func(index int32, mutate func(*fetchPartition)) fetchPartition {
		var p fetchPartition
		p.resetResponse()
		p.partition = index
		p.highWatermark, p.lastStableOffset, p.logStartOffset = 100+rb.Offset(index), 90+rb.Offset(index), rb.Offset(index)
		if mutate != nil {
			mutate(&p)
		}
		return p
	}
	return []fetchEncodeCase{
		{topic: "alpha", omit: true, partition: partition(9, nil), records: record(10)},
		{topic: "alpha", partition: partition(0, func(p *fetchPartition) {
			p.abortedTransactions = []AbortedTransaction{{ProducerID: 7, FirstOffset: 3}, {ProducerID: 9, FirstOffset: 5}}
		}), records: record(1000)},
		{topic: "alpha", partition: partition(1, nil)},
		{topic: "alpha", omit: true, partition: partition(8, nil)},
		{topic: "alpha", partition: partition(2, func(p *fetchPartition) {
			p.errorCode = kerr.OffsetOutOfRange.Code
			p.highWatermark, p.lastStableOffset, p.logStartOffset = -1, -1, -1
		})},
		{topic: "alpha", partition: partition(3, func(p *fetchPartition) {
			p.abortedTransactions = []AbortedTransaction{}
			p.preferredReadReplica = 3
		}), records: record(3<<20 + 17)},
		{topic: "alpha", partition: partition(4, func(p *fetchPartition) {
			p.divergingEpoch = fetchEpochEndOffset{epoch: 3, endOffset: 42}
			p.snapshotID = fetchEpochEndOffset{epoch: 2, endOffset: 100}
		})},
		{topic: "beta", partition: partition(0, nil), records: record(17)},
		{topic: "beta", partition: partition(7, func(p *fetchPartition) {
			p.errorCode = kerr.FencedLeaderEpoch.Code
			p.currentLeader = fetchLeader{leaderID: 1, leaderEpoch: 5}
		})},
		{topic: "alpha", partition: partition(5, nil), records: record(200 << 10)},
		{topic: "beta", omit: true, partition: partition(6, nil), records: record(5)},
	}
}

var fetchEncodeTopicIDs = map[string]TopicID{"alpha": {1, 2, 3}, "beta": {0xbe, 0x7a}}

// fetchEncodeBuild builds the same response twice: as kmsg, with the
// records as bytes, and as a fetchReply reading them from file.
func fetchEncodeBuild(version int16, cases []fetchEncodeCase, file RangeFile, positions []int64, released *atomic.Int64) (*kmsg.FetchResponse, *fetchReply) {
	want := kmsg.NewPtrFetchResponse()
	want.Version = version
	want.SessionID = 77
	reply := &fetchReply{version: version, sessionID: 77}
	// node_endpoints is v16+; kmsg would send it from v12, the encoder must not.
	reply.nodeEndpoints = []fetchNodeEndpoint{{nodeID: 1, host: "node-1.example", port: 9092}}
	if version >= 16 {
		want.Brokers = []kmsg.FetchResponseBroker{{NodeID: 1, Host: "node-1.example", Port: 9092}}
	}
	for i, c := range cases {
		p := c.partition
		p.topic, p.topicID, p.omit = c.topic, fetchEncodeTopicIDs[c.topic], c.omit
		if len(c.records) > 0 {
			p.records = FileRange{File: file, Position: positions[i], Length: int64(len(c.records)), Release: func() error { released.Add(1); return nil }}
		}
		reply.partitions = append(reply.partitions, p)
		if c.omit {
			continue
		}
		if n := len(want.Topics); n == 0 || want.Topics[n-1].Topic != c.topic {
			want.Topics = append(want.Topics, kmsg.FetchResponseTopic{Topic: c.topic, TopicID: fetchEncodeTopicIDs[c.topic]})
		}
		kp := kmsg.NewFetchResponseTopicPartition()
		kp.Partition, kp.ErrorCode = p.partition, p.errorCode
		kp.HighWatermark, kp.LastStableOffset, kp.LogStartOffset = int64(p.highWatermark), int64(p.lastStableOffset), int64(p.logStartOffset)
		for _, a := range p.abortedTransactions {
			kp.AbortedTransactions = append(kp.AbortedTransactions, kmsg.FetchResponseTopicPartitionAbortedTransaction{ProducerID: a.ProducerID, FirstOffset: int64(a.FirstOffset)})
		}
		if p.abortedTransactions != nil && kp.AbortedTransactions == nil {
			kp.AbortedTransactions = []kmsg.FetchResponseTopicPartitionAbortedTransaction{}
		}
		kp.PreferredReadReplica = p.preferredReadReplica
		kp.RecordBatches = append([]byte{}, c.records...)
		kp.DivergingEpoch.Epoch, kp.DivergingEpoch.EndOffset = int32(p.divergingEpoch.epoch), int64(p.divergingEpoch.endOffset)
		kp.CurrentLeader.LeaderID, kp.CurrentLeader.LeaderEpoch = p.currentLeader.leaderID, int32(p.currentLeader.leaderEpoch)
		kp.SnapshotID.Epoch, kp.SnapshotID.EndOffset = int32(p.snapshotID.epoch), int64(p.snapshotID.endOffset)
		last := &want.Topics[len(want.Topics)-1]
		last.Partitions = append(last.Partitions, kp)
	}
	return want, reply
}

// fetchTestFile writes the records of cases to a file, with gaps between
// them, and returns it and each case's position.
func fetchTestFile(t testing.TB, cases []fetchEncodeCase) (*os.File, []int64) {
	t.Helper()
	var data []byte
	positions := make([]int64, len(cases))
	for i, c := range cases {
		data = append(data, "gap"...)
		positions[i] = int64(len(data))
		data = append(data, c.records...)
	}
	path := filepath.Join(t.TempDir(), "segment")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { file.Close() })
	return file, positions
}

// fetchTestTCPPair returns both ends of a loopback TCP connection.
func fetchTestTCPPair(t testing.TB) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server = <-accepted
	if server == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

// fetchTestWriteConn is a server-side conn over nc, as Serve makes them.
func fetchTestWriteConn(nc net.Conn) *conn {
	s := NewServer(Config{Backend: newMemBackend()})
	return &conn{server: s, nc: nc, w: bufio.NewWriterSize(nc, 64<<10)}
}

// fetchTestReadFrame reads one whole frame, size included.
func fetchTestReadFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	frame := make([]byte, 4+binary.BigEndian.Uint32(size[:]))
	copy(frame, size[:])
	_, err := io.ReadFull(r, frame[4:])
	return frame, err
}

// memRangeFile is a RangeFile without a descriptor: the fallback path.
type memRangeFile struct{ *os.File }

func (memRangeFile) Fd() uintptr { return noFd }

func TestFetchEncodeMatchesKmsg(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cases := fetchEncodeCases(rng)
	file, positions := fetchTestFile(t, cases)
	transports := []struct {
		name     string
		pair     func(testing.TB) (net.Conn, net.Conn)
		file     RangeFile
		sendfile bool
	}{
		{"tcp-sendfile", fetchTestTCPPair, file, true},
		{"tcp-copy", fetchTestTCPPair, memRangeFile{file}, false},
		{"pipe-copy", func(testing.TB) (net.Conn, net.Conn) { return net.Pipe() }, file, false},
	}
	for _, transport := range transports {
		for version := int16(4); version <= 18; version++ {
			t.Run(fmt.Sprintf("%s/v%d", transport.name, version), func(t *testing.T) {
				var released atomic.Int64
				want, reply := fetchEncodeBuild(version, cases, transport.file, positions, &released)
				correlationID := int32(1000 + version)
				wantFrame := appendResponseHeader(nil, correlationID, want.IsFlexible())
				wantFrame = want.AppendTo(wantFrame)
				finishFrame(wantFrame, 0)

				serverSide, clientSide := transport.pair(t)
				defer serverSide.Close()
				defer clientSide.Close()
				clientSide.SetDeadline(time.Now().Add(20 * time.Second))
				c := fetchTestWriteConn(serverSide)
				reply.server = c.server
				written := make(chan error, 1)
				go func() {
					written <- reply.writeFrame(c, RequestHeader{Key: 1, Version: version, CorrelationID: correlationID})
				}()
				got, err := fetchTestReadFrame(clientSide)
				if err != nil {
					t.Fatalf("reading the frame: %v", err)
				}
				if err := <-written; err != nil {
					t.Fatalf("writeFrame: %v", err)
				}
				if !bytes.Equal(got, wantFrame) {
					t.Fatalf("frame differs from kmsg's: %d bytes, want %d; first difference at %d", len(got), len(wantFrame), firstDifference(got, wantFrame))
				}
				stats := &c.server.sessions.stats.transfer
				if transport.sendfile != (stats.sendfileBytes.Load() > 0) || transport.sendfile == (stats.copiedBytes.Load() > 0) {
					t.Fatalf("sendfile %d bytes, copied %d bytes; want sendfile %v", stats.sendfileBytes.Load(), stats.copiedBytes.Load(), transport.sendfile)
				}
				if got, want := released.Load(), fetchEncodeRanges(cases); got != want {
					t.Fatalf("released %d ranges, want %d", got, want)
				}
			})
		}
	}
}

func fetchEncodeRanges(cases []fetchEncodeCase) int64 {
	var n int64
	for _, c := range cases {
		if len(c.records) > 0 {
			n++
		}
	}
	return n
}

func firstDifference(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// The encoder must not allocate once its buffers have grown.
func TestFetchEncodeAllocs(t *testing.T) {
	cases := fetchEncodeCases(rand.New(rand.NewPCG(3, 4)))
	file, positions := fetchTestFile(t, cases)
	var released atomic.Int64
	for _, version := range []int16{4, 11, 12, 16, 18} {
		_, reply := fetchEncodeBuild(version, cases, file, positions, &released)
		buf, _ := appendFetchResponse(nil, reply)
		allocs := testing.AllocsPerRun(100, func() { buf, _ = appendFetchResponse(buf[:0], reply) })
		if allocs != 0 {
			t.Errorf("v%d: %.1f allocations per response, want 0", version, allocs)
		}
	}
}

func TestFetchUvarintLen(t *testing.T) {
	for _, v := range []uint64{0, 1, 127, 128, 16383, 16384, 1<<21 - 1, 1 << 21, 1<<32 - 1} {
		if got, want := uvarintLen(v), len(binary.AppendUvarint(nil, v)); got != want {
			t.Errorf("uvarintLen(%d) = %d, want %d", v, got, want)
		}
	}
}

// writeFileRange moves exact bytes with sendfile on TCP with a real
// descriptor, and by copy otherwise; a range longer than its file fails
// without sending anything wrong.
func TestFetchWriteFileRange(t *testing.T) {
	data := make([]byte, 8<<20+3)
	for i := range data {
		data[i] = byte(i * 7)
	}
	path := filepath.Join(t.TempDir(), "segment")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	tests := []struct {
		name     string
		pair     func(testing.TB) (net.Conn, net.Conn)
		file     RangeFile
		position int64
		length   int64
		sendfile bool
		short    bool
	}{
		{"sendfile", fetchTestTCPPair, file, 5, int64(len(data)) - 5, true, false},
		{"sendfile-short", fetchTestTCPPair, file, 1 << 20, int64(len(data)), true, true},
		{"copy-no-fd", fetchTestTCPPair, memRangeFile{file}, 5, int64(len(data)) - 5, false, false},
		{"copy-no-fd-short", fetchTestTCPPair, memRangeFile{file}, 1 << 20, int64(len(data)), false, true},
		{"copy-not-tcp", func(testing.TB) (net.Conn, net.Conn) { return net.Pipe() }, file, 5, 100 << 10, false, false},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			serverSide, clientSide := test.pair(t)
			defer clientSide.Close()
			clientSide.SetDeadline(time.Now().Add(20 * time.Second))
			c := fetchTestWriteConn(serverSide)
			c.w.WriteString("prefix")
			done := make(chan error, 1)
			go func() {
				err := writeFileRange(c, FileRange{File: test.file, Position: test.position, Length: test.length}, &c.server.sessions.stats.transfer)
				if err == nil {
					err = c.w.Flush()
				}
				serverSide.Close()
				done <- err
			}()
			got, readErr := io.ReadAll(clientSide)
			err := <-done
			if readErr != nil && !errors.Is(readErr, io.EOF) {
				t.Fatalf("read: %v", readErr)
			}
			available := min(test.length, int64(len(data))-test.position)
			want := append([]byte("prefix"), data[test.position:test.position+available]...)
			if test.short {
				if !errors.Is(err, errShortRange) {
					t.Fatalf("writeFileRange of a short range: %v, want errShortRange", err)
				}
				if !bytes.HasPrefix(want, got) {
					t.Fatalf("short range: the %d bytes sent are not a prefix of the file", len(got))
				}
				return
			}
			if err != nil {
				t.Fatalf("writeFileRange: %v", err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("got %d bytes, want %d; first difference at %d", len(got), len(want), firstDifference(got, want))
			}
			stats := &c.server.sessions.stats.transfer
			if test.sendfile && stats.sendfileBytes.Load() != test.length || !test.sendfile && stats.copiedBytes.Load() != test.length {
				t.Fatalf("sendfile %d bytes, copied %d; want %d by sendfile=%v", stats.sendfileBytes.Load(), stats.copiedBytes.Load(), test.length, test.sendfile)
			}
		})
	}
}

// truncatedPartition hands out ranges whose file ends halfway: the file
// was truncated under the range.
type truncatedPartition struct {
	Partition
	t        testing.TB
	dir      string
	sendfile bool
	released *atomic.Int64
}

func (p truncatedPartition) Read(offset rb.Offset, maxBytes int32, isolation Isolation, minOneBatch bool) (ReadResult, error) {
	read, err := p.Partition.Read(offset, maxBytes, isolation, minOneBatch)
	if err != nil || read.Records.Length == 0 {
		return read, err
	}
	data := make([]byte, read.Records.Length)
	if _, err := read.Records.File.ReadAt(data, read.Records.Position); err != nil {
		return read, err
	}
	path := filepath.Join(p.dir, fmt.Sprintf("truncated-%d", time.Now().UnixNano()))
	if err := os.WriteFile(path, data[:len(data)/2], 0o600); err != nil {
		return read, err
	}
	file, err := os.Open(path)
	if err != nil {
		return read, err
	}
	var rangeFile RangeFile = file
	if !p.sendfile {
		rangeFile = memRangeFile{file}
	}
	read.Records = FileRange{File: rangeFile, Length: read.Records.Length, Release: func() error { p.released.Add(1); return file.Close() }}
	return read, nil
}

func TestFetchTruncatedRangeClosesConnection(t *testing.T) {
	for _, sendfile := range []bool{true, false} {
		t.Run(fmt.Sprintf("sendfile=%v", sendfile), func(t *testing.T) {
			mem := newMemBackend()
			var released atomic.Int64
			dir := t.TempDir()
			backend := &wrapBackend{mem, func(_ string, _ int32, p Partition) Partition {
				return truncatedPartition{Partition: p, t: t, dir: dir, sendfile: sendfile, released: &released}
			}}
			addr, _ := startFetchServer(t, mem, backend, nil)
			info := fetchTestTopic(t, mem, "cut", 1, []string{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbb"})
			client := dialFetchTest(t, addr)
			if resp, err := client.roundTrip(fetchTestRequest(18, info, at(0, 0))); err == nil {
				t.Fatalf("a truncated range was answered: %+v", resp)
			}
			fetchTestEventually(t, 10*time.Second, "releasing the range", func() bool { return released.Load() == 1 })
		})
	}
}

// Records leave through sendfile when the backend's files have
// descriptors, and every FileRange is released.
func TestFetchKgoSendfile(t *testing.T) {
	mem := newMemBackend()
	files := newFileBackend(t, mem)
	addr, server := startFetchServer(t, mem, files, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var values [][]string
	for i := range 20 {
		values = append(values, []string{fmt.Sprintf("a%d", i), fmt.Sprintf("b%d", i)})
	}
	fetchTestTopic(t, files, "segments", 2, values...)
	consumer, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchMaxPartitionBytes(300), kgo.FetchMaxWait(200*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"segments": {0: kgo.NewOffset().At(0), 1: kgo.NewOffset().At(0)}}))
	if err != nil {
		t.Fatal(err)
	}
	next := map[int32]int64{}
	for total := 0; total < 80; {
		fetches := consumer.PollFetches(ctx)
		if errs := fetches.Errors(); len(errs) > 0 {
			t.Fatalf("poll: %v", errs)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			want := fmt.Sprintf("%c%d", "ab"[r.Offset%2], r.Offset/2)
			if r.Offset != next[r.Partition] || string(r.Value) != want {
				t.Fatalf("partition %d: record at %d %q, want offset %d %q", r.Partition, r.Offset, r.Value, next[r.Partition], want)
			}
			next[r.Partition]++
			total++
		})
	}
	consumer.Close()
	transfer := &server.sessions.stats.transfer
	if transfer.sendfileBytes.Load() == 0 || transfer.copiedBytes.Load() != 0 {
		t.Fatalf("sendfile %d bytes, copied %d; want all by sendfile", transfer.sendfileBytes.Load(), transfer.copiedBytes.Load())
	}
	fetchTestEventually(t, 10*time.Second, "releasing every range", func() bool { return files.outstanding.Load() == 0 })
	if files.doubleReleases.Load() != 0 {
		t.Fatalf("%d ranges released twice", files.doubleReleases.Load())
	}
}

// A partition read committed with no aborted transaction answers an
// empty list, not null (as Kafka does).
func TestFetchReadCommittedEmptyList(t *testing.T) {
	mem := newMemBackend()
	server := NewServer(Config{Backend: mem})
	fetchTestTopic(t, mem, "txn", 1, []string{"a"})
	f := &fetchReply{server: server, conn: &conn{server: server}, version: 18, partitions: []fetchPartition{{topic: "txn", partitionMaxBytes: 1 << 20, currentLeaderEpoch: -1, lastFetchedEpoch: -1}}}
	for _, test := range []struct {
		isolation Isolation
		null      bool
	}{{ReadUncommitted, true}, {ReadCommitted, false}} {
		f.readAll(test.isolation, 1<<20)
		if got := f.partitions[0].abortedTransactions; (got == nil) != test.null || len(got) != 0 {
			t.Fatalf("isolation %d: aborted %#v, want null %v", test.isolation, got, test.null)
		}
		f.releaseRecords()
	}
}
