// Package mirrorstate is the per-partition mirror state machine of
// DESIGN.md ("The partition state machine"), as a pure type in the manner
// of etcd-io/raft: it does no I/O, starts no goroutines, reads no clock and
// no global random source (deps_test.go at the module root keeps it free
// of os, net and syscall). Its owner (one goroutine per mirror) feeds a
// Machine events (events.go) and performs the actions Step returns, in
// order: a Persist first, durable before the rest. Time comes in as data
// (Tick, and the Now of failure events); retry jitter comes from the
// RetryJitter the owner passes in.
//
// The transitions, DESIGN.md's table ("to <- allowed from"; a state is
// never entered from itself):
//
//	LOG_ALIGNMENT                        <- UNKNOWN, STOPPED, FAILED
//	EPOCH_FENCING, ULE_RECOVERY, PAUSING <- MIRRORING
//	MIRRORING                            <- LOG_ALIGNMENT, EPOCH_FENCING, PAUSED, ULE_RECOVERY, FAILED
//	PAUSED                               <- PAUSING
//	STOPPING                             <- any but STOPPED and UNKNOWN
//	STOPPED                              <- STOPPING
//	FAILED                               <- any
//
// and what moves a partition along them:
//
//	UNKNOWN, STOPPED --desired MIRRORING/PAUSED--> LOG_ALIGNMENT --AlignmentDone--> MIRRORING
//	MIRRORING --source epoch within 3 of ours--> EPOCH_FENCING --LeaderEpochBumped--> MIRRORING
//	MIRRORING --DivergenceDetected-------------> ULE_RECOVERY  --TruncationDone-----> MIRRORING
//	MIRRORING --desired PAUSED-----------------> PAUSING       --PauseDone----------> PAUSED
//	PAUSED    --desired MIRRORING--------------> MIRRORING
//	any but UNKNOWN, STOPPED --desired STOPPED--> STOPPING --StopStepDone x4--> STOPPED
//	    REMOVE_FROM_FETCHER -> BUMP_LEADER_EPOCH -> ABORT_TRANSACTIONS -> RESET_PRODUCERS
//	any --failure--> FAILED --retry due, Recover--> STOPPING if the stop was under way or is
//	    desired, LOG_ALIGNMENT if alignment failed, MIRRORING otherwise
//
// Reconcile (on DesiredStateChanged and Restarted), DESIGN.md's rule:
// FAILED stays FAILED until recovered or retried; desired STOPPED ->
// STOPPING; desired PAUSED -> PAUSING; PAUSED with desired MIRRORING ->
// MIRRORING; UNKNOWN or STOPPED -> LOG_ALIGNMENT; otherwise the current
// state's action runs again. After a completion the partition walks on
// towards the desired state as far as the table allows (AlignmentDone
// while PAUSED is desired goes through MIRRORING to PAUSING in one step,
// persisting once). Events that do not apply to the current state are
// stale and ignored (Machine.accepts).
//
// Invariants, checked after every Step (a broken one panics: it is a bug):
//   - every transition is in the table above, and bumps the StateEpoch;
//   - at rest, no transition towards the desired state is due;
//   - every change of persisted fields comes with a Persist of a Record
//     that Record.Validate accepts, so a machine restored from the last
//     Persist (Restore) and told Restarted behaves as the one that
//     crashed would have: the stop sequence, in particular, resumes at the
//     step it was in;
//   - MIRRORING fetches only with a local leader epoch at least 3 above
//     the source's (else EPOCH_FENCING bumps it to source + 10).
//
// Production drives every mirrored partition with a Machine: the
// engine's mirror owner (engine/mirror_owner.go) steps them with the
// events of its fetchers, metadata refreshes, admin requests and retry
// ticks, writes each round's Persists to __mirror_state in one group
// commit, and only then performs the actions. The engine keeps the Record
// codec (__mirror_state, engine's mirror_state_record.go) and the state
// log.
//
// The transition tests are stories in testdata/*.txt (datadriven_test.go
// describes their commands); walk_test.go is a seeded random walk with
// crashes and restores.
package mirrorstate
