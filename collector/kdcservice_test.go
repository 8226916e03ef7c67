package collector

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"

	"github.com/krb5-exporter/krb5-exporter/internal/kdcbpf"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// The kdcservice tests run the collector's BPF program against a harness
// KDC under real load. They need root (CAP_BPF, CAP_PERFMON): outside CI
// they skip where the kernel does not let this process load the program;
// in CI they fail.

// serviceCollector is a collector with the kdcservice collector on for
// r's KDC, scraped once so that it watches the KDC's processes.
func serviceCollector(t *testing.T, r *realm.Realm) (*KDCCollector, *kdcServiceCollector, *prometheus.Registry) {
	t.Helper()
	cfg := realmConfig(r)
	cfg.KDCService = true
	logs := &testutil.LockedBuffer{}
	c, err := New(log.NewLogfmtLogger(logs), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var ks *kdcServiceCollector
	for _, nc := range c.collectors {
		if k, ok := nc.c.(*kdcServiceCollector); ok {
			ks = k
		}
	}
	if ks.tracer == nil {
		var reason string
		for r := range ks.errs {
			reason = r
		}
		if !testutil.InCI() && (reason == kdcbpf.ReasonPermission || reason == kdcbpf.ReasonUnsupportedKernel) {
			t.Skipf("BPF not permitted here (%s): %s", reason, logs.String())
		}
		t.Fatalf("the kdcservice program did not load: %s", logs.String())
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	if s := gather(t, reg); s.Value("krb5_kdc_service_tracing_up") != 1 {
		t.Fatal("krb5_kdc_service_tracing_up is not 1 with the KDC running")
	}
	return c, ks, reg
}

// mitEnv is the environment of MIT's kinit and kvno against r, with a
// credential cache of the test's own; tcp sends over TCP only.
func mitEnv(t *testing.T, r *realm.Realm, tcp bool) []string {
	t.Helper()
	env := append(os.Environ(), r.Env()...)
	env = append(env, "KRB5CCNAME=FILE:"+filepath.Join(t.TempDir(), "cc"))
	if tcp {
		conf := filepath.Join(t.TempDir(), "tcp.conf")
		if err := os.WriteFile(conf, []byte("[libdefaults]\n\tudp_preference_limit = 1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		for i, e := range env {
			if v, ok := strings.CutPrefix(e, "KRB5_CONFIG="); ok {
				env[i] = "KRB5_CONFIG=" + conf + ":" + v
			}
		}
	}
	return env
}

func run(t *testing.T, env []string, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v %s", name, err, out)
	}
}

// mitLoad is MIT's own clients against r: logins (kinit, each one AS
// exchange of two or three requests) and, after each, a ticket for every
// service (kvno: TGS requests).
func mitLoad(t *testing.T, r *realm.Realm, env []string, logins int) {
	t.Helper()
	svcs := make([]string, r.Opts.Services)
	for i := range svcs {
		svcs[i] = r.Service(i + 1)
	}
	for i := range logins {
		run(t, env, "kinit", "-k", "-t", r.UserKeytab, r.User(i%r.Opts.Users+1))
		run(t, env, "kvno", svcs...)
	}
}

// TestKDCServiceCountsLog: the requests the collector timed, by type,
// are the KDC log's request lines of the same interval, exactly, for UDP
// (unknown-principal AS requests, MIT kinit's and kvno's) and for TCP
// (kinit and kvno over TCP: each read of a whole request is one). Per
// worker (krb5kdc -w 2, both on one CPU, the clients on the other) the
// program's on-CPU time in service plus outside service (the event loop,
// the receive and send calls' own work, the wakeups of the worker that
// loses the race for a datagram both were woken for) is the worker's run
// time from /proc/PID/schedstat over the same interval: never above it
// (+1 % for the two clocks; above would be time counted twice), and with
// the time the program saw it runnable waiting for a CPU, it is run time
// plus run delay: never above, 0-3.4 % short in 48 of 52 samples,
// 4.7-8.7 % in 3 and 10.4 % once (a wait the kernel counts that the
// program does not see: not found), so the floor is 85 %. The run time
// alone is 1-14 % more than the on-CPU time (16-19 % under the race
// detector; hence its floor of 75 %), by our reading of the kernel
// (not traced to the instruction) because when a wakeup preempts a running
// task, the kernel skips the clock update of the switch that follows
// (rq_clock_skip_update), so the woken worker is charged as run time the
// wait from its wakeup to its switch in, which schedstat then leaves out
// of its run delay; their sum does not move. Without the pinning, on a
// machine others load, the run time alone was up to 55 % above. Broken on
// purpose (each stretch outside service dropped at the switch out) the
// on-CPU time was 62-70 % of the run time. The outside part is the
// minority (30-47 % per worker measured: most requests are
// unknown-principal AS requests of 16 µs, beside which the loop's few µs
// weigh).
//
// The CPU sums need the machine to itself: beside the race run (two busy
// loops were enough) a worker's on-CPU time and waits read 84 % of the
// kernel's, so scripts/test-alone.sh runs it.
func TestKDCServiceCountsLog(t *testing.T) {
	testutil.Alone(t)
	r := upRealm(t, 2, false)
	pinApart(t, r)
	// Every way the program can see receives and sends that this kernel
	// has (kdcbpf.HookModes).
	for _, mode := range kdcbpf.HookModes {
		t.Run(mode, func(t *testing.T) {
			requireHooks(t, mode)
			countsLog(t, r)
		})
	}
}

// requireHooks makes the kdcservice program of this test use the hooks
// of mode, or skips where the kernel may lack them and does (fentry and
// kprobes: the Debian 12 VM test runs them).
func requireHooks(t *testing.T, mode string) {
	t.Helper()
	testutil.Tracefs(t)
	t.Setenv(kdcbpf.HooksEnv, mode)
	if !kdcbpf.KernelMayLack(mode) {
		return
	}
	tr, err := kdcbpf.Load()
	if err != nil {
		t.Skipf("this kernel has no %s hooks: %v", mode, err)
	}
	tr.Close()
}

func countsLog(t *testing.T, r *realm.Realm) {
	_, ks, reg := serviceCollector(t, r)
	if want := os.Getenv(kdcbpf.HooksEnv); want != "" && ks.tracer.Hooks != want {
		t.Fatalf("traced with %s hooks, want %s", ks.tracer.Hooks, want)
	}
	if s := gather(t, reg); s.Value("krb5_kdc_service_tracing_info", "hooks", ks.tracer.Hooks) != 1 {
		t.Errorf("krb5_kdc_service_tracing_info{hooks=%q} is not 1", ks.tracer.Hooks)
	}
	pids := r.KDCPids()
	if len(pids) != 3 {
		t.Fatalf("KDC pids %v, want supervisor and 2 workers", pids)
	}
	// The kernel's run time and run delay of each worker, ns.
	runNS := func() (run, delay map[int]float64) {
		run, delay = map[int]float64{}, map[int]float64{}
		for _, p := range pids[1:] {
			ss, err := procOf(t, p).Schedstat()
			if err != nil {
				t.Fatal(err)
			}
			run[p] = float64(ss.RunningNanoseconds)
			delay[p] = float64(ss.WaitingNanoseconds)
		}
		return run, delay
	}
	// One of the program's per-worker totals that are no metric (see
	// kdcbpf.Worker), ns: its runnable waits, its stolen time (on CPU by
	// the clock, charged to no task).
	workerNS := func(field func(*kdcbpf.Worker) uint64) map[int]float64 {
		m := map[int]float64{}
		for _, p := range pids[1:] {
			idx, _ := ks.slots.Index(p)
			if w := ks.byIdx[idx]; w != nil {
				m[p] = float64(field(w))
			}
		}
		return m
	}
	waitNS := func() map[int]float64 { return workerNS(func(w *kdcbpf.Worker) uint64 { return w.Runqueue }) }
	stolenNS := func() map[int]float64 { return workerNS(func(w *kdcbpf.Worker) uint64 { return w.Stolen }) }
	// The time every CPU of the host was charged to no task, the kernel's
	// own account (/proc/stat: steal, and irq and softirq that a kernel
	// with IRQ time accounting also leaves out of tasks' run time), ns.
	hostLostNS := func() float64 {
		fs, err := procfs.NewDefaultFS()
		if err != nil {
			t.Fatal(err)
		}
		st, err := fs.Stat()
		if err != nil {
			t.Fatal(err)
		}
		return 1e9 * (st.CPUTotal.Steal + st.CPUTotal.IRQ + st.CPUTotal.SoftIRQ)
	}
	// The exported per-worker on-CPU seconds, in service and outside, ns.
	cpuByWorker := func(s *scrape) (in, out map[int]float64) {
		in, out = map[int]float64{}, map[int]float64{}
		for _, p := range pids[1:] {
			idx, ok := ks.slots.Index(p)
			if !ok {
				t.Fatalf("worker pid %d has no index", p)
			}
			// Absent before the worker's first request: 0.
			w := strconv.Itoa(idx)
			v, _ := s.Find("krb5_kdc_worker_service_cpu_seconds_total", "worker", w)
			in[p] = 1e9 * v
			v, _ = s.Find("krb5_kdc_worker_outside_service_cpu_seconds_total", "worker", w)
			out[p] = 1e9 * v
		}
		return in, out
	}
	countOf := func(s *scrape, req, tr string) float64 {
		return s.Value(MetricKDCServiceSeconds, "request", req, "transport", tr)
	}
	from := testutil.LogSize(t, r.KDCLog)
	s0 := gather(t, reg)
	r0, d0 := runNS()
	c0, o0 := cpuByWorker(s0)
	w0 := waitNS()
	st0, h0 := stolenNS(), hostLostNS()

	as0 := ks.snap.Service[kdcbpf.RequestAS][kdcbpf.TransportUDP]
	rtt := freshAS(t, r, 300)
	gather(t, reg)
	t.Logf("one request at a time: the client's median round trip %v, the KDC's median service time at most %.3g ms", rtt, median(diff(ks.snap.Service[kdcbpf.RequestAS][kdcbpf.TransportUDP], as0))*1e3)
	mitLoad(t, r, mitEnv(t, r, false), 10)

	s1 := gather(t, reg)
	r1, d1 := runNS()
	c1, o1 := cpuByWorker(s1)
	w1 := waitNS()
	st1, h1 := stolenNS(), hostLostNS()
	mid := testutil.LogSize(t, r.KDCLog)
	as := testutil.LogCount(t, r.KDCLog, from, `\bAS_REQ\b`)
	tgs := testutil.LogCount(t, r.KDCLog, from, `\bTGS_REQ\b`)
	gotAS := countOf(s1, "as", "udp") - countOf(s0, "as", "udp")
	gotTGS := countOf(s1, "tgs", "udp") - countOf(s0, "tgs", "udp")
	t.Logf("UDP: log AS_REQ %d TGS_REQ %d; timed AS %v TGS %v", as, tgs, gotAS, gotTGS)
	if gotAS != float64(as) || gotTGS != float64(tgs) {
		t.Errorf("UDP requests timed: AS %v TGS %v; the KDC logged AS_REQ %d TGS_REQ %d", gotAS, gotTGS, as, tgs)
	}
	for _, tr := range []string{"udp", "tcp"} {
		if d := countOf(s1, "other", tr) - countOf(s0, "other", tr); d != 0 {
			t.Errorf("%v requests of no known type over %s", d, tr)
		}
	}
	if d := countOf(s1, "as", "tcp") + countOf(s1, "tgs", "tcp") - countOf(s0, "as", "tcp") - countOf(s0, "tgs", "tcp"); d != 0 {
		t.Errorf("%v TCP requests timed with only UDP sent", d)
	}

	// Per worker: on CPU in service plus outside it against schedstat: the
	// kernel's run time, which leaves out what the hypervisor stole (the
	// program's stolen), so that the two agree on a VM too. Summed over
	// the workers within 75-101 %; each worker within 70-110 %: under
	// heavy steal a few ms of it can land on the other worker sharing the
	// CPU (CI saw -13 % and +2.6 % with 140 ms stolen on the host, -5.4 %
	// together), while counting steal as CPU was +10 % to +45 %.
	var inAll, outAll, stolenAll, onAll, runAll float64
	for i, p := range pids[1:] {
		run, delay := r1[p]-r0[p], d1[p]-d0[p]
		cpu, out, wait, stolen := c1[p]-c0[p], o1[p]-o0[p], w1[p]-w0[p], st1[p]-st0[p]
		stolenAll += stolen
		t.Logf("worker %d (pid %d): on CPU in service %.3f ms + outside %.3f ms = %.3f ms, schedstat run time %.3f ms (%+.2f %%); outside %.1f %%; + waiting %.3f ms = %.3f ms, schedstat run + delay %.3f ms (%+.2f %%); stolen %.3f ms",
			i, p, cpu/1e6, out/1e6, (cpu+out)/1e6, run/1e6, 100*(cpu+out-run)/run, 100*out/(cpu+out),
			wait/1e6, (cpu+out+wait)/1e6, (run+delay)/1e6, 100*(cpu+out+wait-run-delay)/(run+delay), stolen/1e6)
		if run < 5e6 {
			t.Errorf("worker %d ran only %.1f ms", i, run/1e6)
			continue
		}
		if cpu+out > 1.10*run || cpu+out < 0.70*run {
			t.Errorf("worker %d: on CPU %.3f ms (in service %.3f + outside %.3f) against the kernel's run time %.3f ms: want 70-110 %%", i, (cpu+out)/1e6, cpu/1e6, out/1e6, run/1e6)
		}
		onAll += cpu + out
		runAll += run
		if got, want := cpu+out+wait, run+delay; got > 1.01*want || got < 0.85*want {
			t.Errorf("worker %d: on CPU %.3f ms + waiting for a CPU %.3f ms = %.3f ms against the kernel's run time + run delay %.3f ms: want 85-101 %%", i, (cpu+out)/1e6, wait/1e6, got/1e6, want/1e6)
		}
		inAll += cpu
		outAll += out
	}
	if onAll > 1.01*runAll || onAll < 0.75*runAll {
		t.Errorf("the workers on CPU %.3f ms against the kernel's run time %.3f ms: want 75-101 %%", onAll/1e6, runAll/1e6)
	}
	// What the workers had stolen is part of what the host's CPUs were
	// charged to no task in the same time (/proc/stat counts in ticks of
	// 10 ms: one more per CPU).
	hostLost := h1 - h0
	t.Logf("stolen from the workers %.3f ms; the host's CPUs charged to no task %.3f ms", stolenAll/1e6, hostLost/1e6)
	if slack := float64(runtime.NumCPU()) * 10e6; stolenAll < 0 || stolenAll > hostLost+slack {
		t.Errorf("the workers had %.3f ms stolen, the host's CPUs %.3f ms (+ %.0f ms of ticks) charged to no task", stolenAll/1e6, hostLost/1e6, slack/1e6)
	}
	if outAll >= inAll {
		t.Errorf("on CPU outside service %.3f ms, in service %.3f ms: want the outside the minority", outAll/1e6, inAll/1e6)
	}
	// The split adds up to the service time.
	var sum, split float64
	for _, m := range s1.MFs[MetricKDCServiceSeconds].GetMetric() {
		sum += m.GetHistogram().GetSampleSum()
	}
	for _, req := range []string{"as", "tgs", "other"} {
		for _, st := range []string{"cpu", "runqueue", "blocked", "stolen"} {
			split += s1.Value("krb5_kdc_request_service_split_seconds_total", "request", req, "state", st)
		}
	}
	if math.Abs(sum-split) > 1e-6*sum {
		t.Errorf("service seconds %.9f, split %.9f", sum, split)
	}

	// TCP: MIT's clients told to use it.
	mitLoad(t, r, mitEnv(t, r, true), 3)
	s2 := gather(t, reg)
	as = testutil.LogCount(t, r.KDCLog, mid, `\bAS_REQ\b`)
	tgs = testutil.LogCount(t, r.KDCLog, mid, `\bTGS_REQ\b`)
	gotAS = countOf(s2, "as", "tcp") - countOf(s1, "as", "tcp")
	gotTGS = countOf(s2, "tgs", "tcp") - countOf(s1, "tgs", "tcp")
	t.Logf("TCP: log AS_REQ %d TGS_REQ %d; timed AS %v TGS %v", as, tgs, gotAS, gotTGS)
	if gotAS != float64(as) || gotTGS != float64(tgs) {
		t.Errorf("TCP requests timed: AS %v TGS %v; the KDC logged AS_REQ %d TGS_REQ %d", gotAS, gotTGS, as, tgs)
	}
	// Per worker, the requests add up to the timed ones.
	var perWorker, all float64
	for idx := range 2 {
		perWorker += s2.Value("krb5_kdc_worker_service_requests_total", "worker", strconv.Itoa(idx))
	}
	for _, req := range []string{"as", "tgs", "other"} {
		for _, tr := range []string{"udp", "tcp"} {
			all += countOf(s2, req, tr)
		}
	}
	if perWorker != all {
		t.Errorf("per-worker requests %v, all requests %v", perWorker, all)
	}
	// Every receive's return seen: no hook mode counts a miss of its own.
	if m := s2.Value("krb5_kdc_service_tracing_errors_total", "reason", "missed_return"); m != 0 {
		t.Errorf("%v receives' returns missed with the %s hooks and nothing else in a receive", m, ks.tracer.Hooks)
	}
}

// freshAS sends n AS requests for principals that do not exist over UDP,
// each made anew (its own nonce: the KDC's lookaside cache answers a
// repeated packet without processing it), each waiting up to 2 s for its
// answer, bounded by 20 s. It returns the median round trip (from the
// send to the answer's arrival).
func freshAS(t *testing.T, r *realm.Realm, n int) time.Duration {
	t.Helper()
	conn, _ := asConn(t, r, "collector-fresh")
	defer conn.Close()
	buf := make([]byte, 4096)
	deadline := time.Now().Add(20 * time.Second)
	var rtts []time.Duration
	for i := 0; i < n && time.Now().Before(deadline); i++ {
		b, err := realm.ASRequest(r.Realm, "collector-fresh-"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		sent := time.Now()
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := conn.Read(buf); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal(err)
		}
		rtts = append(rtts, time.Since(sent))
	}
	slices.Sort(rtts)
	return rtts[len(rtts)/2]
}

// median is the upper bound of the bucket holding h's median, in seconds.
func median(h kdcbpf.Hist) float64 {
	var n uint64
	for b, c := range h.Buckets {
		if n += c; 2*n >= h.Count && h.Count > 0 {
			return kdcbpf.UpperBound(b)
		}
	}
	return math.NaN()
}

// diff is a-b, bucket by bucket.
func diff(a, b kdcbpf.Hist) kdcbpf.Hist {
	d := kdcbpf.Hist{Count: a.Count - b.Count, Sum: a.Sum - b.Sum, CPU: a.CPU - b.CPU, Runqueue: a.Runqueue - b.Runqueue, Blocked: a.Blocked - b.Blocked, Stolen: a.Stolen - b.Stolen}
	for i := range d.Buckets {
		d.Buckets[i] = a.Buckets[i] - b.Buckets[i]
	}
	return d
}

// phase is the AS/UDP service and UDP queue histograms of what happened
// while load ran.
func phase(t *testing.T, ks *kdcServiceCollector, reg prometheus.Gatherer, load func()) (svc, queue kdcbpf.Hist) {
	t.Helper()
	gather(t, reg)
	s0, q0 := ks.snap.Service[kdcbpf.RequestAS][kdcbpf.TransportUDP], ks.snap.Queue[kdcbpf.TransportUDP]
	load()
	gather(t, reg)
	return diff(ks.snap.Service[kdcbpf.RequestAS][kdcbpf.TransportUDP], s0), diff(ks.snap.Queue[kdcbpf.TransportUDP], q0)
}

func share(part, h uint64) float64 { return float64(part) / float64(max(h, 1)) }

// TestKDCServiceSlowDisk: MIT kinit logins against a KDC writing
// last_success (its database synced after each login), traced by strace
// alone and then with each fsync delayed 5 ms (strace -e inject): the
// logins' service time and the blocked part of it go up by the delays. strace is attached in
// both phases, so that its own stops fall on both.
func TestKDCServiceSlowDisk(t *testing.T) {
	testutil.Alone(t) // strace's stops and the delays timed: under the race run, its neighbours' load moved them
	testutil.RequireProgram(t, "strace")
	r := upRealm(t, 0, false)
	_, ks, reg := serviceCollector(t, r)
	kdc := r.KDCPids()[0]
	env := mitEnv(t, r, false)
	// traced runs 20 logins under strace and returns their service times
	// and how many syncs strace saw the KDC make.
	traced := func(inject bool) (svc kdcbpf.Hist, syncs int) {
		var delay time.Duration
		if inject {
			delay = 5 * time.Millisecond
		}
		stop := testutil.StraceSyncs(t, kdc, delay)
		svc, _ = phase(t, ks, reg, func() {
			for i := range 20 {
				run(t, env, "kinit", "-k", "-t", r.UserKeytab, r.User(i%r.Opts.Users+1))
			}
		})
		return svc, stop()
	}
	// 20 logins sync at least 20 times (one last_success write each):
	// 100 ms more over the phase, spent blocked (the KDC stopped while
	// strace sleeps); at least 3 ms of each sync strace saw (its own
	// count) must show. The shares are not compared: on a loaded machine
	// the runqueue part moves as much (strace alone: 49 % blocked, 35 %
	// runqueue at a load average of 7), so the service time is compared
	// less its wait for a CPU: beside make test's race run the runqueue
	// part fell from 37 to 18 ms between the phases and the whole service
	// time rose 51 ms, the rest of it 70. The real disk's syncs vary as
	// much on a shared VM (the phase without delays took 110 to 250 ms):
	// up to 3 pairs of phases, one of which must show it.
	var fails []string
	for pair := 1; pair <= 3; pair++ {
		plain, _ := traced(false)
		slow, syncs := traced(true)
		for name, h := range map[string]kdcbpf.Hist{"strace alone": plain, "fsync delayed 5 ms": slow} {
			t.Logf("pair %d, %s: %d AS requests, mean service %.2f ms, median at most %.3g ms; blocked %.0f %%, runqueue %.0f %%, cpu %.0f %%", pair, name, h.Count,
				float64(h.Sum)/float64(max(h.Count, 1))/1e6, median(h)*1e3, 100*share(h.Blocked, h.Sum), 100*share(h.Runqueue, h.Sum), 100*share(h.CPU, h.Sum))
		}
		if plain.Count == 0 || slow.Count == 0 {
			t.Fatal("no AS request timed")
		}
		if syncs < 10 {
			t.Fatalf("strace saw the KDC sync %d times in 20 logins with last_success on, want at least 10", syncs)
		}
		more := 3e6 * float64(syncs)
		fails = fails[:0]
		if own, ownPlain := slow.Sum-slow.Runqueue, plain.Sum-plain.Runqueue; float64(own) < float64(ownPlain)+more {
			fails = append(fails, fmt.Sprintf("service time less its CPU wait %.1f ms with fsync delayed 5 ms, %.1f ms without: want at least %.0f ms more (3 ms for each of %d syncs)", float64(own)/1e6, float64(ownPlain)/1e6, more/1e6, syncs))
		}
		if float64(slow.Blocked) < float64(plain.Blocked)+more {
			fails = append(fails, fmt.Sprintf("blocked %.1f ms of %.1f with fsync delayed, %.1f ms of %.1f without: want at least %.0f ms more (3 ms for each of %d syncs)",
				float64(slow.Blocked)/1e6, float64(slow.Sum)/1e6, float64(plain.Blocked)/1e6, float64(plain.Sum)/1e6, more/1e6, syncs))
		}
		if len(fails) == 0 {
			return
		}
		t.Logf("pair %d: %s", pair, strings.Join(fails, "; "))
	}
	t.Errorf("3 pairs of phases: %s", strings.Join(fails, "; "))
}

// TestKDCServiceContention: the KDC pinned to CPU 0 kept busy (fresh AS
// requests sent faster than it answers, so that it never sleeps and the
// scheduler's favour for waking tasks plays no part), alone and beside
// four busy loops pinned to the same CPU: the runqueue share of its
// service time goes up (0 -> 74 %, 40 -> 93 % on a machine loaded by
// others). It compares loads, so it runs in scripts/test-alone.sh: beside
// the race run (a load average of 16 on 2 cores) the KDC alone already
// waited 76-84 % of its service time.
func TestKDCServiceContention(t *testing.T) {
	testutil.Alone(t)
	testutil.RequireProgram(t, "taskset")
	r := upRealm(t, 0, false)
	_, ks, reg := serviceCollector(t, r)
	// The KDC on CPU 0, the generator (this process) off it.
	pinApart(t, r)
	const perPhase = 8000
	pkts := make([][]byte, 2*perPhase)
	for i := range pkts {
		b, err := realm.ASRequest(r.Realm, "collector-busy-"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		pkts[i] = b
	}
	next := 0
	load := func() {
		conn, _ := asConn(t, r, "collector-busy")
		defer conn.Close()
		stop := drain(conn)
		last := next + perPhase
		for end := time.Now().Add(500 * time.Millisecond); time.Now().Before(end) && next < last; {
			for range 32 {
				conn.Write(pkts[next])
				next++
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(50 * time.Millisecond)
		stop()
	}
	alone, _ := phase(t, ks, reg, load)
	var stops []func()
	for range 4 {
		stops = append(stops, hog(t, 0))
	}
	busy, _ := phase(t, ks, reg, load)
	for _, stop := range stops {
		stop()
	}
	for name, h := range map[string]kdcbpf.Hist{"alone": alone, "4 busy loops": busy} {
		t.Logf("%s: %d AS requests, mean service %.3f ms; runqueue %.0f %%, cpu %.0f %%, blocked %.0f %%", name, h.Count,
			float64(h.Sum)/float64(max(h.Count, 1))/1e6, 100*share(h.Runqueue, h.Sum), 100*share(h.CPU, h.Sum), 100*share(h.Blocked, h.Sum))
	}
	if a, b := share(alone.Runqueue, alone.Sum), share(busy.Runqueue, busy.Sum); b < a+0.2 {
		t.Errorf("runqueue share %.2f beside 4 busy loops, %.2f alone: want at least 0.2 more", b, a)
	}
}

// pinApart puts r's KDC processes on CPU 0 and this process (the load
// generator, and the clients it starts) on the others, where the machine
// has more than one, so that a client's work does not land between a
// worker's wakeup and its switch in (see countsLog).
func pinApart(t *testing.T, r *realm.Realm) {
	t.Helper()
	if runtime.NumCPU() < 2 {
		return
	}
	testutil.RequireProgram(t, "taskset")
	for _, p := range r.KDCPids() {
		if out, err := exec.Command("taskset", "-a", "-p", "-c", "0", strconv.Itoa(p)).CombinedOutput(); err != nil {
			t.Fatalf("taskset: %v %s", err, out)
		}
	}
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("taskset", "-a", "-p", "-c", "1-"+strconv.Itoa(runtime.NumCPU()-1), strconv.Itoa(os.Getpid())).CombinedOutput(); err != nil {
		t.Fatalf("taskset: %v %s", err, out)
	}
	t.Cleanup(func() {
		for _, tid := range threadsOf(t, os.Getpid()) {
			unix.SchedSetaffinity(tid, &old)
		}
	})
}

// threadsOf lists pid's threads.
func threadsOf(t *testing.T, pid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	if err != nil {
		t.Fatal(err)
	}
	var tids []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, n)
		}
	}
	return tids
}

// TestKDCServiceStopped: requests sent at a steady pace while the KDC is
// stopped (SIGSTOP) 40 ms out of every 80: their queue time goes up, by
// more than 5 ms on average (about 10: half of them wait 20 ms on average,
// the rest none), while their service time stays (its median
// within a factor of 2).
func TestKDCServiceStopped(t *testing.T) {
	testutil.Alone(t) // queue times against a running KDC's: under the race run, load gave the running one 121 ms
	r := upRealm(t, 0, false)
	_, ks, reg := serviceCollector(t, r)
	kdc := r.KDCPids()[0]
	pkts := make([][]byte, 1200)
	for i := range pkts {
		b, err := realm.ASRequest(r.Realm, "collector-paced-"+strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		pkts[i] = b
	}
	next := 0
	paced := func(stops bool) func() {
		return func() {
			conn, _ := asConn(t, r, "collector-paced")
			defer conn.Close()
			done := make(chan struct{})
			go func() {
				defer close(done)
				buf := make([]byte, 4096)
				for {
					if _, err := conn.Read(buf); err != nil && !errors.Is(err, syscall.ECONNREFUSED) {
						return
					}
				}
			}()
			stopper := make(chan struct{})
			if stops {
				go func() {
					defer syscall.Kill(kdc, syscall.SIGCONT)
					for {
						select {
						case <-stopper:
							return
						case <-time.After(40 * time.Millisecond):
						}
						syscall.Kill(kdc, syscall.SIGSTOP)
						time.Sleep(40 * time.Millisecond)
						syscall.Kill(kdc, syscall.SIGCONT)
					}
				}()
			}
			for end := time.Now().Add(time.Second); time.Now().Before(end) && next < len(pkts); next++ {
				conn.Write(pkts[next])
				time.Sleep(2 * time.Millisecond)
			}
			close(stopper)
			time.Sleep(100 * time.Millisecond) // the last answers
			conn.SetReadDeadline(time.Now())
			<-done
		}
	}
	svcA, qA := phase(t, ks, reg, paced(false))
	svcB, qB := phase(t, ks, reg, paced(true))
	t.Logf("running: %d requests, median service at most %.3g ms, %d queue times, median at most %.3g ms, mean %.2f ms", svcA.Count, median(svcA)*1e3, qA.Count, median(qA)*1e3, float64(qA.Sum)/float64(max(qA.Count, 1))/1e6)
	t.Logf("stopped in bursts: %d requests, median service at most %.3g ms, %d queue times, median at most %.3g ms, mean %.2f ms", svcB.Count, median(svcB)*1e3, qB.Count, median(qB)*1e3, float64(qB.Sum)/float64(max(qB.Count, 1))/1e6)
	if qA.Count == 0 || qB.Count == 0 {
		t.Fatal("no queue time measured")
	}
	mean := func(h kdcbpf.Hist) float64 { return float64(h.Sum) / float64(max(h.Count, 1)) / 1e9 }
	if mean(qB) < mean(qA)+5e-3 {
		t.Errorf("mean queue time %.3g ms stopped in bursts, %.3g ms running: want 5 ms more", mean(qB)*1e3, mean(qA)*1e3)
	}
	if median(svcB) > 2*median(svcA) {
		t.Errorf("median service time at most %.3g ms stopped in bursts, %.3g ms running: want within a factor of 2", median(svcB)*1e3, median(svcA)*1e3)
	}
}

// TestKDCServiceCapabilitiesSuffice: CAP_BPF and CAP_PERFMON are all the
// kdcservice collector needs (what packaging/files/kdcservice.conf
// grants): a copy of this test binary as nobody with those two ambient
// capabilities loads and attaches the program (tracing up, no error),
// where as plain nobody it cannot (TestIntegrationUnprivileged).
func TestKDCServiceCapabilitiesSuffice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start the child as nobody")
	}
	r := upRealm(t, 0, false)
	serviceCollector(t, r) // skips where BPF is not permitted at all
	dir, err := os.MkdirTemp("", "krb5-exporter-caps-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "collector.test")
	copyFileMode(t, os.Args[0], bin, 0o755)
	cfg := realmConfig(r)
	cfg.Process, cfg.Network, cfg.KDCConf, cfg.Replication, cfg.KDCService = true, false, false, false, true
	dst := filepath.Join(dir, "krb5kdc.pid")
	copyFileMode(t, cfg.KDCPidFile, dst, 0o644)
	cfg.KDCPidFile = dst
	spec, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "metrics.txt")
	const capPerfmon, capBPF = 38, 39
	cmd := exec.Command(bin, "-test.run=^TestUnprivilegedChild$", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec), childEnv+"_OUT="+out)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}, AmbientCaps: []uintptr{capBPF, capPerfmon}}
	if log, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("child: %v\n%s", err, log)
	} else if strings.Contains(string(log), "cannot trace") {
		t.Errorf("the child with CAP_BPF and CAP_PERFMON could not trace:\n%s", log)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "\nkrb5_kdc_service_tracing_up 1\n") {
		t.Errorf("krb5_kdc_service_tracing_up is not 1 as nobody with CAP_BPF and CAP_PERFMON:\n%s", b)
	}
}
