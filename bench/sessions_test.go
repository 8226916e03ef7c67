package bench

import (
	"context"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// Sessions (a login, then its tickets) on the batched generator, against
// a real KDC, with encrypted timestamp and with SPAKE: every session's
// login and tickets succeed (each ticket opens only with its own
// session's TGT) and the KDC's log issued exactly those. In the closed
// loop (degradation) replies gather between receives: the generator
// blocks (sleep or poll) well under once per round trip, where a
// generator waiting for each reply blocks once per round trip at least.
// In the open loop every session is started and its lateness recorded.
func TestSessionsBatched(t *testing.T) {
	r := upRealm(t, realm.Options{NoKadmind: true, DisableLastSuccess: true})
	sys := RealmSystem(r)
	if err := sys.validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		preauth krb5.PreauthMode
		trips   int // round trips of a login
	}{{krb5.PreauthEncTimestamp, 2}, {krb5.PreauthSPAKE, 3}} {
		for _, plan := range []sessionPlan{{n: 300, tgsPer: 2}, {n: 60, rate: 200, tgsPer: 2}} {
			ru := &run{sys: sys, set: Defaults(), prog: &progress{}, fleet: &fleet{sys: sys, preauth: tc.preauth}, sampler: newSampler(r.KDCPids), rep: &Report{}}
			from := logSize(t, r.KDCLog)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			sr, err := ru.runSessions(ctx, plan, 8)
			cancel()
			if err != nil {
				t.Fatalf("%s %+v: %v", tc.preauth, plan, err)
			}
			drainKDC(t, r)
			logins := summarizeLoad(sr.recs, kindAS, 8, sr.wall, krb5.UDP)
			tickets := summarizeLoad(sr.recs, kindTGS, 8, sr.wall, krb5.UDP)
			if sr.failed > 0 || logins.Requests != plan.n || tickets.Requests != plan.n*plan.tgsPer || logins.Errors+tickets.Errors > 0 {
				t.Fatalf("%s %+v: %d sessions failed; %d logins, %d tickets; errors %v %v", tc.preauth, plan, sr.failed, logins.Requests, tickets.Requests, ru.errTexts, tickets.ErrorClasses)
			}
			if as, tgs := logCount(t, r.KDCLog, from, asIssue), logCount(t, r.KDCLog, from, tgsIssue); as != plan.n || tgs != plan.n*plan.tgsPer {
				t.Errorf("%s %+v: the KDC issued %d TGTs and %d tickets", tc.preauth, plan, as, tgs)
			}
			trips := plan.n * (tc.trips + plan.tgsPer)
			t.Logf("%s %+v: %d round trips, %d waits (%.2f per round trip), %.1f µs generator CPU per request", tc.preauth, plan, trips, sr.waits, float64(sr.waits)/float64(trips), sr.cpu.GeneratorPerRequestUS)
			if plan.rate > 0 {
				if len(sr.late) != plan.n {
					t.Errorf("%s open loop: lateness of %d sessions, want %d", tc.preauth, len(sr.late), plan.n)
				}
				continue
			}
			if sr.waits == 0 || sr.waits*4 > trips*3 {
				t.Errorf("%s closed loop: %d waits for %d round trips, want some and at most 3/4 per round trip", tc.preauth, sr.waits, trips)
			}
		}
	}
}
