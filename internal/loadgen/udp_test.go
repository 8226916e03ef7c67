package loadgen

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
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
			from := testutil.LogSize(t, r.KDCLog)
			res := relayedLoad(t, r, delay, timeout, tc.load)
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
			if n := testutil.LogCount(t, r.KDCLog, from, realmtest.ASIssue); n < logins || n > logins+2 {
				t.Errorf("%d logins counted, the KDC issued %d", logins, n)
			}
		})
	}
}

// TestShortLoadWaitsForFirstAnswer: a load shorter than the KDC's answer
// (100 ms against two round trips of 300 ms through a relay) runs on
// until its first request ends, not past it, and not past one timeout:
// a starved KDC gives a slow rate, not "no request completed".
func TestShortLoadWaitsForFirstAnswer(t *testing.T) {
	r := upRealm(t)
	const delay, dur, timeout = 300 * time.Millisecond, 100 * time.Millisecond, 3 * time.Second
	for _, tc := range []struct {
		name string
		load func(context.Context, Config) (*Result, error)
	}{
		{"batched", func(ctx context.Context, cfg Config) (*Result, error) { return Batched(ctx, cfg, KindAS, 2, dur, 0) }},
		{"closed loop", func(ctx context.Context, cfg Config) (*Result, error) {
			return ClosedLoop(ctx, cfg, KindAS, krb5.UDP, 1, dur, 0) // one socket: the relay answers its last sender
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := relayedLoad(t, r, delay, timeout, tc.load)
			logins, failed := count(res.Records, KindAS)
			if logins == 0 || failed > 0 {
				t.Fatalf("%d logins, %d failed (%v) in %v; want the first login's answer", logins, failed, res.ErrorTexts, res.Wall)
			}
			// The first login ends after its two round trips; the load
			// stops there, long before dur + timeout.
			if res.Wall < 2*delay || res.Wall >= dur+timeout/2 {
				t.Errorf("the load took %v; want from %v (the first answer) to well under %v", res.Wall, 2*delay, dur+timeout)
			}
		})
	}
}

// relayedLoad runs load (encrypted-timestamp logins, the given request
// timeout) through a relay of its own that holds every request delay on
// its way to r's KDC (one shared would hand a load the answers to the
// requests the last one left behind), and waits for the KDC's log.
func relayedLoad(t *testing.T, r *realm.Realm, delay, timeout time.Duration, load func(context.Context, Config) (*Result, error)) *Result {
	t.Helper()
	cfg := realmConfigVia(t, r, krb5.PreauthEncTimestamp, testutil.UDPRelay(t, "127.0.0.1:0", r.KDCAddr, func(b []byte, send func([]byte)) {
		time.AfterFunc(delay, func() { send(b) })
	}))
	cfg.Timeout = timeout
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := load(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	realmtest.DrainKDC(t, r)
	return res
}

// orderLoad is a load of two requests for TestOldestIsSentFirst: slot 1's
// request is encoded before slot 0's, and the cycle sends them in slot
// order; an answer that names no request is given to udpCycle.oldest.
type orderLoad struct {
	cy     *udpCycle
	filled bool
	ended  bool
	got    int // the slot oldest chose
}

func (o *orderLoad) over(time.Time) bool { return o.ended }
func (o *orderLoad) more() bool          { return !o.ended }
func (o *orderLoad) wake() time.Time     { return time.Time{} }
func (o *orderLoad) sent(int)            {}
func (o *orderLoad) phase(int) string    { return krb5.PhaseASRep }
func (o *orderLoad) fill(c *udpCycle, _ time.Time) {
	if !o.filled {
		o.filled = true
		c.ask(1, []byte("request 1"), 1)
		c.ask(0, []byte("request 0"), 2)
	}
}
func (o *orderLoad) finish(i int, _ time.Time, _ error) { o.cy.end(i) }
func (o *orderLoad) reply([]byte, time.Time) {
	o.got, o.ended = o.cy.oldest(), true
}

// TestOldestIsSentFirst: an answer that names no request goes to the
// request that went out first (the KDC takes datagrams in the order they
// arrive), not to the one encoded first: slot 1's request is encoded
// first, slot 0's goes out first in the cycle's one sendmmsg, and the
// peer (a UDP socket on 127.0.0.1) reads it first.
func TestOldestIsSentFirst(t *testing.T) {
	peer, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	first := make(chan string, 1)
	go func() {
		buf := make([]byte, 64)
		n, from, err := peer.ReadFromUDP(buf)
		if err != nil {
			first <- err.Error()
			return
		}
		first <- string(buf[:n])
		peer.ReadFromUDP(buf) // the second request
		peer.WriteToUDP([]byte("an answer that names no request"), from)
	}()
	u, err := dialRawUDP(peer.LocalAddr().String(), 2)
	if err != nil {
		t.Fatal(err)
	}
	defer u.close()
	var out recordLog
	o := &orderLoad{got: -1}
	o.cy = newUDPCycle(u, 2, 10*time.Second, false, &out)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := o.cy.run(ctx, o, time.Now()); err != nil {
		t.Fatal(err)
	}
	if !o.ended {
		t.Fatal("no answer came")
	}
	if f := <-first; f != "request 0" || o.got != 0 {
		t.Fatalf("the peer read %q first; the answer went to slot %d, want 0 (sent first; slot 1's request was encoded first)", f, o.got)
	}
}

// TestDuplicateSPAKEReplyIgnored: through a relay that sends every
// request to the KDC twice (a network that duplicates datagrams; the
// same happens to a resent request once both copies are answered), each
// SPAKE AS-REP comes twice, the second after its login has ended. No
// login in flight opens it, so it was tried with the long-term key,
// failed "integrity check failed" and ended the oldest request in flight
// as failed. It opens with the K'[0] of the login it answered, just
// ended: a duplicate, which names no request. Every login succeeds, and
// each the KDC's log issued.
func TestDuplicateSPAKEReplyIgnored(t *testing.T) {
	r := upRealm(t)
	for _, tc := range []struct {
		name string
		load func(context.Context, Config) (*Result, error)
	}{
		{"batched", func(ctx context.Context, cfg Config) (*Result, error) {
			return Batched(ctx, cfg, KindAS, 8, 10*time.Second, 200)
		}},
		{"sessions", func(ctx context.Context, cfg Config) (*Result, error) {
			return Sessions(ctx, cfg, SessionPlan{N: 100, TGSPer: 1}, 8)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			from := testutil.LogSize(t, r.KDCLog)
			cfg := realmConfigVia(t, r, krb5.PreauthSPAKE, testutil.UDPRelay(t, "127.0.0.1:0", r.KDCAddr, func(b []byte, send func([]byte)) {
				send(b)
				send(b)
			}))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := tc.load(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			realmtest.DrainKDC(t, r)
			logins, failed := count(res.Records, KindAS)
			if logins < 100 || failed > 0 {
				t.Fatalf("%d logins, %d failed (%v); want 100 or more, none failed", logins, failed, res.ErrorTexts)
			}
			if res.Methods[krb5.MethodSPAKE] != logins {
				t.Errorf("logins by method %v; want all %d SPAKE", res.Methods, logins)
			}
			if _, tf := count(res.Records, KindTGS); tf > 0 {
				t.Errorf("%d tickets failed: %v", tf, res.ErrorTexts)
			}
			// Each request reached the KDC twice: it issued at least one
			// ticket per login counted (the duplicate answered from its
			// lookaside cache, or issued again).
			if n := testutil.LogCount(t, r.KDCLog, from, realmtest.ASIssue); n < logins {
				t.Errorf("%d logins counted, the KDC issued %d", logins, n)
			}
		})
	}
}
