// Package netio is the Kafka network edge of a mirrord node: framing,
// request dispatch, client connections, fetch sessions and zero-copy
// Fetch responses. It declares the small interfaces it needs (Backend,
// Partition, Transactions, MirrorAdmin) and knows nothing of logstore or
// the engine behind them (deps_test.go holds this).
//
// Wire: every request and response is a big-endian int32 size and that
// many bytes (frame.go has the header layout). A request larger than
// Config.MaxRequestBytes (socket.request.max.bytes) or one that cannot be
// framed closes its connection (ErrFrame). One file per API, named by key
// (00_produce.go, 01_fetch.go, ...), opens with the versions it serves
// and what it does; dispatch.go is the table ApiVersions advertises. The
// mirror admin RPCs of KIP-1279 travel on private keys from 1000
// (mirror_keys.go, 1000_mirror_admin.go).
//
// Connections: one goroutine per connection reads a request, answers it
// and writes the response before reading the next, as a Kafka broker does
// (answers in order, one request in flight); at most
// Config.MaxConnections at once and MaxConnectionsPerIP from one address,
// closed when idle or when a begun frame does not arrive in time
// (connections.go, request_read.go), their request bytes bounded
// node-wide (request_memory.go: queued.max.request.bytes). Fetch answers write record bytes from the
// segment file to the socket with sendfile (sendfile.go), with a read and
// write fallback; fetch sessions (KIP-227, fetch_session.go) skip
// partitions that cannot answer anything new; long polls wait as
// Kafka's DelayedFetch does, on Partition.Watchers (fetch_wait.go).
//
// Errors: a Backend returns kerr errors (or netio.Error, a code with the
// message a client is told); anything else is logged and answered with
// the API's fallback code. Kafka error codes exist only here, at the
// edge.
//
// Consumer groups: FindCoordinator names this node; JoinGroup, SyncGroup,
// Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, OffsetDelete and
// List/Describe/DeleteGroups go to Backend.Groups (the classic protocol;
// KIP-848's ConsumerGroupHeartbeat and TxnOffsetCommit are not served).
//
// Configs: DescribeConfigs, AlterConfigs and IncrementalAlterConfigs go to
// Backend.Configs.
//
// Listeners: TLS and SASL (listener.go, sasl.go).
package netio
