package kdclog

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// attackTestSignals are the thresholds TestAttackSignalsRealKDC drives
// across, each a little above what the healthy load does.
var attackTestSignals = config.AttackSignals{
	Window:                   10 * time.Minute,
	RecoveryWait:             time.Second,
	FollowLogins:             true,
	FollowServiceTickets:     true,
	SprayingPrincipals:       5,
	BruteForceFailures:       4,
	EnumerationPrincipals:    5,
	KerberoastingServices:    8,
	KerberoastingRC4Services: 3,
	ASREPRoastingPrincipals:  1,
}

// ownLogin logs principal in with password through the project's own
// client, from the loopback address from; the error is the KDC's answer.
func ownLogin(t *testing.T, r *realm.Realm, principal, password, from string) error {
	t.Helper()
	p, err := krb5.ParsePrincipal(principal, r.Realm)
	if err != nil {
		t.Fatal(err)
	}
	c, err := krb5.NewClient(krb5.Options{KDC: r.KDCAddr, Client: p, Credentials: krb5.NewPasswordCredentials(password, p), LocalAddr: netip.MustParseAddr(from)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = c.Login(ctx)
	return err
}

// TestAttackSignalsRealKDC drives a harness KDC (with RC4 keys, for
// Kerberoasting) with a healthy load, P-256-only SPAKE clients against
// its edwards25519 (a group mismatch, then a fallback), and then each
// attack: MIT kinit with wrong passwords across principals and the
// project's client doing the same from 127.0.0.2; wrong passwords for
// one principal from four addresses; a lockout policy reached; unknown
// principals from 127.0.0.7; kvno for services with RC4 and for many
// with AES; principals without requires_preauth asked without it. The
// truth is what the clients did and the addresses they used.
func TestAttackSignalsRealKDC(t *testing.T) {
	needMIT(t)
	r, tm := followedRealm(t, realm.Options{Users: 20, Services: 12, Fillers: -1, NoKadmind: true, DisableLastSuccess: true,
		Enctypes: append(append([]string{}, realm.RHEL9Enctypes...), "arcfour-hmac")})
	src := config.LogSource{Path: r.KDCLog, Type: "kdc", StartAt: "beginning", PollInterval: 20 * time.Millisecond,
		ProbePrincipals: []string{realm.ReadyPrincipal}}
	if err := tm.m.ApplyConfig(&config.Config{Logs: []config.LogSource{src}, AttackSignals: attackTestSignals}); err != nil {
		t.Fatal(err)
	}
	user := func(i int) string { return r.User(i) }
	// A client profile with P-256 as its only SPAKE group, against the
	// KDC's edwards25519.
	p256 := clients{t: t, r: r}.conf("krb5-p256.conf", func(s string) string {
		return strings.Replace(s, "spake_preauth_groups = edwards25519", "spake_preauth_groups = P-256", 1)
	})

	// settled waits until every line of the log is read and no failure
	// awaits its recovery any more (each scrape counts those whose wait
	// is over), then returns the series and checks the wrong passwords.
	settled := func(t *testing.T, wrongPasswords float64) *testutil.Scrape {
		t.Helper()
		got := settle(t, tm, r.KDCLog)
		if v := got.Value(MetricAttackEvents, "event", "wrong_password"); v != wrongPasswords {
			t.Errorf("wrong passwords %v, want %v", v, wrongPasswords)
		}
		return got
	}

	t.Run("healthy and SPAKE mismatch stay silent", func(t *testing.T) {
		c := clients{t: t, r: r}
		for i := 1; i <= 6; i++ {
			c.ok("", "kinit", "-k", "-t", r.UserKeytab, user(i))
			c.ok("", "kvno", "--no-store", r.Service(1), r.Service(2), r.Service(i))
		}
		for i := 1; i <= 8; i++ { // 8 principals from one address: spraying's 5, were they guesses
			c.ok(p256, "kinit", "-k", "-t", r.UserKeytab, user(i))
		}
		if err := ownLogin(t, r, user(9), "typo", "127.0.0.9"); err == nil {
			t.Fatal("a wrong password succeeded")
		}
		// One wrong password above, nothing else.
		got := settled(t, 1)
		if d := got.Sum(MetricAttackDetections); d != 0 {
			t.Errorf("%v detections under healthy load and SPAKE group fallbacks", d)
		}
		for _, e := range []string{"lockout", "unknown_client", "rc4_service_ticket", "no_preauth_ticket"} {
			if v := got.Value(MetricAttackEvents, "event", e); v != 0 {
				t.Errorf("%s = %v under healthy load", e, v)
			}
		}
		// The P-256 client's fallback really happened: its SPAKE attempts
		// failed and were recovered.
		if v := got.Value("krb5_kdc_preauth_failures_recovered_total", "method", "spake"); v != 8 {
			t.Errorf("recovered SPAKE failures %v, want 8", v)
		}
	})

	const (
		sprayMIT   = 6 // kinit, wrong passwords, from 127.0.0.1
		sprayOwn   = 6 // the project's client from 127.0.0.2
		brute      = 4 // one principal from 127.0.0.3-6
		lockFails  = 2 // the lockout policy's maxfailure
		p256Wrong  = 2 // P-256 client, wrong password: SPAKE mismatch then timestamp, one guess each
		wrongTotal = 1 + sprayMIT + sprayOwn + brute + lockFails + p256Wrong
	)
	t.Run("attacks", func(t *testing.T) {
		c := clients{t: t, r: r}
		for i := 1; i <= sprayMIT; i++ {
			c.fails("", "wrong password\n", "kinit", user(i))
		}
		for i := 11; i < 11+sprayOwn; i++ {
			if err := ownLogin(t, r, user(i), "wrong password", "127.0.0.2"); err == nil {
				t.Fatal("a wrong password succeeded")
			}
		}
		for a := 3; a < 3+brute; a++ {
			if err := ownLogin(t, r, user(20), "guess", fmt.Sprintf("127.0.0.%d", a)); err == nil {
				t.Fatal("a wrong password succeeded")
			}
		}
		c.kadminLocal("addpol -maxfailure 2 -failurecountinterval 0 -lockoutduration 1h lockout", "modprinc -policy lockout "+user(19))
		for range lockFails + 1 {
			c.fails("", "wrong\n", "kinit", user(19))
		}
		for i := 7; i < 7+p256Wrong; i++ {
			c.fails(p256, "wrong\n", "kinit", user(i))
		}
		for i := range 6 {
			if err := ownLogin(t, r, fmt.Sprintf("nosuch%d", i), "x", "127.0.0.7"); err == nil {
				t.Fatal("an unknown principal logged in")
			}
		}
		// Services whose only key is RC4, as legacy service accounts have:
		// their tickets are RC4 (MIT encrypts a ticket in the service's
		// strongest key).
		for i := 3; i <= 6; i++ {
			c.kadminLocal("cpw -randkey -e arcfour-hmac:normal " + r.Service(i))
		}
		c.ok("", "kinit", "-k", "-t", r.UserKeytab, user(18))
		c.ok("", "kvno", "--no-store", r.Service(3), r.Service(4), r.Service(5), r.Service(6))
		c.ok("", "kinit", "-k", "-t", r.UserKeytab, user(17))
		var many []string
		for i := 1; i <= 12; i++ {
			many = append(many, r.Service(i))
		}
		c.ok("", "kvno", append([]string{"--no-store"}, many...)...)
		c.kadminLocal("addprinc -clearpolicy -pw roastme -requires_preauth nopre1", "addprinc -clearpolicy -pw roastme -requires_preauth nopre2")
		for _, p := range []string{"nopre1", "nopre2"} {
			if out, err := c.run("", "roastme\n", "kinit", p); err != nil {
				t.Fatalf("kinit %s: %v: %s", p, err, out)
			}
		}

		got := settled(t, wrongTotal)
		for _, w := range []struct {
			name, label, value string
			want               float64
		}{
			{MetricAttackEvents, "event", "lockout", 1},
			{MetricAttackEvents, "event", "unknown_client", 6},
			{MetricAttackEvents, "event", "rc4_service_ticket", 8}, // user 18's 4, and 4 of user 17's 12
			{MetricAttackEvents, "event", "no_preauth_ticket", 2},
			{MetricAttackDetections, "signal", "password_spraying", 2}, // 127.0.0.1, 127.0.0.2
			{MetricAttackDetections, "signal", "brute_force", 1},
			{MetricAttackDetections, "signal", "user_enumeration", 1},
			{MetricAttackDetections, "signal", "kerberoasting", 2}, // RC4 and AES
			{MetricAttackDetections, "signal", "asrep_roasting", 1},
		} {
			if v := got.Value(w.name, w.label, w.value); v != w.want {
				t.Errorf("%s{%s=%q} = %v, want %v", w.name, w.label, w.value, v, w.want)
			}
		}
		for _, o := range []struct {
			signal, offender string
			min              float64
		}{
			{"password_spraying", "127.0.0.1", sprayMIT},
			{"password_spraying", "127.0.0.2", sprayOwn},
			{"brute_force", user(20), brute},
			{"user_enumeration", "127.0.0.7", 6},
			{"kerberoasting", user(18), 4},
			{"kerberoasting", user(17), 12},
			{"asrep_roasting", "127.0.0.1", 2},
		} {
			if v, _ := got.Find(MetricAttackOffender, "offender", o.offender, "signal", o.signal); v < o.min-1 { // a sketch bit shared by two
				t.Errorf("%s offender %s score %v, want about %v", o.signal, o.offender, v, o.min)
			}
		}
		if t.Failed() {
			for _, m := range got.MFs[MetricAttackOffender].GetMetric() {
				t.Logf("offender %v: %v", m.GetLabel(), m.GetGauge().GetValue())
			}
		}
	})
}

// settle waits until every line of the KDC log is read and no failure
// awaits its recovery any more (each scrape counts those whose wait is
// over), then returns the series.
func settle(t *testing.T, tm *testManager, log string) *testutil.Scrape {
	t.Helper()
	waitValue(t, tm.reg, completeLines(t, log), "krb5_kdc_log_lines_read_total", "path", log)
	testutil.Eventually(t, 15*time.Second, "the failures' recovery wait", func() bool {
		testutil.Gather(t, tm.reg)
		return !tm.m.counts.attack.d.Waiting()
	})
	return testutil.Gather(t, tm.reg)
}
