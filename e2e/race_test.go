//go:build race

package e2e

// raceEnabled: this test binary runs under the race detector, so the
// mirrord it builds does too, and a race report in its log fails the test.
const raceEnabled = true
