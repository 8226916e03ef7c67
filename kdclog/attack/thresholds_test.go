package attack

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/config"
)

// edgeSeed is the seed of the random orders: ATTACK_EDGE_SEED repeats a
// run, else the clock's (printed).
func edgeSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("ATTACK_EDGE_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seed %d (ATTACK_EDGE_SEED=%d repeats it)", seed, seed)
	return seed
}

// group is requests that stay together when the order is shuffled (a
// typo and its ISSUE, a login's steps).
type group []func(f *feeder)

// TestThresholdEdgesEveryOrder: for every signal, at threshold N, an
// offender with N-1 distinct principals (services, failures) never fires
// and one with N always does, in random orders of its requests, each
// distinct item repeated 1 to 3 times, among other clients' healthy
// logins and recovered typos. Before the exact counts, the 512-bit sketch
// fired at spraying_principals 10 in about 92 % of orders (seen: a
// failure within the first few seeds).
func TestThresholdEdgesEveryOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(edgeSeed(t), 0))
	const addr, victim = "198.51.100.7", "victim@PERF.TEST"
	high := config.MaxAttackThreshold
	type signal struct {
		sig   Signal
		cfg   func(n int) config.AttackSignals
		item  func(f *feeder, i int) // one request of distinct item i
		once  bool                   // an item is one event (brute force: each failure counts)
		noise func(f *feeder, i int)
	}
	typo := func(f *feeder, i int) { // another principal's typo from the same address, recovered
		u := fmt.Sprintf("typo%d@PERF.TEST", i)
		f.as(OutcomeWrongKey, u, addr)
		f.as(OutcomeIssue, u, addr)
	}
	login := func(f *feeder, i int) {
		u := fmt.Sprintf("good%d@PERF.TEST", i)
		f.as(OutcomeNeededPreauth, u, addr)
		f.as(OutcomeIssue, u, addr)
	}
	signals := []signal{
		{PasswordSpraying, func(n int) config.AttackSignals {
			return config.AttackSignals{SprayingPrincipals: n, BruteForceFailures: high}
		}, func(f *feeder, i int) { f.as(OutcomeWrongKey, user(i), addr) }, false, typo},
		{BruteForce, func(n int) config.AttackSignals {
			return config.AttackSignals{BruteForceFailures: n, SprayingPrincipals: high}
		}, func(f *feeder, i int) { f.as(OutcomeWrongKey, victim, fmt.Sprintf("10.0.0.%d", i%3)) }, true, typo},
		{UserEnumeration, func(n int) config.AttackSignals {
			return config.AttackSignals{EnumerationPrincipals: n}
		}, func(f *feeder, i int) { f.as(OutcomeUnknownClient, user(i), addr) }, false, login},
		{Kerberoasting, func(n int) config.AttackSignals {
			return config.AttackSignals{KerberoastingRC4Services: n, KerberoastingServices: high}
		}, func(f *feeder, i int) { f.tgs(victim, fmt.Sprintf("HTTP/web%d@PERF.TEST", i), true) }, false, login},
		{Kerberoasting, func(n int) config.AttackSignals {
			return config.AttackSignals{KerberoastingServices: n, FollowServiceTickets: true}
		}, func(f *feeder, i int) { f.tgs(victim, fmt.Sprintf("HTTP/web%d@PERF.TEST", i), false) }, false, login},
		{ASREPRoasting, func(n int) config.AttackSignals {
			return config.AttackSignals{ASREPRoastingPrincipals: n, FollowLogins: true}
		}, func(f *feeder, i int) { f.as(OutcomeIssue, user(i), addr) }, false, login},
	}
	const rounds = 60
	for round := range rounds {
		n := 10 // the default thresholds first
		if round > 0 {
			n = 1 + rng.IntN(40)
		}
		for si, sg := range signals {
			for _, distinct := range []int{n - 1, n} {
				var groups []group
				for i := range distinct {
					reps := 1
					if !sg.once {
						reps += rng.IntN(3)
					}
					for range reps {
						groups = append(groups, group{func(f *feeder) { sg.item(f, i) }})
					}
				}
				for i := range 5 + rng.IntN(20) {
					groups = append(groups, group{func(f *feeder) { sg.noise(f, i) }})
				}
				rng.Shuffle(len(groups), func(i, j int) { groups[i], groups[j] = groups[j], groups[i] })
				f := newFeeder(sg.cfg(n))
				for _, g := range groups {
					for _, r := range g {
						r(f)
					}
				}
				f.wait(config.DefaultAttackRecoveryWait)
				got := f.snap().Detections[sg.sig]
				if want := distinct >= n; (got == 1) != want || got > 1 {
					t.Fatalf("round %d, %s (case %d) at threshold %d: %d distinct, %d detections, want fired %v", round, SignalNames[sg.sig], si, n, distinct, got, want)
				}
			}
		}
	}
}

// TestOneUserIsBruteForce: one user failing 10 times from one address is
// brute force (10 failures), never password spraying (1 principal).
func TestOneUserIsBruteForce(t *testing.T) {
	f := newFeeder(config.AttackSignals{})
	for range config.DefaultBruteForceFailures {
		f.as(OutcomeWrongKey, "alice@PERF.TEST", "10.0.0.1")
	}
	f.wait(config.DefaultAttackRecoveryWait)
	s := f.snap()
	if s.Detections[BruteForce] != 1 || s.Detections[PasswordSpraying] != 0 {
		t.Errorf("detections %v, want brute force alone", s.Detections)
	}
	if o := s.Offenders[PasswordSpraying]; len(o) != 1 || o[0].Score != 1 {
		t.Errorf("spraying offenders %+v, want 10.0.0.1 with 1 principal", o)
	}
}

// TestIndexLikeMap: the pending table's index against a Go map, through
// random puts and deletions of keys crowded onto few home slots (the
// backward shift is what deletion gets wrong), at most pendingCap keys.
func TestIndexLikeMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(edgeSeed(t), 1))
	var x index
	want := map[uint64]uint64{}
	for op := range 60000 {
		k := uint64(1+rng.IntN(8))<<32 | uint64(rng.IntN(300)) + 1 // 8 home slots
		switch {
		case rng.IntN(2) == 0 && len(want) < pendingCap:
			x.put(k, uint64(op)+1)
			want[k] = uint64(op) + 1
		default:
			x.del(k)
			delete(want, k)
		}
		if op%97 == 0 {
			for k, v := range want {
				if got := x.get(k); got != v {
					t.Fatalf("op %d: get(%x) = %d, want %d", op, k, got, v)
				}
			}
			n := 0
			for _, k := range x.keys {
				if k != 0 {
					n++
				}
			}
			if n != len(want) {
				t.Fatalf("op %d: %d keys held, want %d", op, n, len(want))
			}
		}
	}
}
