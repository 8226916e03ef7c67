package bench

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// upRealm starts a small realm for one test (8 users, 4 services, no
// fillers unless opts says otherwise).
func upRealm(t *testing.T, opts realm.Options) *realm.Realm {
	t.Helper()
	if opts.Users == 0 {
		opts.Users = 8
	}
	if opts.Services == 0 {
		opts.Services = 4
	}
	return realmtest.Realm(t, opts)
}

// small are settings for short test runs.
func small(tests ...string) Settings {
	s := Defaults()
	s.Tests = tests
	s.Clients = 2
	s.Duration = 700 * time.Millisecond
	s.LoginRate = 40
	s.TGSPerLogin = 2
	s.ClientLevels = []int{1, 3}
	s.LevelDuration = 400 * time.Millisecond
	s.StartupRounds = 2
	s.KadminOperations = 20
	s.DumpRounds = 2
	s.DegradationRounds = 2
	s.DegradationLogins = 30
	return s
}

func runSuite(t *testing.T, sys *System, s Settings, opts ...func(*Suite)) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	su := &Suite{Sys: sys, Settings: s}
	for _, o := range opts {
		o(su)
	}
	rep, err := su.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func test(rep *Report, name string) TestResult {
	for _, t := range rep.Tests {
		if t.Name == name {
			return t
		}
	}
	return TestResult{}
}

// The load tests' counts agree with the KDC's own log: every login and
// ticket the report counts as successful was issued by the KDC.
func TestLoadsAgreeWithKDCLog(t *testing.T) {
	r := upRealm(t, realm.Options{NoKadmind: true})
	sys := RealmSystem(r)
	s := small()

	for _, tc := range []struct {
		test, generator string
		load            func(*Report) *Load
		re              string
	}{
		{"as", GeneratorBatched, func(rep *Report) *Load { return rep.AS }, realmtest.ASIssue},
		{"as", GeneratorBlocking, func(rep *Report) *Load { return rep.AS }, realmtest.ASIssue},
		{"tgs", GeneratorBatched, func(rep *Report) *Load { return rep.TGS }, realmtest.TGSIssue},
		{"tgs", GeneratorBlocking, func(rep *Report) *Load { return rep.TGS }, realmtest.TGSIssue},
		{"tcp", GeneratorBatched, func(rep *Report) *Load { return rep.TCP.Load }, realmtest.ASIssue},
	} {
		// The requests the last load left queued at the KDC are logged
		// before this one starts counting.
		realmtest.DrainKDC(t, r)
		from := testutil.LogSize(t, r.KDCLog)
		s.Tests = []string{tc.test}
		s.Generator = tc.generator
		s.BatchInflight = 6 // more than one per goroutine of the batched generator
		rep := runSuite(t, sys, s)
		if st := test(rep, tc.test); st.Status == "error" || st.Status == "skipped" {
			t.Fatalf("%s: %+v", tc.test, st)
		}
		l := tc.load(rep)
		ok := l.Requests - l.Errors
		if ok == 0 || l.Rate <= 0 {
			t.Fatalf("%s: no successful request: %+v", tc.test, l)
		}
		// A request cut off by the end of the load may have been issued
		// and not counted: at most those in flight, one per client, or
		// batch_inflight per client for the batched generator.
		inflight := l.Clients
		if tc.generator == GeneratorBatched {
			inflight *= s.BatchInflight
		}
		realmtest.DrainKDC(t, r)
		got := testutil.LogCount(t, r.KDCLog, from, tc.re)
		if got < ok || got > ok+inflight {
			t.Errorf("%s: the report counts %d successes and %d errors, the KDC logged %d issues (clients %d, in flight at most %d)",
				tc.test, ok, l.Errors, got, l.Clients, inflight)
		}
		if len(l.Records) != l.Requests {
			t.Errorf("%s: %d raw records for %d requests", tc.test, len(l.Records), l.Requests)
		}
		if l.CPU.KDCPerRequestUS <= 0 || l.CPU.GeneratorPerRequestUS <= 0 {
			t.Errorf("%s: CPU per request not measured: %+v", tc.test, l.CPU)
		}
		if l.Transport != map[string]string{"tcp": "tcp"}[tc.test] && !(tc.test != "tcp" && l.Transport == "udp") {
			t.Errorf("%s: transport %s", tc.test, l.Transport)
		}
	}
}

// The open-loop latency load makes exactly the scheduled sessions, and
// the KDC issued exactly the logins and tickets the report counts; cpu
// and memory read the KDC's processes during it.
func TestLatencyCPUMemory(t *testing.T) {
	r := upRealm(t, realm.Options{NoKadmind: true})
	sys := RealmSystem(r)
	s := small("latency", "cpu", "memory")
	from := testutil.LogSize(t, r.KDCLog)
	rep := runSuite(t, sys, s)
	for _, n := range s.Tests {
		if st := test(rep, n); st.Status == "error" || st.Status == "skipped" {
			t.Fatalf("%s: %+v", n, st)
		}
	}
	ol := rep.Latency
	want := int(s.LoginRate * s.Duration.Seconds())
	if ol.Sessions != want || ol.Logins.Requests != want {
		t.Errorf("sessions %d, logins %d; want %d", ol.Sessions, ol.Logins.Requests, want)
	}
	if got, ok := testutil.LogCount(t, r.KDCLog, from, realmtest.ASIssue), ol.Logins.Requests-ol.Logins.Errors; got != ok {
		t.Errorf("logins: report %d, KDC log %d", ok, got)
	}
	if got, ok := testutil.LogCount(t, r.KDCLog, from, realmtest.TGSIssue), ol.Tickets.Requests-ol.Tickets.Errors; got != ok {
		t.Errorf("tickets: report %d, KDC log %d", ok, got)
	}
	if ol.Tickets.Requests != (ol.Logins.Requests-ol.Logins.Errors)*s.TGSPerLogin {
		t.Errorf("%d tickets for %d logins", ol.Tickets.Requests, ol.Logins.Requests)
	}
	if l := ol.Logins.Latency; !(l.P50MS > 0 && l.P50MS <= l.P95MS && l.P95MS <= l.P99MS && l.P99MS <= l.MaxMS) {
		t.Errorf("login percentiles out of order: %+v", l)
	}
	if rep.Memory.PeakBytes < 1<<20 || rep.Memory.PeakBytes > 1<<30 {
		t.Errorf("KDC peak RSS %d bytes", rep.Memory.PeakBytes)
	}
	if ol.CPU.KDCBusyPct <= 0 || ol.CPU.KDCBusyPct > 100 {
		t.Errorf("KDC busy %.1f %%", ol.CPU.KDCBusyPct)
	}
	names := map[string]bool{}
	for _, m := range rep.Metrics {
		names[m.Name] = true
	}
	for _, n := range []string{"login_p95_seconds", "login_p99_seconds", "ticket_p95_seconds", "ticket_p99_seconds", "error_ratio", "kdc_cpu_ratio", "kdc_rss_peak_bytes"} {
		if !names[n] {
			t.Errorf("no metric %s", n)
		}
	}
}

// startup restarts the KDC (a new process each round), kadmin's
// operations reach kadmind (its log) and leave no principal behind, dump
// writes a dump and removes it, degradation runs every login.
func TestStartupKadminDumpDegradation(t *testing.T) {
	r := upRealm(t, realm.Options{})
	sys := RealmSystem(r)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	s := small("startup", "kadmin", "dump", "degradation")
	pid0 := r.KDCPids()[0]
	kfrom := testutil.LogSize(t, r.KadmindLog)
	from := testutil.LogSize(t, r.KDCLog)
	rep := runSuite(t, sys, s)
	for _, n := range s.Tests {
		if st := test(rep, n); st.Status == "error" || st.Status == "skipped" {
			t.Fatalf("%s: %+v", n, st)
		}
	}
	if len(rep.Startup.RoundsMS) != s.StartupRounds || rep.Startup.AvgMS <= 0 {
		t.Errorf("startup: %+v", rep.Startup)
	}
	if p := r.KDCPids(); len(p) == 0 || p[0] == pid0 {
		t.Errorf("the KDC was not restarted: pids %v, before %d", p, pid0)
	}
	if n := testutil.LogCount(t, r.KDCLog, from, `commencing operation`); n != s.StartupRounds {
		t.Errorf("KDC log: %d starts, want %d", n, s.StartupRounds)
	}

	k := rep.Kadmin
	for _, b := range k.Kinds {
		if b.Completed != s.KadminOperations || b.Rate <= 0 {
			t.Errorf("kadmin %s: %+v", b.Kind, b)
		}
	}
	for _, op := range []string{"kadm5_create_principal", "kadm5_get_principal", "kadm5_randkey_principal", "kadm5_delete_principal"} {
		if n := testutil.LogCount(t, r.KadmindLog, kfrom, `Request: `+op+`, `+regexp.QuoteMeta(k.Prefix)+`\d+@PERF\.TEST, success`); n != s.KadminOperations {
			t.Errorf("kadmind log: %d successful %s, want %d", n, op, s.KadminOperations)
		}
	}
	if left := leftPrincipals(t, r); len(left) > 0 {
		t.Errorf("principals left: %v", left)
	}

	if len(rep.Dump.RoundsS) != s.DumpRounds || rep.Dump.Bytes < 1000 {
		t.Errorf("dump: %+v", rep.Dump)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, "*")); len(left) != 0 {
		t.Errorf("dump files left: %v", left)
	}

	d := rep.Degradation
	if len(d.RoundsS) != s.DegradationRounds || d.Errors != 0 {
		t.Errorf("degradation: %+v", d)
	}
	if n := testutil.LogCount(t, r.KDCLog, from, realmtest.TGSIssue); n != s.DegradationRounds*s.DegradationLogins {
		t.Errorf("KDC log: %d tickets issued, want %d", n, s.DegradationRounds*s.DegradationLogins)
	}
}

// A KDC that is down: every load test ends promptly with an error naming
// the cause; nothing hangs.
func TestKDCDown(t *testing.T) {
	r := upRealm(t, realm.Options{NoKadmind: true})
	sys := RealmSystem(r)
	if err := r.StopKDC(); err != nil {
		t.Fatal(err)
	}
	s := small("as", "tgs", "latency", "cpu", "concurrency", "tcp", "degradation")
	s.Timeout = 300 * time.Millisecond
	rep := runSuite(t, sys, s)
	for _, n := range []string{"as", "tgs", "latency", "concurrency", "tcp", "degradation"} {
		st := test(rep, n)
		if st.Status != "error" && st.Status != "fail" {
			t.Errorf("%s: %+v, want an error", n, st)
		}
	}
	for _, n := range []string{"as", "tcp"} {
		if st := test(rep, n); !strings.Contains(st.Error, "connection_refused") {
			t.Errorf("%s: error %q does not say the connection was refused", n, st.Error)
		}
	}
	if rep.Verdict != Fail {
		t.Errorf("verdict %s", rep.Verdict)
	}
}

// Interrupting kadmin halfway (Ctrl-C) still removes every principal it
// created.
func TestKadminInterruptedCleansUp(t *testing.T) {
	r := upRealm(t, realm.Options{NoKadmind: false})
	sys := RealmSystem(r)
	s := small("kadmin")
	s.KadminOperations = 3000
	kfrom := testutil.LogSize(t, r.KadmindLog)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	created := regexp.MustCompile(`kadm5_create_principal, ` + kadminPrefix + `[0-9a-f]+-\d+@PERF\.TEST, success`)
	go func() {
		// Cancel once kadmind has created some, before the batch is done.
		for ctx.Err() == nil {
			b, _ := os.ReadFile(r.KadmindLog)
			if len(created.FindAll(b[kfrom:], -1)) >= 50 {
				cancel()
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	rep, err := (&Suite{Sys: sys, Settings: s}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st := test(rep, "kadmin")
	if st.Status != "error" {
		t.Fatalf("kadmin: %+v, want an interrupted error", st)
	}
	b, _ := os.ReadFile(r.KadmindLog)
	n := len(created.FindAll(b[kfrom:], -1))
	if n < 50 || n >= s.KadminOperations {
		t.Fatalf("kadmind created %d principals; the test wants an interruption halfway", n)
	}
	if rep.Kadmin.Removed != n {
		t.Errorf("removed %d of the %d created", rep.Kadmin.Removed, n)
	}
	if left := leftPrincipals(t, r); len(left) > 0 {
		t.Errorf("%d principals left, first %s", len(left), left[0])
	}
}

// leftPrincipals lists the kadmin test's principals still in the
// database, read locally (not through the code under test).
func leftPrincipals(t *testing.T, r *realm.Realm) []string {
	t.Helper()
	out, err := r.KadminLocal(context.Background(), "listprincs "+kadminPrefix+"*")
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), kadminPrefix) {
			left = append(left, l)
		}
	}
	return left
}
