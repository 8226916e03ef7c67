package krb5

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// crossRealmProbe runs the three exchanges of a cross-realm probe as
// the prober does: a login in a, the referral at a's KDC, the service
// ticket at b's KDC. It returns the class of the first failure and the
// remote hop's result.
func crossRealmProbe(t *testing.T, a, b *realm.Realm) (string, string, RemoteResult) {
	t.Helper()
	p := mustPrincipal(t, a.ProbePrincipal)
	creds, err := NewKeytabCredentials(a.ProbeKeytab, p)
	if err != nil {
		t.Fatal(err)
	}
	c, err := NewClient(Options{KDC: a.KDCAddr, Client: p, Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.PrepareCrossRealm(mustPrincipal(t, b.Service(1)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 10*time.Second)
	if _, err := c.Login(ctx); err != nil {
		t.Fatalf("login in %s: %v", a.Realm, err)
	}
	if _, err := c.Referral(ctx, s); err != nil {
		return PhaseReferral, Classify(err), RemoteResult{}
	}
	hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	res, err := c.RemoteServiceTicket(hctx, s, b.KDCAddr)
	if err != nil {
		return PhaseRemoteTGS, Classify(err), res
	}
	return "", ClassSuccess, res
}

// mitKvno is the oracle: kinit as a's probe principal with a's krb5.conf
// (which names b's KDC and the path between them), then kvno b's service.
func mitKvno(t *testing.T, a, b *realm.Realm) (bool, string) {
	t.Helper()
	ccache := "FILE:" + t.TempDir() + "/ccache"
	env := append(os.Environ(), "KRB5_CONFIG="+a.Krb5Conf, "KRB5CCNAME="+ccache)
	run := func(name string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := run("kinit", "-k", "-t", a.ProbeKeytab, a.ProbePrincipal); err != nil {
		t.Fatalf("kinit: %v: %s", err, out)
	}
	out, err := run("kvno", b.Service(1))
	return err == nil, strings.TrimSpace(out)
}

// TestCrossRealm walks a two-way trust between two real KDCs through
// each failure the probe classifies, with MIT's kvno seeing each case
// as the engine does, and b's KDC log as the witness of the issued ticket.
func TestCrossRealm(t *testing.T) {
	realmtest.RequireMIT(t)
	a, b := realmtest.Trusted(t, realm.Options{})
	ctx := testCtx(t, time.Minute)
	check := func(name, wantHop, wantClass string, kvnoOK bool, kvnoSays string) RemoteResult {
		t.Helper()
		hop, class, res := crossRealmProbe(t, a, b)
		if hop != wantHop || class != wantClass {
			t.Errorf("%s: the probe failed at %q with %q, want %q with %q", name, hop, class, wantHop, wantClass)
		}
		ok, out := mitKvno(t, a, b)
		if ok != kvnoOK || !strings.Contains(out, kvnoSays) {
			t.Errorf("%s: kvno succeeded=%v (%s), want %v saying %q", name, ok, out, kvnoOK, kvnoSays)
		}
		return res
	}

	check("trust", "", ClassSuccess, true, "kvno = 1")
	issued := regexp.MustCompile(`TGS_REQ .*: ISSUE: .* ` + regexp.QuoteMeta(a.ProbePrincipal+" for "+b.Service(1)))
	if log, _ := os.ReadFile(b.KDCLog); len(issued.FindAll(log, -1)) < 2 { // the probe's and kvno's
		t.Errorf("%s's KDC log does not show the probe's ticket for %s:\n%s", b.Realm, b.Service(1), log)
	}

	if err := b.StopKDC(); err != nil {
		t.Fatal(err)
	}
	check("b down", PhaseRemoteTGS, ClassConnectionRefused, false, "Cannot contact any KDC for realm '"+b.Realm+"'")

	{
		testutil.RequireProgram(t, "faketime")
		const shift = 10 * time.Minute
		if err := b.RestartKDCShifted(ctx, shift); err != nil {
			t.Fatal(err)
		}
		res := check("skew on b", PhaseRemoteTGS, "KRB_AP_ERR_SKEW", false, "Clock skew too great")
		if !res.HasClockOffset || (res.ClockOffset-shift).Abs() > 5*time.Second {
			t.Errorf("b's clock offset %v (known: %v), want about %v", res.ClockOffset, res.HasClockOffset, shift)
		}
		if err := b.RestartKDCShifted(ctx, 0); err != nil {
			t.Fatal(err)
		}
		check("b's clock back", "", ClassSuccess, true, "kvno = 1")
	}

	// B's KDC hung (SIGSTOP): the remote hop times out (no oracle here:
	// kvno retries for longer than the test wants to wait).
	pid := b.KDCPids()[0]
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	hop, class, _ := crossRealmProbe(t, a, b)
	syscall.Kill(pid, syscall.SIGCONT)
	if hop != PhaseRemoteTGS || class != ClassTimeout {
		t.Errorf("b hung: the probe failed at %q with %q, want %q with %q", hop, class, PhaseRemoteTGS, ClassTimeout)
	}

	// A rekey of krbtgt/B@A in B alone: A seals the cross-realm TGT with
	// kvno 1, which B no longer has.
	xtgt := "krbtgt/" + b.Realm + "@" + a.Realm
	realmtest.Kadmin(t, b, "cpw -randkey "+xtgt)
	check("rekey on one side", PhaseRemoteTGS, ClassTrustKeyMismatch, false, "PROCESS_TGS")
	// Then in A alone too: both at kvno 2, with different keys.
	realmtest.Kadmin(t, a, "cpw -randkey "+xtgt)
	check("rekeyed apart", PhaseRemoteTGS, ClassTrustKeyMismatch, false, "Decrypt integrity check failed")

	realmtest.Kadmin(t, a, "delprinc -force krbtgt/"+b.Realm+"@"+a.Realm)
	check("no trust", PhaseReferral, ClassNoTrustPath, false, "Server krbtgt/"+b.Realm+"@"+a.Realm+" not found")
}

// BenchmarkCrossRealm: the CPU of the two cross-realm hops, each beside a
// local TGS exchange at the client's KDC (the same work for a KDC: one
// TGS-REQ), and beside MIT's kvno walking both hops (a process per
// ticket, from a ccache holding only the TGT). client-cpu-ns/op is this
// process (kvno: the child's), kdc-cpu-ns/op the KDC that answered.
func BenchmarkCrossRealm(b *testing.B) {
	a, trusted := realmtest.Trusted(b, realm.Options{Users: 2, Services: 2, DisableLastSuccess: true})
	p := mustPrincipal(b, a.ProbePrincipal)
	creds, err := NewKeytabCredentials(a.ProbeKeytab, p)
	if err != nil {
		b.Fatal(err)
	}
	c, err := NewClient(Options{KDC: a.KDCAddr, Client: p, Credentials: creds})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Login(ctx); err != nil {
		b.Fatal(err)
	}
	local := c.PrepareService(mustPrincipal(b, a.Service(1)))
	x, err := c.PrepareCrossRealm(mustPrincipal(b, trusted.Service(1)))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		kdc  *realm.Realm
		op   func() error
	}{
		{"tgs", a, func() error { _, err := c.ServiceTicket(ctx, local); return err }},
		{"referral", a, func() error { _, err := c.Referral(ctx, x); return err }},
		{"remote_tgs", trusted, func() error { _, err := c.RemoteServiceTicket(ctx, x, trusted.KDCAddr); return err }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			if _, err := c.Referral(ctx, x); err != nil { // warm, and the TGT remote_tgs uses
				b.Fatal(err)
			}
			m := newCPUMeter(b, bc.kdc)
			b.ResetTimer()
			m.start(b)
			for range b.N {
				if err := bc.op(); err != nil {
					b.Fatal(err)
				}
			}
			m.stop(b)
		})
	}
	b.Run("kvno", func(b *testing.B) {
		dir := b.TempDir()
		tgt := dir + "/tgt"
		env := append(os.Environ(), "KRB5_CONFIG="+a.Krb5Conf)
		kinit := exec.Command("kinit", "-k", "-t", a.ProbeKeytab, "-c", "FILE:"+tgt, a.ProbePrincipal)
		kinit.Env = env
		if out, err := kinit.CombinedOutput(); err != nil {
			b.Fatalf("kinit: %v %s", err, out)
		}
		cache, err := os.ReadFile(tgt)
		if err != nil {
			b.Fatal(err)
		}
		m := newCPUMeter(b, trusted)
		var child time.Duration
		b.ResetTimer()
		m.start(b)
		for range b.N {
			cc := dir + "/cc"
			if err := os.WriteFile(cc, cache, 0o600); err != nil {
				b.Fatal(err)
			}
			kvno := exec.Command("kvno", "-c", "FILE:"+cc, trusted.Service(1))
			kvno.Env = env
			if out, err := kvno.CombinedOutput(); err != nil {
				b.Fatalf("kvno: %v %s", err, out)
			}
			child += kvno.ProcessState.UserTime() + kvno.ProcessState.SystemTime()
		}
		m.stop(b)
		b.ReportMetric(float64(child.Nanoseconds())/float64(b.N), "kvno-cpu-ns/op")
	})
}

// The referral hop accepts only a ticket for krbtgt/REMOTE: namesEqual on
// names as the engine encodes them.
func TestNamesEqual(t *testing.T) {
	enc := func(comps ...string) []byte {
		var w derWriter
		w.Reset()
		w.principalName(Principal{Components: comps, Realm: "A"})
		return append([]byte(nil), w.Bytes()...)
	}
	for _, tc := range []struct {
		name []byte
		want []string
		eq   bool
	}{
		{enc("krbtgt", "B"), []string{"krbtgt", "B"}, true},
		{enc("krbtgt", "C"), []string{"krbtgt", "B"}, false},
		{enc("krbtgt"), []string{"krbtgt", "B"}, false},
		{enc("krbtgt", "B", "x"), []string{"krbtgt", "B"}, false},
	} {
		eq, err := namesEqual(tc.name, tc.want)
		if err != nil || eq != tc.eq {
			t.Errorf("%x against %q: %v %v, want %v", tc.name, tc.want, eq, err, tc.eq)
		}
	}
	if _, err := namesEqual([]byte{0x30, 0x03, 0xa0, 0x01}, []string{"x"}); err == nil {
		t.Error("a truncated name parsed")
	}
}
