package e2e

// The steps of the transaction sequences (diff_txn_test.go): requests
// built from a server's session at a pinned version, and waits.

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Error codes a retrying step resends on (timing only; diff_txn_test.go).
var (
	// txnCompleting: Kafka writes the markers of an ended transaction after
	// it answered; CONCURRENT_TRANSACTIONS until then, which a Produce's
	// implicit add answers as NOT_ENOUGH_REPLICAS.
	txnCompleting = []int16{51, 19}
	// txnLoading: a restarted Kafka loads its logs and coordinators:
	// NOT_LEADER_OR_FOLLOWER, COORDINATOR_LOAD_IN_PROGRESS,
	// COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR.
	txnLoading = []int16{6, 14, 15, 16}
)

const (
	txnTimeoutMillis      = 60000 // longer than any sequence
	txnShortTimeoutMillis = 1000  // the sequences that wait for the coordinator to abort
	isolationUncommitted  = 0
	isolationCommitted    = 1
	otherProducerIDOffset = 1 << 40 // added to a producer ID: one no server handed out
	// txnAwaitWait bounds a wait: a transaction timeout (1 s), then the
	// coordinator's next check (every txnCleanupInterval), on a loaded
	// machine.
	txnAwaitWait = 15 * time.Second
)

// retrying returns the step resending its request while the answer
// carries one of the codes.
func (step txnStep) retrying(codes ...[]int16) txnStep {
	step.retry = slices.Concat(append([][]int16{step.retry}, codes...)...)
	return step
}

// notInTransaction returns the step with a Produce of a partition the
// producer did not add (below transaction version 2) normalised to one
// answer: INVALID_TXN_STATE and TRANSACTION_ABORTABLE compare equal, their
// messages unset. Kafka's AddPartitionsToTxnManager batches the
// verifications bound for one coordinator node and keeps the supported
// operation of the request that opened the batch (addTxnData), so under
// the concurrent produces of the other sequences a Produce v9 may get
// v11's TRANSACTION_ABORTABLE and a v11 v9's INVALID_TXN_STATE, and in
// one run did. mirrord answers by each request's version (v3-10
// INVALID_TXN_STATE, v11 TRANSACTION_ABORTABLE), as Kafka alone does: its
// own tests check that (broker/transactions_test.go).
func (step txnStep) notInTransaction() txnStep {
	step.normalise = func(fromKafka, fromMirrord any) {
		for _, answer := range []any{fromKafka, fromMirrord} {
			resp, ok := answer.(*kmsg.ProduceResponse)
			if !ok {
				continue
			}
			for i := range resp.Topics {
				for j := range resp.Topics[i].Partitions {
					p := &resp.Topics[i].Partitions[j]
					if p.ErrorCode == kerr.TransactionAbortable.Code || p.ErrorCode == kerr.InvalidTxnState.Code {
						p.ErrorCode, p.ErrorMessage = kerr.InvalidTxnState.Code, nil
					}
				}
			}
		}
	}
	return step
}

// txnAs changes who a request claims to come from.
type txnAs struct {
	otherID   bool  // a producer ID the server never handed out
	epoch     int16 // added to the producer's epoch
	unknownID bool  // a transactional ID never initialised
	noEpoch   bool  // epoch -1 (with the producer ID: half of KIP-360's pair)
}

func (as txnAs) String() string {
	var parts []string
	if as.otherID {
		parts = append(parts, "another producer ID")
	}
	if as.epoch != 0 {
		parts = append(parts, fmt.Sprintf("epoch%+d", as.epoch))
	}
	if as.unknownID {
		parts = append(parts, "unknown transactional ID")
	}
	if as.noEpoch {
		parts = append(parts, "epoch -1")
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

// transactionalID is the transactional ID of the named producer: the
// sequence's, then the name up to '#' (a#2 is a second producer with a's
// transactional ID).
func (s *txnSession) transactionalID(name string) string {
	base, _, _ := strings.Cut(name, "#")
	return s.sequence + "-" + base
}

// identity is what the named producer claims, changed by as.
func (s *txnSession) identity(name string, as txnAs) (string, int64, int16) {
	p := s.producer(name)
	id, epoch, transactionalID := p.id, p.epoch+as.epoch, s.transactionalID(name)
	if as.otherID {
		id += otherProducerIDOffset
	}
	if as.unknownID {
		transactionalID += "-unknown"
	}
	if as.noEpoch {
		epoch = -1
	}
	return transactionalID, id, epoch
}

// learnProducer takes the producer ID and epoch of a successful
// InitProducerID or EndTxn v5 answer.
func learnProducer(name string) func(*txnSession, kmsg.Response) {
	return func(s *txnSession, resp kmsg.Response) {
		switch r := resp.(type) {
		case *kmsg.InitProducerIDResponse:
			if r.ErrorCode == 0 {
				s.setProducer(name, r.ProducerID, r.ProducerEpoch)
			}
		case *kmsg.EndTxnResponse:
			if r.ErrorCode == 0 && r.Version >= 5 {
				s.setProducer(name, r.ProducerID, r.ProducerEpoch)
			}
		}
	}
}

// initIdempotent is an InitProducerID without a transactional ID.
func initIdempotent(p string, version int16) txnStep {
	return txnStep{what: fmt.Sprintf("InitProducerID v%d idempotent %s", version, p), learn: learnProducer(p),
		request: func(s *txnSession) kmsg.Request {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.Version, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = version, -1, -1, -1
			return req
		}}
}

// initTxn is an InitProducerID of p's transactional ID, not naming a
// producer ID and epoch.
func initTxn(p string, version int16, timeoutMillis int32) txnStep {
	return txnStep{what: fmt.Sprintf("InitProducerID v%d %s timeout %d ms", version, p, timeoutMillis), learn: learnProducer(p),
		request: func(s *txnSession) kmsg.Request {
			req := kmsg.NewPtrInitProducerIDRequest()
			req.Version, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = version, timeoutMillis, -1, -1
			req.TransactionalID = kmsg.StringPtr(s.transactionalID(p))
			return req
		}}
}

// initTxnAs is an InitProducerID (v3+, KIP-360) naming p's producer ID
// and epoch, changed by as.
func initTxnAs(p string, version int16, timeoutMillis int32, as txnAs) txnStep {
	return txnStep{what: fmt.Sprintf("InitProducerID v%d %s with its producer ID and epoch%s", version, p, as), learn: learnProducer(p),
		request: func(s *txnSession) kmsg.Request {
			transactionalID, id, epoch := s.identity(p, as)
			req := kmsg.NewPtrInitProducerIDRequest()
			req.Version, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch = version, timeoutMillis, id, epoch
			req.TransactionalID = kmsg.StringPtr(transactionalID)
			return req
		}}
}

// txnBatch is one batch of a Produce step.
type txnBatch struct {
	producer      string // "" for no producer ID
	topic         string
	partition     int32
	records       int
	transactional bool
	as            txnAs
	sequence      int64 // >= 0: this base sequence instead of the next one
	skip          int32 // added to the next sequence (a gap)
	resend        int   // > 0: the batch built resend batches ago for this partition, again
	separate      bool  // in a partition entry of its own, not appended to the previous one's records
}

// batchOf is a batch of records records of p (idempotent) to a partition.
func batchOf(p, topic string, partition int32, records int) txnBatch {
	return txnBatch{producer: p, topic: topic, partition: partition, records: records, sequence: -1}
}

func (b txnBatch) txn() txnBatch              { b.transactional = true; return b }
func (b txnBatch) claiming(as txnAs) txnBatch { b.as = as; return b }
func (b txnBatch) at(sequence int32) txnBatch { b.sequence = int64(sequence); return b }
func (b txnBatch) gap(skip int32) txnBatch    { b.skip = skip; return b }
func (b txnBatch) again(back int) txnBatch    { b.resend = back; return b }
func (b txnBatch) alone() txnBatch            { b.separate = true; return b }

func (b txnBatch) String() string {
	var s strings.Builder
	fmt.Fprintf(&s, "%s %d record(s) of %s to %s-%d", map[bool]string{true: "transactional", false: "idempotent"}[b.transactional],
		b.records, b.producer, b.topic, b.partition)
	switch {
	case b.resend > 0:
		fmt.Fprintf(&s, " again (the batch %d back)", b.resend)
	case b.sequence >= 0:
		fmt.Fprintf(&s, " at sequence %d", b.sequence)
	case b.skip != 0:
		fmt.Fprintf(&s, " skipping %d sequence numbers", b.skip)
	}
	return s.String() + b.as.String()
}

// pendingBatch is a new batch of the last Produce built, for learn.
type pendingBatch struct {
	producer string
	tp       topicPartition
	next     int32 // the producer's next sequence if it is acknowledged
}

// build makes the batch's bytes from s and notes what an acknowledgment
// of it teaches.
func (b txnBatch) build(s *txnSession, pending *[]pendingBatch) []byte {
	tp := topicPartition{b.topic, b.partition}
	if b.producer == "" {
		return producerBatch(-1, -1, -1, false, b.records)
	}
	p := s.producer(b.producer)
	if b.resend > 0 {
		sent := p.sent[tp]
		if b.resend > len(sent) {
			panic(fmt.Sprintf("e2e: %v: only %d batches sent", b, len(sent)))
		}
		return sent[len(sent)-b.resend]
	}
	_, id, epoch := s.identity(b.producer, b.as)
	sequence := p.next[tp] + b.skip
	if b.sequence >= 0 {
		sequence = int32(b.sequence)
	}
	batch := producerBatch(id, epoch, sequence, b.transactional, b.records)
	p.sent[tp] = append(p.sent[tp], batch)
	*pending = append(*pending, pendingBatch{b.producer, tp, int32((int64(sequence) + int64(b.records)) % (math.MaxInt32 + 1))})
	return batch
}

// producerBatch is a batch of records one-byte records (produceBatch)
// of a producer at a base sequence, transactional or not.
func producerBatch(id int64, epoch int16, sequence int32, transactional bool, records int) []byte {
	deltas := make([]int64, records)
	for i := range deltas {
		deltas[i] = int64(i)
	}
	return produceBatch(nowMillis(), deltas, func(b []byte) []byte {
		if transactional {
			binary.BigEndian.PutUint16(b[batchAttributesAt:], batchTxnBit)
		}
		binary.BigEndian.PutUint64(b[43:], uint64(id))
		binary.BigEndian.PutUint16(b[51:], uint16(epoch))
		binary.BigEndian.PutUint32(b[53:], uint32(sequence))
		return b
	})
}

// produceStep is a Produce (acks -1) of batches; v13 names topics by ID.
// Its transactional ID is that of the first transactional batch.
func produceStep(version int16, batches ...txnBatch) txnStep {
	var what []string
	for _, b := range batches {
		what = append(what, b.String())
	}
	return txnStep{what: fmt.Sprintf("Produce v%d: %s", version, strings.Join(what, "; ")),
		request: func(s *txnSession) kmsg.Request {
			s.pending = s.pending[:0]
			req := kmsg.NewPtrProduceRequest()
			req.Version, req.Acks, req.TimeoutMillis = version, -1, 10000
			for _, b := range batches {
				if b.transactional && req.TransactionID == nil {
					transactionalID, _, _ := s.identity(b.producer, b.as)
					req.TransactionID = kmsg.StringPtr(transactionalID)
				}
				records := b.build(s, &s.pending)
				topic := slices.IndexFunc(req.Topics, func(t kmsg.ProduceRequestTopic) bool { return t.Topic == b.topic })
				if topic < 0 {
					rt := kmsg.NewProduceRequestTopic()
					rt.Topic = b.topic
					if version >= 13 {
						rt.TopicID = s.topicIDs[b.topic]
					}
					req.Topics = append(req.Topics, rt)
					topic = len(req.Topics) - 1
				}
				rt := &req.Topics[topic]
				last := len(rt.Partitions) - 1
				if b.separate || last < 0 || rt.Partitions[last].Partition != b.partition {
					rp := kmsg.NewProduceRequestTopicPartition()
					rp.Partition = b.partition
					rt.Partitions = append(rt.Partitions, rp)
					last++
				}
				rt.Partitions[last].Records = append(rt.Partitions[last].Records, records...)
			}
			if version >= 13 {
				for i := range req.Topics {
					req.Topics[i].Topic = ""
				}
			}
			return req
		},
		learn: func(s *txnSession, resp kmsg.Response) {
			acknowledged := map[topicPartition]bool{}
			for _, topic := range resp.(*kmsg.ProduceResponse).Topics {
				name := topic.Topic
				for n, id := range s.topicIDs {
					if version >= 13 && id == topic.TopicID {
						name = n
					}
				}
				for _, p := range topic.Partitions {
					if p.ErrorCode == 0 {
						acknowledged[topicPartition{name, p.Partition}] = true
					}
				}
			}
			for _, b := range s.pending {
				if acknowledged[b.tp] {
					s.producer(b.producer).next[b.tp] = b.next
				}
			}
		}}
}

// addPartitions is an AddPartitionsToTxn v0-v3 of p adding partitions.
func addPartitions(version int16, p string, as txnAs, topic string, partitions ...int32) txnStep {
	return txnStep{what: fmt.Sprintf("AddPartitionsToTxn v%d %s %s%v%s", version, p, topic, partitions, as),
		request: func(s *txnSession) kmsg.Request {
			req := kmsg.NewPtrAddPartitionsToTxnRequest()
			req.Version = version
			req.TransactionalID, req.ProducerID, req.ProducerEpoch = s.identity(p, as)
			rt := kmsg.NewAddPartitionsToTxnRequestTopic()
			rt.Topic, rt.Partitions = topic, partitions
			req.Topics = append(req.Topics, rt)
			return req
		}}
}

// txnAdd is one transaction of a batched AddPartitionsToTxn (v4+).
type txnAdd struct {
	producer   string
	as         txnAs
	verifyOnly bool
	topic      string
	partitions []int32
}

// addPartitionsBatched is an AddPartitionsToTxn v4+ of transactions.
func addPartitionsBatched(version int16, adds ...txnAdd) txnStep {
	var what []string
	for _, a := range adds {
		what = append(what, fmt.Sprintf("%s %s%v verifyOnly=%v%s", a.producer, a.topic, a.partitions, a.verifyOnly, a.as))
	}
	return txnStep{what: fmt.Sprintf("AddPartitionsToTxn v%d: %s", version, strings.Join(what, "; ")),
		request: func(s *txnSession) kmsg.Request {
			req := kmsg.NewPtrAddPartitionsToTxnRequest()
			req.Version = version
			for _, a := range adds {
				txn := kmsg.NewAddPartitionsToTxnRequestTransaction()
				txn.TransactionalID, txn.ProducerID, txn.ProducerEpoch = s.identity(a.producer, a.as)
				txn.VerifyOnly = a.verifyOnly
				rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
				rt.Topic, rt.Partitions = a.topic, a.partitions
				txn.Topics = append(txn.Topics, rt)
				req.Transactions = append(req.Transactions, txn)
			}
			return req
		}}
}

// endTxn is an EndTxn of p; v5+ answers the producer's next epoch.
func endTxn(version int16, p string, commit bool, as txnAs) txnStep {
	return txnStep{what: fmt.Sprintf("EndTxn v%d %s commit=%v%s", version, p, commit, as), learn: learnProducer(p),
		request: func(s *txnSession) kmsg.Request {
			req := kmsg.NewPtrEndTxnRequest()
			req.Version, req.Commit = version, commit
			req.TransactionalID, req.ProducerID, req.ProducerEpoch = s.identity(p, as)
			return req
		}}
}

// addOffsets is an AddOffsetsToTxn of p for the sequence's group.
func addOffsets(version int16, p string, as txnAs) txnStep {
	return txnStep{what: fmt.Sprintf("AddOffsetsToTxn v%d %s%s", version, p, as),
		request: func(s *txnSession) kmsg.Request {
			req := kmsg.NewPtrAddOffsetsToTxnRequest()
			req.Version, req.Group = version, s.sequence+"-group"
			req.TransactionalID, req.ProducerID, req.ProducerEpoch = s.identity(p, as)
			return req
		}}
}

// txnOffsetCommit is a TxnOffsetCommit of p for the sequence's group
// (no member: generation -1) of an offset of topic-partition.
func txnOffsetCommit(version int16, p string, as txnAs, topic string, partition int32, offset int64) txnStep {
	return txnStep{what: fmt.Sprintf("TxnOffsetCommit v%d %s %s-%d at %d%s", version, p, topic, partition, offset, as),
		request: func(s *txnSession) kmsg.Request {
			req := kmsg.NewPtrTxnOffsetCommitRequest()
			req.Version, req.Group, req.Generation = version, s.sequence+"-group", -1
			req.TransactionalID, req.ProducerID, req.ProducerEpoch = s.identity(p, as)
			rt := kmsg.NewTxnOffsetCommitRequestTopic()
			rt.Topic = topic
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = partition, offset, -1
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			return req
		}}
}

// fetchStep is a Fetch v12 of partitions of topic from offset 0.
func fetchStep(isolation int8, topic string, partitions ...int32) txnStep {
	return txnStep{what: fmt.Sprintf("Fetch v%d isolation %d %s%v", fetchVersion, isolation, topic, partitions),
		request: func(*txnSession) kmsg.Request {
			req := kmsg.NewPtrFetchRequest()
			req.Version, req.IsolationLevel = fetchVersion, isolation
			req.ReplicaID, req.MaxWaitMillis, req.MinBytes, req.MaxBytes = -1, 0, 0, 1<<20
			req.SessionID, req.SessionEpoch = 0, -1
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = topic
			for _, partition := range partitions {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = partition, 0, 1<<20
				rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
			return req
		}}
}

// listLatest is a ListOffsets v9 of the latest offset of partitions: the
// high watermark (isolation 0) or the last stable offset (isolation 1).
func listLatest(isolation int8, topic string, partitions ...int32) txnStep {
	return txnStep{what: fmt.Sprintf("ListOffsets v9 latest isolation %d %s%v", isolation, topic, partitions),
		request: func(*txnSession) kmsg.Request { return listLatestRequest(isolation, topic, partitions) }}
}

func listLatestRequest(isolation int8, topic string, partitions []int32) *kmsg.ListOffsetsRequest {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID, req.IsolationLevel = 9, -1, isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for _, partition := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = partition, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// findCoordinator is a FindCoordinator of p's transactional ID (keyType
// 1) or of the sequence's group (0).
func findCoordinator(version int16, keyType int8, p string) txnStep {
	return txnStep{what: fmt.Sprintf("FindCoordinator v%d type %d of %s", version, keyType, p),
		request: func(s *txnSession) kmsg.Request {
			key := s.transactionalID(p)
			if keyType == 0 {
				key = s.sequence + "-group"
			}
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.Version, req.CoordinatorType = version, keyType
			if version >= 4 {
				req.CoordinatorKeys = []string{key, key + "-2"}
			} else {
				req.CoordinatorKey = key
			}
			return req
		}}
}

// apiVersionsStep asks ApiVersions; the answer is cut to txnVersions.
func apiVersionsStep(version int16) txnStep {
	return txnStep{what: fmt.Sprintf("ApiVersions v%d", version),
		request: func(*txnSession) kmsg.Request {
			req := kmsg.NewPtrApiVersionsRequest()
			req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = version, "mirrord-e2e", "1"
			return req
		}}
}

// awaitStable waits until the last stable offset of each partition is its
// high watermark: no transaction is open there (a timed-out one was
// aborted by the coordinator, markers written).
func awaitStable(topic string, partitions ...int32) txnStep {
	return txnStep{what: fmt.Sprintf("wait until %s%v has no open transaction", topic, partitions),
		await: func(ctx context.Context, s *txnSession) error {
			return pollTxn(ctx, func() (bool, error) {
				var latest [2]map[int32]int64
				for isolation := range latest {
					resp, err := rawRequest(ctx, s.server.addr, listLatestRequest(int8(isolation), topic, partitions))
					if err != nil {
						return false, err
					}
					latest[isolation] = map[int32]int64{}
					for _, t := range resp.(*kmsg.ListOffsetsResponse).Topics {
						for _, p := range t.Partitions {
							if p.ErrorCode != 0 {
								return false, nil // loading after a restart
							}
							latest[isolation][p.Partition] = p.Offset
						}
					}
				}
				for _, p := range partitions {
					if latest[0][p] != latest[1][p] {
						return false, nil
					}
				}
				return true, nil
			})
		}}
}

// awaitLastStable waits until the last stable offset of a partition is
// at least offset: Kafka moves it once it wrote the markers of an ended
// transaction, after EndTxn answered.
func awaitLastStable(topic string, partition int32, offset int64) txnStep {
	return txnStep{what: fmt.Sprintf("wait until the last stable offset of %s-%d is at least %d", topic, partition, offset),
		await: func(ctx context.Context, s *txnSession) error {
			return pollTxn(ctx, func() (bool, error) {
				resp, err := rawRequest(ctx, s.server.addr, listLatestRequest(isolationCommitted, topic, []int32{partition}))
				if err != nil {
					return false, err
				}
				for _, t := range resp.(*kmsg.ListOffsetsResponse).Topics {
					for _, p := range t.Partitions {
						if p.ErrorCode == 0 && p.Offset >= offset {
							return true, nil
						}
					}
				}
				return false, nil
			})
		}}
}

// awaitServing waits until every partition of topic answers ListOffsets
// without error: a restarted server has loaded its logs.
func awaitServing(topic string) txnStep {
	return txnStep{what: "wait until " + topic + " is served",
		await: func(ctx context.Context, s *txnSession) error {
			return pollTxn(ctx, func() (bool, error) {
				resp, err := rawRequest(ctx, s.server.addr, listLatestRequest(isolationUncommitted, topic, []int32{0, 1}))
				if err != nil {
					return false, nil // not listening yet
				}
				return !anyCode(resp, txnLoading), nil
			})
		}}
}

// restartBoth kills both servers with SIGKILL and starts them again.
func restartBoth() txnStep { return txnStep{what: "kill -9 and restart", restart: true} }

// pollTxn polls done until it holds, fails or txnAwaitWait passes.
func pollTxn(ctx context.Context, done func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, txnAwaitWait)
	defer cancel()
	ticker := time.NewTicker(txnPollInterval)
	defer ticker.Stop()
	for range txnPollsMax {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("condition not met in %v", txnAwaitWait)
		case <-ticker.C:
		}
	}
	return fmt.Errorf("condition not met in %d polls", txnPollsMax)
}
