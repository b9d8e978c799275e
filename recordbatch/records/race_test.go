//go:build race

package records_test

const raceEnabled = true
