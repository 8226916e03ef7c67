package attack

import (
	"fmt"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// decoySignals are the signals a decoy run drives: a request of offender
// o about its distinct item i (spraying: address o fails for principal
// i; brute force: principal o fails, its i-th failure; enumeration:
// address o asks for unknown principal i).
var decoySignals = []struct {
	sig  Signal
	item func(f *feeder, o string, i int)
}{
	{PasswordSpraying, func(f *feeder, o string, i int) { f.as(OutcomeWrongKey, user(i), o) }},
	{BruteForce, func(f *feeder, o string, i int) { f.as(OutcomeWrongKey, o, "192.0.2.1") }},
	{UserEnumeration, func(f *feeder, o string, i int) { f.as(OutcomeUnknownClient, fmt.Sprintf("nobody%d@PERF.TEST", i), o) }},
}

// decoyRun is one window holding decoys offenders with n-1 distinct items
// each (or n-1 failures: brute force) and one attacker with distinct
// items, its requests spread evenly among the decoys' so that thousands
// of them come between two of its own. It returns the signal's
// detections and the attacker's exported score (0: not exported).
func decoyRun(sg Signal, item func(*feeder, string, int), decoys, n, distinct int) (detections uint64, score float64, d *Detector) {
	f := newFeeder(config.AttackSignals{SprayingPrincipals: n, BruteForceFailures: n, EnumerationPrincipals: n})
	offender := func(j int) string {
		if sg == BruteForce {
			return fmt.Sprintf("decoy%d@PERF.TEST", j)
		}
		return fmt.Sprintf("10.%d.%d.%d", j>>16&255, j>>8&255, j&255)
	}
	attacker := "198.51.100.7"
	if sg == BruteForce {
		attacker = "victim@PERF.TEST"
	}
	total := decoys * (n - 1)
	next := 0 // the attacker's next item
	for k := range total {
		item(f, offender(k%decoys), k/decoys)
		if next < distinct && k >= (next+1)*total/(distinct+1) { // after the first decoys, spread
			item(f, attacker, next)
			next++
		}
		if k%4096 == 0 {
			f.wait(time.Millisecond)
		}
	}
	f.wait(config.DefaultAttackRecoveryWait)
	s := f.snap()
	for _, o := range s.Offenders[sg] {
		if o.Name == attacker {
			score = o.Score
		}
	}
	return s.Detections[sg], score, f.d
}

// TestDecoysCannotFlush: an attacker with N distinct principals (or N
// failures) among 2,000, 10,000 and 100,000 decoys at N − 1 each, in one
// window: it fires, once, and is exported with its score N; with N − 1
// nothing fires. The truth is the counts the test sent. Before the
// offender table, the Space-Saving summary of 10 pushed the attacker out
// between two of its requests and its score read 1.
func TestDecoysCannotFlush(t *testing.T) {
	sizes := []int{2000, 10000, 100000}
	if testing.Short() || testutil.Race {
		sizes = sizes[:2]
	}
	const n = config.DefaultSprayingPrincipals
	for _, sg := range decoySignals {
		for _, decoys := range sizes {
			t.Run(fmt.Sprintf("%s/%d", SignalNames[sg.sig], decoys), func(t *testing.T) {
				for _, distinct := range []int{n - 1, n} {
					got, score, d := decoyRun(sg.sig, sg.item, decoys, n, distinct)
					if b := d.Bytes(); b > d.MaxBytes() {
						t.Errorf("tables of %d bytes, beyond their bound %d", b, d.MaxBytes())
					} else if distinct == n {
						t.Logf("%d decoys: tables %d bytes (bound %d)", decoys, b, d.MaxBytes())
					}
					want := uint64(0)
					if distinct >= n {
						want = 1
						if score != float64(n) {
							t.Errorf("attacker with %d: exported score %v, want %d", distinct, score, n)
						}
					}
					if got != want {
						t.Errorf("attacker with %d among %d decoys at %d: %d detections, want %d", distinct, decoys, n-1, got, want)
					}
				}
			})
		}
	}
}

// TestBeyondTheTable: offenders beyond tracked_offenders go to the
// overflow sketch, which counts at least their events: one with N
// failures fires, one with N - 1 alone does not, and their events are
// counted as untracked.
func TestBeyondTheTable(t *testing.T) {
	const n = 10
	for _, distinct := range []int{n - 1, n} {
		f := newFeeder(config.AttackSignals{TrackedOffenders: config.MinTrackedOffenders, SprayingPrincipals: n})
		for j := range config.MinTrackedOffenders {
			f.as(OutcomeWrongKey, user(0), fmt.Sprintf("10.0.%d.%d", j>>8, j&255))
		}
		for i := range distinct {
			f.as(OutcomeWrongKey, user(i), "198.51.100.7")
		}
		f.wait(config.DefaultAttackRecoveryWait)
		s := f.snap()
		want := uint64(0)
		if distinct == n {
			want = 1
		}
		if s.Detections[PasswordSpraying] != want || s.Untracked[PasswordSpraying] != uint64(distinct) || s.Tracked[PasswordSpraying] != config.MinTrackedOffenders {
			t.Errorf("%d principals beyond a full table: detections %d (want %d), untracked %d, tracked %d", distinct, s.Detections[PasswordSpraying], want, s.Untracked[PasswordSpraying], s.Tracked[PasswordSpraying])
		}
	}
}
