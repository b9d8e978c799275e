// Package engine will hold the mirror engine: mirrors, the per-partition
// state machine (pure: events in, actions out), fetchers from source
// brokers, failover and failback, and consumer group offset sync. See
// ../shared/DESIGN.md. Nothing of it is built yet; the package exists so
// the dependency rules (deps_test.go) cover it from the start.
package engine
