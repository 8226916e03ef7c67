package loadgen

import (
	"context"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// TestTimeoutPerRoundTrip: the UDP cycle times a request out per round
// trip, from that round trip's first send, under both of its load shapes
// (the batched as load; sessions of a login and a ticket). Through a
// relay that holds every request 400 ms, each round trip of an
// encrypted-timestamp login (two round trips) takes 400 ms and more,
// under the 600 ms timeout, while the login takes 800 ms and more, over
// it: every login succeeds, its latency beyond the timeout, and the
// KDC's log issued each. Timed from the login's first send, every login
// would time out.
func TestTimeoutPerRoundTrip(t *testing.T) {
	r := upRealm(t)
	const delay, timeout = 400 * time.Millisecond, 600 * time.Millisecond
	for _, tc := range []struct {
		name   string
		logins int
		load   func(context.Context, Config) (*Result, error)
	}{
		{"batched", 2, func(ctx context.Context, cfg Config) (*Result, error) {
			return Batched(ctx, cfg, KindAS, 2, 5*time.Second, 2)
		}},
		{"sessions", 2, func(ctx context.Context, cfg Config) (*Result, error) {
			return Sessions(ctx, cfg, SessionPlan{N: 2, TGSPer: 1}, 2)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A relay of its own: one shared would hand this load the
			// answers to requests the last one left behind.
			cfg := realmConfig(t, r, krb5.PreauthEncTimestamp)
			cfg.KDC = testutil.UDPRelay(t, "127.0.0.1:0", r.KDCAddr, func(b []byte, send func([]byte)) {
				time.AfterFunc(delay, func() { send(b) })
			})
			cfg.Timeout = timeout
			from := testutil.LogSize(t, r.KDCLog)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := tc.load(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			testutil.DrainKDC(t, r)
			logins, failed := count(res.Records, KindAS)
			if logins < tc.logins || failed > 0 {
				t.Fatalf("%d logins, %d failed (%v); want %d, none failed: each round trip took about %v, under the %v timeout", logins, failed, res.ErrorTexts, tc.logins, delay, timeout)
			}
			for _, rc := range res.Records {
				if rc.Kind == KindAS && rc.Latency < 2*delay {
					t.Errorf("a login took %v, under its two round trips of %v each: the relay did not hold it", rc.Latency, delay)
				}
			}
			if _, tf := count(res.Records, KindTGS); tf > 0 {
				t.Errorf("%d tickets failed: %v", tf, res.ErrorTexts)
			}
			// The batched load stops at its second login; one it had
			// begun meanwhile may still reach the KDC through the relay.
			if n := testutil.LogCount(t, r.KDCLog, from, testutil.ASIssue); n < logins || n > logins+2 {
				t.Errorf("%d logins counted, the KDC issued %d", logins, n)
			}
		})
	}
}
