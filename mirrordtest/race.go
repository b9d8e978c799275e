//go:build race

package mirrordtest

// RaceEnabled: this binary runs under the race detector, so the mirrord
// Build builds does too, and a race report in its log is a failure.
const RaceEnabled = true
