package testutil

import "testing"

// Alone skips a test whose numbers need the machine to itself when it
// runs under the race detector: make test's race run has four packages'
// tests in flight, and real loads compared against each other there
// measure the neighbours (a shards-against-one-run pair moved by 91 %).
// scripts/test-alone.sh runs such tests afterwards, one package at a
// time, without it, and fails when one of them did not run.
func Alone(t *testing.T) {
	t.Helper()
	if Race {
		t.Skip("compares real loads: scripts/test-alone.sh runs it without the race detector, with the machine to itself")
	}
}
