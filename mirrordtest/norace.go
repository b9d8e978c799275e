//go:build !race

package mirrordtest

// RaceEnabled: this binary runs without the race detector, and so does the
// mirrord Build builds.
const RaceEnabled = false
