package krb5

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"

	"github.com/krb5-exporter/krb5-exporter/realm"
)

// Integration tests of the engine against real MIT krb5kdc processes.

func wantClass(t *testing.T, err error, class string) *Error {
	t.Helper()
	if got := Classify(err); got != class {
		t.Fatalf("result %q (%v), want %q", got, err, class)
	}
	var pe *Error
	if err != nil && !errors.As(err, &pe) {
		t.Fatalf("error %T is not *krb5.Error", err)
	}
	return pe
}

func TestLoginAndServiceTicket(t *testing.T) {
	r := upRealm(t, realm.Options{})
	for _, tr := range []Transport{UDP, TCP} {
		t.Run(tr.String(), func(t *testing.T) {
			c := userClient(t, r, 1, Options{Transport: tr})
			defer c.Close()
			ctx := testCtx(t, 10*time.Second)
			as, err := c.Login(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// A fresh kinit -k against a SPAKE KDC: AS-REQ → PREAUTH_REQUIRED,
			// SPAKE support → challenge, SPAKE response → AS-REP.
			if as.RoundTrips != 3 || as.Method != MethodSPAKE || as.PreauthRequired <= 0 || as.SPAKEChallenge <= 0 || as.ASRep <= 0 ||
				as.Duration < as.PreauthRequired+as.SPAKEChallenge+as.ASRep {
				t.Errorf("AS result %+v", as)
			}
			if as.Etypes != (Etypes{Reply: 20, Ticket: 20, Session: 20}) {
				t.Errorf("AS etypes %+v, want all aes256-cts-hmac-sha384-192", as.Etypes)
			}
			// Same host, same clock. The bound is loose because a KDC in a
			// gVisor sandbox reads a clock that advances in steps of up to
			// a second (stime/susec repeat, +1µs, for hundreds of ms).
			if !as.HasClockOffset || as.ClockOffset.Abs() > 2*time.Second {
				t.Errorf("clock offset %v (measured %v)", as.ClockOffset, as.HasClockOffset)
			}
			if !c.HasTGT() {
				t.Fatal("no TGT after a login")
			}
			svc := c.PrepareService(mustPrincipal(t, r.Service(1)))
			for i := 0; i < 3; i++ {
				tgs, err := c.ServiceTicket(ctx, svc)
				if err != nil {
					t.Fatal(err)
				}
				if tgs.Renewed || tgs.Duration <= 0 || tgs.Etypes != (Etypes{Reply: 20, Ticket: 20, Session: 20}) {
					t.Errorf("TGS result %+v", tgs)
				}
			}
			// Every TGS request reached the KDC: nothing is answered from a cache.
			waitLog(t, r, fmt.Sprintf("TGS_REQ.*ISSUE.*%s for %s", r.User(1), r.Service(1)), 3)
		})
	}
}

// waitLog waits until the KDC log has at least n lines matching re.
func waitLog(t *testing.T, r *realm.Realm, pattern string, n int) {
	t.Helper()
	var got int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		data, err := os.ReadFile(r.KDCLog)
		if err != nil {
			t.Fatal(err)
		}
		got = 0
		for _, l := range strings.Split(string(data), "\n") {
			if matched(pattern, l) {
				got++
			}
		}
		if got >= n {
			return
		}
	}
	t.Fatalf("KDC log has %d lines matching %q, want %d", got, pattern, n)
}

func matched(pattern, line string) bool {
	parts := strings.Split(pattern, ".*")
	for _, p := range parts {
		i := strings.Index(line, p)
		if i < 0 {
			return false
		}
		line = line[i+len(p):]
	}
	return true
}

// onlyEtype20 gives user i keys of aes256-cts-hmac-sha384-192 alone and
// returns a keytab holding just those.
func onlyEtype20(t *testing.T, r *realm.Realm, i int) string {
	kt := filepath.Join(t.TempDir(), "etype20.keytab")
	kadmin(t, r,
		"cpw -randkey -e aes256-cts-hmac-sha384-192:normal "+r.User(i),
		"ktadd -k "+kt+" -norandkey "+r.User(i))
	return kt
}

func TestEtype20Only(t *testing.T) {
	r := upRealm(t, realm.Options{})
	kt := onlyEtype20(t, r, 2)
	p := mustPrincipal(t, r.User(2))
	creds, err := NewKeytabCredentials(kt, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, upfront := range []bool{false, true} {
		for _, etypes := range [][]int32{nil, {20}, {17, 18, 20}} {
			t.Run(fmt.Sprintf("upfront=%v/etypes=%v", upfront, etypes), func(t *testing.T) {
				c := userClient(t, r, 2, Options{Credentials: creds, PreauthUpfront: upfront, Etypes: etypes})
				defer c.Close()
				ctx := testCtx(t, 10*time.Second)
				as, err := c.Login(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if want := 3; upfront { // SPAKE: three round trips; up front: encrypted timestamp
					if as.RoundTrips != 1 || as.PreauthRequired != 0 {
						t.Errorf("pre-authentication up front: %+v", as)
					}
				} else if as.RoundTrips != want {
					t.Errorf("round trips %d, want %d", as.RoundTrips, want)
				}
				if as.Etypes.Reply != 20 {
					t.Errorf("reply etype %d, want 20", as.Etypes.Reply)
				}
				if _, err := c.ServiceTicket(ctx, c.PrepareService(mustPrincipal(t, r.Service(1)))); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
	// Offering only enctypes the principal lacks: MIT still answers
	// PREAUTH_REQUIRED (offering etype 20); the client stops there with a
	// clear error instead of sending a timestamp bound to fail.
	c := userClient(t, r, 2, Options{Credentials: NewPasswordCredentials("irrelevant", p), Etypes: []int32{17}})
	_, err = c.Login(testCtx(t, 10*time.Second))
	if pe := wantClass(t, err, ClassKeytab); pe.Phase != PhasePreauthRequired {
		t.Errorf("phase %q", pe.Phase)
	}
}

func TestStaleKeytab(t *testing.T) {
	r := upRealm(t, realm.Options{})
	user := r.User(3)
	kt := filepath.Join(t.TempDir(), "user.keytab")
	kadmin(t, r, "ktadd -k "+kt+" -norandkey "+user)
	creds, err := NewKeytabCredentials(kt, mustPrincipal(t, user))
	if err != nil {
		t.Fatal(err)
	}
	c := userClient(t, r, 3, Options{Credentials: creds})
	defer c.Close()
	if as, err := c.Login(testCtx(t, 10*time.Second)); err != nil || as.Method != MethodSPAKE {
		t.Fatalf("login: %s, %v", as.Method, err)
	}

	// The KDC gets new keys, the keytab keeps the old ones.
	kadmin(t, r, "cpw -randkey "+user)
	_, err = c.Login(testCtx(t, 10*time.Second))
	pe := wantClass(t, err, "KDC_ERR_PREAUTH_FAILED")
	if pe.Phase != PhaseASRep || pe.Code != 24 {
		t.Errorf("error %+v", pe)
	}

	// Without required pre-authentication the KDC answers, and the reply
	// does not decrypt with the stale key.
	kadmin(t, r, "modprinc -requires_preauth "+user)
	as, err := c.Login(testCtx(t, 10*time.Second))
	pe = wantClass(t, err, ClassDecrypt)
	if pe.Phase != PhaseASRep || as.RoundTrips != 1 {
		t.Errorf("error %+v after %d round trips", pe, as.RoundTrips)
	}

	// ktadd rewrites the keytab: the next login picks up the new keys
	// without a new Client (the file is re-read when it changes), and SPAKE
	// is not answered with the w, w·M, w·N the Client prepared for the old
	// kvno (the KDC would fail the response).
	kadmin(t, r, "modprinc +requires_preauth "+user, "ktadd -k "+kt+" -norandkey "+user)
	creds.mu.Lock()
	creds.checked = time.Time{} // skip the 1s re-check interval
	creds.mu.Unlock()
	if as, err := c.Login(testCtx(t, 10*time.Second)); err != nil || as.Method != MethodSPAKE {
		t.Fatalf("after ktadd: %s, %v", as.Method, err)
	}
}

func TestUnknownClientAndService(t *testing.T) {
	r := upRealm(t, realm.Options{})
	p := mustPrincipal(t, "nosuchuser@"+r.Realm)
	c, err := NewClient(Options{KDC: r.KDCAddr, Client: p, Credentials: NewPasswordCredentials("x", p)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Login(testCtx(t, 10*time.Second))
	if pe := wantClass(t, err, "KDC_ERR_C_PRINCIPAL_UNKNOWN"); pe.Phase != PhasePreauthRequired {
		t.Errorf("phase %q", pe.Phase)
	}

	u := userClient(t, r, 1, Options{})
	defer u.Close()
	_, err = u.ServiceTicket(testCtx(t, 10*time.Second), u.PrepareService(mustPrincipal(t, "HTTP/nosuch."+r.Domain)))
	if pe := wantClass(t, err, "KDC_ERR_S_PRINCIPAL_UNKNOWN"); pe.Phase != PhaseTGSRep {
		t.Errorf("phase %q", pe.Phase)
	}
}

func TestPasswordCredentials(t *testing.T) {
	r := upRealm(t, realm.Options{})
	user := "pwuser@" + r.Realm
	kadmin(t, r, "addprinc -clearpolicy -pw "+testPassword+" "+user)
	pwfile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwfile, []byte(testPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p := mustPrincipal(t, user)
	creds, err := NewPasswordFileCredentials(pwfile, p)
	if err != nil {
		t.Fatal(err)
	}
	for _, upfront := range []bool{false, true} {
		c, err := NewClient(Options{KDC: r.KDCAddr, Client: p, Credentials: creds, PreauthUpfront: upfront})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if _, err := c.Login(testCtx(t, 10*time.Second)); err != nil {
				t.Fatalf("upfront=%v: %v", upfront, err)
			}
		}
		c.Close()
	}
	// One string-to-key per enctype and salt, however many logins.
	if n := len(creds.s2k); n != 1 {
		t.Errorf("%d string-to-key results cached, want 1", n)
	}
	bad, _ := NewClient(Options{KDC: r.KDCAddr, Client: p, Credentials: NewPasswordCredentials("wrong", p)})
	_, err = bad.Login(testCtx(t, 10*time.Second))
	wantClass(t, err, "KDC_ERR_PREAUTH_FAILED")
}

func TestClockSkew(t *testing.T) {
	r := upRealm(t, realm.Options{})
	const shift = 10 * time.Minute
	// Only the encrypted timestamp carries the client's clock (a SPAKE login
	// succeeds with any skew: TestSPAKEIgnoresSkew).
	c := userClient(t, r, 1, Options{Preauth: PreauthEncTimestamp, Now: func() time.Time { return time.Now().Add(-shift) }})
	as, err := c.Login(testCtx(t, 10*time.Second))
	wantClass(t, err, "KRB_AP_ERR_SKEW")
	if !as.HasClockOffset || (as.ClockOffset-shift).Abs() > 5*time.Second {
		t.Errorf("clock offset %v, want about +%v", as.ClockOffset, shift)
	}
}

func TestTGTRenewedNearExpiry(t *testing.T) {
	r := upRealm(t, realm.Options{})
	c := userClient(t, r, 1, Options{})
	svc := c.PrepareService(mustPrincipal(t, r.Service(1)))
	ctx := testCtx(t, 10*time.Second)
	res, err := c.ServiceTicket(ctx, svc)
	if err != nil || !res.Renewed || res.Login.RoundTrips != 3 {
		t.Fatalf("first ticket: %+v %v (want a login first)", res, err)
	}
	res, err = c.ServiceTicket(ctx, svc)
	if err != nil || res.Renewed {
		t.Fatalf("second ticket: %+v %v (want the same TGT)", res, err)
	}
	// A quarter of the lifetime left: the next request logs in again.
	if life := c.tgt.expires.Sub(c.tgt.renewAt); life <= 0 {
		t.Fatalf("renewal point %v after expiry %v", c.tgt.renewAt, c.tgt.expires)
	}
	c.tgt.renewAt = time.Now().Add(-time.Second)
	res, err = c.ServiceTicket(ctx, svc)
	if err != nil || !res.Renewed {
		t.Fatalf("near expiry: %+v %v (want a renewal)", res, err)
	}
}

func TestTimeoutIsHonoured(t *testing.T) {
	addr := testutil.BlackHole(t)
	p := mustPrincipal(t, "user0001@PERF.TEST")
	for _, retransmit := range []time.Duration{0, 50 * time.Millisecond} {
		c, err := NewClient(Options{KDC: addr, Client: p, Credentials: NewPasswordCredentials("x", p), UDPRetransmit: retransmit})
		if err != nil {
			t.Fatal(err)
		}
		const timeout = 300 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		as, err := c.Login(ctx)
		cancel()
		wantClass(t, err, ClassTimeout)
		// Generous bound: the exchange ends at the context's deadline, not
		// at some internal timer (gokrb5 would wait 5s).
		if as.Duration > timeout+2*time.Second {
			t.Errorf("retransmit %v: a %v timeout took %v", retransmit, timeout, as.Duration)
		}
		if retransmit > 0 && as.Retransmits < 1 {
			t.Errorf("no retransmit within %v at %v intervals", timeout, retransmit)
		}
	}
	// Cancellation (shutdown) ends a wait long before the deadline.
	c, _ := NewClient(Options{KDC: addr, Client: p, Credentials: NewPasswordCredentials("x", p)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	as, err := c.Login(ctx)
	wantClass(t, err, ClassCanceled)
	if as.Duration > 30*time.Second {
		t.Errorf("cancelled exchange took %v", as.Duration)
	}
}

func TestDeadKDC(t *testing.T) {
	// A port nobody listens on: UDP gets ICMP port unreachable, TCP a reset.
	addr := realmtest.DeadAddr(t)
	p := mustPrincipal(t, "user0001@PERF.TEST")
	for _, tr := range []Transport{UDP, TCP} {
		c, _ := NewClient(Options{KDC: addr, Transport: tr, Client: p, Credentials: NewPasswordCredentials("x", p)})
		_, err := c.Login(testCtx(t, 10*time.Second))
		if pe := wantClass(t, err, ClassConnectionRefused); pe.Phase != PhasePreauthRequired {
			t.Errorf("%v: phase %q", tr, pe.Phase)
		}
	}
}

// A KDC given by host name is resolved (from /etc/hosts here: tests never
// leave loopback).
func TestKDCByHostName(t *testing.T) {
	r := upRealm(t, realm.Options{})
	_, port, _ := net.SplitHostPort(r.KDCAddr)
	c := userClient(t, r, 1, Options{KDC: net.JoinHostPort("localhost", port), Transport: TCP})
	if _, err := c.Login(testCtx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// The hot path allocates nothing once a Client is warm: request parts are
// pre-encoded, replies parsed in place, key schedules kept, the socket reused.
// (A SPAKE login derives two fresh keys; BenchmarkExchange reports its cost.)
func TestExchangesDoNotAllocate(t *testing.T) {
	if testutil.Race {
		t.Skip("the race detector changes allocation counts")
	}
	r := upRealm(t, realm.Options{DisableLastSuccess: true})
	c := userClient(t, r, 1, Options{Preauth: PreauthEncTimestamp})
	defer c.Close()
	svc := c.PrepareService(mustPrincipal(t, r.Service(1)))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.ServiceTicket(ctx, svc); err != nil {
		t.Fatal(err)
	}
	var err error
	if n := testing.AllocsPerRun(100, func() {
		if _, e := c.Login(ctx); e != nil {
			err = e
		}
	}); n != 0 {
		t.Errorf("%v allocations per login", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		if _, e := c.ServiceTicket(ctx, svc); e != nil {
			err = e
		}
	}); n != 0 {
		t.Errorf("%v allocations per service ticket", n)
	}
	if err != nil {
		t.Fatal(err)
	}
}
