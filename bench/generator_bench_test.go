package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/loadgen"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// BenchmarkGenerator runs the as and tgs loads against a real KDC
// (disable_last_success, so the KDC is CPU-bound) and reports the
// generator's CPU per request next to the KDC's. Pin them apart for
// meaningful numbers: BENCH_KDC_CPU=0 moves the KDC to CPU 0, and
//
//	go test -c -o /tmp/bench.test ./bench && cd bench && \
//	BENCH_KDC_CPU=0 taskset -c 1 /tmp/bench.test -test.run '^$' -test.bench Generator -test.benchtime 20000x -test.cpu 1
func BenchmarkGenerator(b *testing.B) {
	r := upRealmB(b)
	for _, tc := range []struct {
		name    string
		load    func(ru *run, n int) (*Load, error)
		preauth krb5.PreauthMode
	}{
		{"tgs/batched", func(ru *run, n int) (*Load, error) {
			return ru.batchedTGS(context.Background(), 64, time.Hour, int64(n))
		}, ""},
		{"tgs/blocking", func(ru *run, n int) (*Load, error) {
			return ru.closedLoopN(kindTGS, krb5.UDP, 8, n)
		}, ""},
		{"as/batched/spake", func(ru *run, n int) (*Load, error) {
			return ru.batchedAS(context.Background(), 64, time.Hour, int64(n))
		}, krb5.PreauthSPAKE},
		{"as/batched/encrypted_timestamp", func(ru *run, n int) (*Load, error) {
			return ru.batchedAS(context.Background(), 64, time.Hour, int64(n))
		}, krb5.PreauthEncTimestamp},
		{"as/blocking", func(ru *run, n int) (*Load, error) {
			return ru.closedLoopN(kindAS, krb5.UDP, 8, n)
		}, krb5.PreauthSPAKE},
		{"as/tcp/batched", func(ru *run, n int) (*Load, error) {
			return ru.batchedTCP(context.Background(), 64, time.Hour, int64(n))
		}, krb5.PreauthEncTimestamp},
		{"as/tcp/blocking", func(ru *run, n int) (*Load, error) {
			return ru.closedLoopN(kindAS, krb5.TCP, 8, n)
		}, krb5.PreauthEncTimestamp},
	} {
		b.Run(tc.name, func(b *testing.B) {
			set := Defaults()
			sys := RealmSystem(r)
			if err := sys.validate(); err != nil {
				b.Fatal(err)
			}
			ru := &run{sys: sys, set: set, prog: &progress{}, fleet: &fleet{sys: sys, preauth: tc.preauth}, sampler: newSampler(r.KDCPids), rep: &Report{}}
			var ru0, ru1 syscall.Rusage
			b.ReportAllocs()
			b.ResetTimer()
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			l, err := tc.load(ru, b.N)
			syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			if l.Errors > 0 {
				b.Fatalf("%d errors: %v", l.Errors, l.ErrorTexts)
			}
			b.ReportMetric(l.CPU.GeneratorPerRequestUS, "gen-cpu-us/op")
			b.ReportMetric(l.CPU.KDCPerRequestUS, "kdc-cpu-us/op")
			b.ReportMetric(l.CPU.Ratio, "gen/kdc")
			if l.CPU.SPAKEFloorUS > 0 {
				b.ReportMetric(l.CPU.SPAKEFloorUS, "spake-floor-us/op")
			}
			b.ReportMetric(l.CPU.KDCBusyPct, "kdc-busy-%")
			b.ReportMetric(l.Rate, "req/s")
			if l.Requests > 0 {
				b.ReportMetric(float64(ru1.Utime.Nano()-ru0.Utime.Nano())/1e3/float64(l.Requests), "gen-user-us/op")
				b.ReportMetric(float64(ru1.Stime.Nano()-ru0.Stime.Nano())/1e3/float64(l.Requests), "gen-sys-us/op")
				// Voluntary context switches: how often the generator slept
				// and was woken, per request (batching keeps this well below 1).
				b.ReportMetric(float64(ru1.Nvcsw-ru0.Nvcsw)/float64(l.Requests), "gen-wakeups/op")
			}
		})
	}
}

// BenchmarkLatencyGenerator is the latency load (open loop, LOGIN_RATE
// 100 sessions/s, each a login and 4 tickets) on the batched generator
// (SPAKE and encrypted timestamp) and on the blocking one, b.N sessions
// each; pin as for BenchmarkGenerator, with -test.benchtime 1000x (10 s
// per run).
func BenchmarkLatencyGenerator(b *testing.B) {
	r := upRealmB(b)
	for _, tc := range []struct {
		gen     string
		preauth krb5.PreauthMode
	}{{GeneratorBatched, krb5.PreauthSPAKE}, {GeneratorBatched, krb5.PreauthEncTimestamp}, {GeneratorBlocking, krb5.PreauthSPAKE}} {
		b.Run(tc.gen+"/"+string(tc.preauth), func(b *testing.B) {
			set := Defaults()
			set.Generator = tc.gen
			sys := RealmSystem(r)
			if err := sys.validate(); err != nil {
				b.Fatal(err)
			}
			ru := &run{sys: sys, set: set, prog: &progress{}, fleet: &fleet{sys: sys, preauth: tc.preauth}, sampler: newSampler(r.KDCPids), rep: &Report{}}
			const rate = 100
			b.ResetTimer()
			ol, err := ru.openLoop(context.Background(), rate, 4, time.Duration(b.N)*time.Second/rate)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			if ol.ErrorPct > 0 {
				b.Fatalf("%.2f %% errors: %v %v", ol.ErrorPct, ol.Logins.ErrorTexts, ol.Tickets.ErrorTexts)
			}
			b.ReportMetric(ol.CPU.GeneratorPerRequestUS, "gen-cpu-us/req")
			b.ReportMetric(ol.CPU.KDCPerRequestUS, "kdc-cpu-us/req")
			b.ReportMetric(ol.CPU.Ratio, "gen/kdc")
			b.ReportMetric(float64(ol.Behind), "late-sessions")
			b.ReportMetric(ol.Logins.Latency.P99MS, "login-p99-ms")
			b.ReportMetric(ol.Tickets.Latency.P99MS, "ticket-p99-ms")
		})
	}
}

// BenchmarkDegradationGenerator is a degradation round (closed loop:
// 8 sessions in flight, each a login and one ticket) of b.N sessions on
// the batched generator, encrypted timestamp; pin as for
// BenchmarkGenerator.
func BenchmarkDegradationGenerator(b *testing.B) {
	r := upRealmB(b)
	sys := RealmSystem(r)
	if err := sys.validate(); err != nil {
		b.Fatal(err)
	}
	ru := &run{sys: sys, set: Defaults(), prog: &progress{}, fleet: &fleet{sys: sys, preauth: krb5.PreauthEncTimestamp}, sampler: newSampler(r.KDCPids), rep: &Report{}}
	b.ResetTimer()
	w := ru.window()
	sr, err := loadgen.Sessions(context.Background(), ru.gen(w), loadgen.SessionPlan{N: b.N, TGSPer: 1}, 8)
	b.StopTimer()
	if err != nil {
		b.Fatal(err)
	}
	if sr.Failed > 0 {
		b.Fatalf("%d sessions failed: %v", sr.Failed, sr.ErrorTexts)
	}
	u := w.use(len(sr.Records))
	b.ReportMetric(u.GeneratorPerRequestUS, "gen-cpu-us/req")
	b.ReportMetric(u.KDCPerRequestUS, "kdc-cpu-us/req")
	b.ReportMetric(u.Ratio, "gen/kdc")
	b.ReportMetric(float64(b.N)/sr.Wall.Seconds(), "sessions/s")
}

func upRealmB(b *testing.B) *realm.Realm {
	if err := realm.Available(); err != nil {
		b.Skip(err)
	}
	r, err := realm.Up(context.Background(), realm.Options{Dir: b.TempDir(), Users: 16, Services: 8, Fillers: -1, NoKadmind: true, DisableLastSuccess: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.Down() })
	if cpu := os.Getenv("BENCH_KDC_CPU"); cpu != "" {
		n, err := strconv.Atoi(cpu)
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range r.KDCPids() {
			if out, err := execTaskset(p, n); err != nil {
				b.Fatalf("taskset: %v %s", err, out)
			}
		}
	}
	return r
}

// BenchmarkKinitLoop is the as and tgs loads made the way a shell script
// makes them: a loop of `kinit -k` (a process per login) and of `kvno
// --no-store` (a process per 8 service tickets, never cached), one at a
// time, encrypted timestamp (the client's profile without SPAKE groups),
// reporting the client processes' CPU per request next to the KDC's as
// BenchmarkGenerator does. Pin as for BenchmarkGenerator; -test.benchtime
// 400x.
func BenchmarkKinitLoop(b *testing.B) {
	r := upRealmB(b)
	kinit, err1 := exec.LookPath("kinit")
	kvno, err2 := exec.LookPath("kvno")
	if err1 != nil || err2 != nil {
		b.Skip("kinit/kvno not installed")
	}
	// The realm's client profile without spake_preauth_groups.
	env := append(os.Environ(), r.Env()...)
	for i, e := range env {
		if p, ok := strings.CutPrefix(e, "KRB5_CONFIG="); ok {
			conf, err := os.ReadFile(p)
			if err != nil {
				b.Fatal(err)
			}
			np := filepath.Join(b.TempDir(), "krb5.conf")
			if err := os.WriteFile(np, regexp.MustCompile(`(?m)^\s*spake_preauth_groups.*\n`).ReplaceAll(conf, nil), 0o644); err != nil {
				b.Fatal(err)
			}
			env[i] = "KRB5_CONFIG=" + np
		}
	}
	env = append(env, "KRB5CCNAME=FILE:"+filepath.Join(b.TempDir(), "cc"))
	run := func(name string, args ...string) {
		cmd := exec.Command(name, args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	var svcs []string
	for i := 1; i <= 8; i++ {
		svcs = append(svcs, r.Service(i))
	}
	for _, tc := range []struct {
		name string
		per  int // requests per process
		loop func()
	}{
		{"kinit", 1, func() { run(kinit, "-k", "-t", r.UserKeytab, r.User(1)) }},
		{"kvno", len(svcs), func() { run(kvno, append([]string{"-q", "--no-store"}, svcs...)...) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			run(kinit, "-k", "-t", r.UserKeytab, r.User(1))
			s := newSampler(r.KDCPids)
			var ru0, ru1 syscall.Rusage
			procs := (b.N + tc.per - 1) / tc.per
			b.ResetTimer()
			a := s.read()
			syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru0)
			for range procs {
				tc.loop()
			}
			syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru1)
			z := s.read()
			b.StopTimer()
			reqs := procs * tc.per // logins (two round trips each) or tickets
			gen := float64(ru1.Utime.Nano()-ru0.Utime.Nano()+ru1.Stime.Nano()-ru0.Stime.Nano()) / 1e3 / float64(reqs)
			u := cpuUse(a, z, reqs)
			b.ReportMetric(gen, "gen-cpu-us/op")
			b.ReportMetric(u.KDCPerRequestUS, "kdc-cpu-us/op")
			if u.KDCPerRequestUS > 0 {
				b.ReportMetric(gen/u.KDCPerRequestUS, "gen/kdc")
			}
			b.ReportMetric(u.KDCCoresBusyPct, "kdc-busy-%")
			b.ReportMetric(float64(reqs)/(z.At-a.At).Seconds(), "req/s")
		})
	}
}
