package loadgen

import (
	"context"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
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
	r := upRealm(t)
	for _, tc := range []struct {
		preauth krb5.PreauthMode
		trips   int // round trips of a login
	}{{krb5.PreauthEncTimestamp, 2}, {krb5.PreauthSPAKE, 3}} {
		for _, plan := range []SessionPlan{{N: 300, TGSPer: 2}, {N: 60, Rate: 200, TGSPer: 2}} {
			cfg := realmConfig(t, r, tc.preauth)
			from := testutil.LogSize(t, r.KDCLog)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			sr, err := Sessions(ctx, cfg, plan, 8)
			cancel()
			if err != nil {
				t.Fatalf("%s %+v: %v", tc.preauth, plan, err)
			}
			realmtest.DrainKDC(t, r)
			logins, lf := count(sr.Records, KindAS)
			tickets, tf := count(sr.Records, KindTGS)
			if sr.Failed > 0 || logins != plan.N || tickets != plan.N*plan.TGSPer || lf+tf > 0 {
				t.Fatalf("%s %+v: %d sessions failed; %d logins, %d tickets; errors %v", tc.preauth, plan, sr.Failed, logins, tickets, sr.ErrorTexts)
			}
			if as, tgs := testutil.LogCount(t, r.KDCLog, from, realmtest.ASIssue), testutil.LogCount(t, r.KDCLog, from, realmtest.TGSIssue); as != plan.N || tgs != plan.N*plan.TGSPer {
				t.Errorf("%s %+v: the KDC issued %d TGTs and %d tickets", tc.preauth, plan, as, tgs)
			}
			trips := plan.N * (tc.trips + plan.TGSPer)
			t.Logf("%s %+v: %d round trips, %d waits (%.2f per round trip)", tc.preauth, plan, trips, sr.Waits, float64(sr.Waits)/float64(trips))
			if plan.Rate > 0 {
				if len(sr.Late) != plan.N {
					t.Errorf("%s open loop: lateness of %d sessions, want %d", tc.preauth, len(sr.Late), plan.N)
				}
				continue
			}
			if sr.Waits == 0 || sr.Waits*4 > trips*3 {
				t.Errorf("%s closed loop: %d waits for %d round trips, want some and at most 3/4 per round trip", tc.preauth, sr.Waits, trips)
			}
		}
	}
}
