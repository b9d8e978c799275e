// Package netio will hold the Kafka network edge: framing, request
// dispatch, client connections and zero-copy (sendfile) Fetch responses.
// It declares the small interfaces it needs (a partition to read, a log to
// append to) and knows nothing of logstore or engine. Nothing of it is
// built yet; the package exists so the dependency rules (deps_test.go)
// cover it from the start.
package netio
