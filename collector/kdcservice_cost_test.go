package collector

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/krb5-exporter/krb5-exporter/internal/kdcbpf"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5/krb5test"
	"github.com/krb5-exporter/krb5-exporter/internal/loadgen"
	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestKDCServiceCost measures what the kdcservice program costs, side by
// side in one run, with the program loaded once per way of seeing
// receives and sends (kdcbpf.HookModes) and detached and attached in
// alternated rounds (off-on, then on-off: pairs that cancel a drift):
//
//   - the host: a thread of this process pinned to the last CPU, unrelated
//     to the KDC, times getpid and 1-byte reads of /dev/zero, 25 batches
//     of 2,000 calls each per round and 8 pairs of rounds; a round's
//     figure is its batches' lower quartile (a batch another task preempted
//     or the hypervisor stole from is slow, never fast), each pair's ratio
//     on/off, and the median of the 8 ratios must be at most 1.05;
//   - the KDC: the bench's batched generator (internal/loadgen, 32 in
//     flight) drives a single-process harness KDC pinned to CPU 0 at full
//     speed with tgs tickets (its cheapest request: the largest share for
//     the program), this process (the generator, the measurement) pinned
//     to the last CPU, in rounds of three 100 ms phases
//     (KRB5_EXPORTER_KDCSERVICE_COST_PHASE: longer): detached, attached,
//     and attached with the kernel's BPF run-time statistics on (off, on,
//     accounted; the next round the other way round), 60 rounds. The
//     KDC's CPU per request in a phase is its schedstat run time (which
//     includes the programs run in its context) over the phase divided
//     by the requests it logged in the phase (its own count, at the same
//     instants: the clients' count of answers lags by the requests in
//     flight). The median of the rounds' on/off ratios, the statistics
//     (two clock reads a program run) off in both, is the whole cost: the
//     programs' time and what they cost the KDC's own code (caches). It
//     must be at most 1.02 with the socket hooks (the goal; 1.05 with the
//     others, measured only in the emulated VM, whose pairs spread too
//     far for 2 %); a run over it is measured again, up to twice: a run's
//     median moves by about ±1 % on this shared 2-core machine, and about
//     one run in four of the program at +1.5 % is over 2 % (docs/bench.md).
//     By the kernel's own account, in the accounted phases, the programs'
//     run time per request, wherever they ran, must be at most 2 % of the
//     KDC's CPU per request off with the socket hooks (5 % with the
//     others).
//
// The modes that hook system calls, tracepoint and syscalls, put every
// system call of the host on the kernel's slow path, and tracepoint adds
// a perf record to the receive and send calls: far above 5 %. Unless
// kdcbpf.HooksEnv forces one mode (then everything above is asserted of
// it: forced to tracepoint or syscalls the test fails), they are measured
// here for the host only, and the test asserts that it sees their tax:
// above 5 %, so that the host measurement is shown able to fail in every
// run. About 30 s.
func TestKDCServiceCost(t *testing.T) {
	testutil.Alone(t)
	r := realmtest.Realm(t, realm.Options{Users: 200, Services: 20, Fillers: -1, NoKadmind: true, DisableLastSuccess: true})
	testutil.Tracefs(t)
	modes := kdcbpf.HookModes
	forced := os.Getenv(kdcbpf.HooksEnv)
	if forced != "" {
		modes = []string{forced}
	}
	kdc := r.KDCPids()[0]
	if out, err := exec.Command("taskset", "-a", "-p", "-c", "0", strconv.Itoa(kdc)).CombinedOutput(); err != nil {
		t.Fatalf("taskset: %v %s", err, out)
	}
	cfg := costConfig(t, r)
	ran := 0
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			requireHooks(t, mode)
			tr, err := kdcbpf.Load()
			if err != nil {
				var e *kdcbpf.Error
				if !testutil.InCI() && errors.As(err, &e) && e.Reason == kdcbpf.ReasonPermission {
					t.Skipf("BPF not permitted here: %v", err)
				}
				t.Fatal(err)
			}
			defer tr.Close()
			if err := tr.Watch([]int{kdc}); err != nil {
				t.Fatal(err)
			}
			ran++
			host, worst := hostTax(t, tr)
			if kdcbpf.TaxesHost(mode) && forced == "" {
				t.Logf("%s hooks: the host's system calls %s", mode, host)
				if worst <= 1.05 {
					t.Errorf("%s hooks: the host's system calls %s: the measurement does not see the slow path they are put on", mode, host)
				}
				return
			}
			// A neighbour that starts mid-measurement moves the later
			// pairs (seen in a clean CI run: pairs 1.00 ... 1.26 1.19 with
			// the socket hooks, +2 % at most in every other): a cheap mode
			// over the limit is measured once more, and fails only if it is
			// over it again. The taxing modes above still show their tax.
			if worst > 1.05 {
				t.Logf("%s hooks: the host's system calls %s: measured again", mode, host)
				host, worst = hostTax(t, tr)
			}
			if worst > 1.05 {
				t.Errorf("with the program attached an unrelated process's system calls are slower: %s; want at most 5 %%", host)
			}
			// The goal, 2 %, with the socket hooks; the others are measured
			// only in the emulated VM, where a run's pairs spread too far
			// for it.
			want := 1.05
			if mode == kdcbpf.HooksSocket {
				want = 1.02
			}
			ratio, off, on, prog := kdcCost(t, tr, cfg, kdc, r.KDCLog)
			for again := 0; ratio > want && again < 2; again++ {
				t.Logf("%s hooks: the KDC's CPU per tgs request %.1f µs off, %.1f µs on, %+.1f %%: measured again", mode, off, on, 100*(ratio-1))
				ratio, off, on, prog = kdcCost(t, tr, cfg, kdc, r.KDCLog)
			}
			t.Logf("%s hooks: the host's system calls %s; the KDC's CPU per tgs request %.1f µs off, %.1f µs on: %+.1f %% (median of the pairs' ratios); the programs' own run time %.2f µs per request (%.2f %% of the KDC's CPU off)",
				mode, host, off, on, 100*(ratio-1), prog, 100*prog/off)
			if ratio > want {
				t.Errorf("%s hooks cost the KDC %+.1f %% CPU per request (three runs over), want at most %.0f %%", mode, 100*(ratio-1), 100*(want-1))
			}
			limit := 0.05
			if mode == kdcbpf.HooksSocket {
				limit = 0.02
			}
			if prog > limit*off || prog <= 0 {
				t.Errorf("%s hooks: the programs ran %.2f µs per KDC request by the kernel's account, %.2f %% of its %.1f µs: want above 0 and at most %.0f %%", mode, prog, 100*prog/off, off, 100*limit)
			}
		})
	}
	if ran == 0 && testutil.InCI() {
		t.Fatal("no hook mode loaded")
	}
}

// hostTax times an unrelated loop of system calls on the last CPU with
// the program detached and attached (tr attached on entry and on
// return): what it measured, and the larger ratio on/off of the two
// kinds (medians of the pairs').
func hostTax(t *testing.T, tr *kdcbpf.Tracer) (string, float64) {
	t.Helper()
	zero, err := os.Open("/dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	defer zero.Close()
	fd := zero.Fd()
	var buf [1]byte
	calls := []struct {
		name string
		call func()
	}{
		{"getpid", func() { unix.RawSyscall(unix.SYS_GETPID, 0, 0, 0) }},
		{"read", func() { unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&buf[0])), 1) }},
	}
	const pairs, batches, n = 8, 25, 2000
	// ns per call of each kind: a round's lower quartile of its batches.
	round := func() []float64 {
		per := make([][]float64, len(calls))
		for range batches {
			for k, c := range calls {
				start := time.Now()
				for range n {
					c.call()
				}
				per[k] = append(per[k], float64(time.Since(start).Nanoseconds())/n)
			}
		}
		out := make([]float64, len(calls))
		for k := range per {
			slices.Sort(per[k])
			out[k] = per[k][len(per[k])/4]
		}
		return out
	}
	ratios := make([][]float64, len(calls))
	offs, ons := make([][]float64, len(calls)), make([][]float64, len(calls))
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Pinned, and the thread ends with the goroutine (never unlocked):
		// no other goroutine inherits its affinity.
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(runtime.NumCPU() - 1)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			t.Error(err)
			return
		}
		for i := range pairs {
			var off, on []float64
			if i%2 == 0 {
				tr.Detach()
				off = round()
				if err := tr.Attach(); err != nil {
					t.Error(err)
					return
				}
				on = round()
			} else {
				on = round()
				tr.Detach()
				off = round()
				if err := tr.Attach(); err != nil {
					t.Error(err)
					return
				}
			}
			for k := range calls {
				ratios[k] = append(ratios[k], on[k]/off[k])
				offs[k] = append(offs[k], off[k])
				ons[k] = append(ons[k], on[k])
			}
		}
	}()
	<-done
	if t.Failed() {
		t.FailNow()
	}
	var out []string
	worst := 0.0
	for k, c := range calls {
		r, off, on := medianOf(ratios[k]), medianOf(offs[k]), medianOf(ons[k])
		out = append(out, fmt.Sprintf("%s %.0f → %.0f ns (%+.1f %%; pairs %s)", c.name, off, on, 100*(r-1), fmtRatios(ratios[k])))
		worst = max(worst, r)
	}
	return strings.Join(out, ", "), worst
}

// kdcCost drives the KDC with tgs requests in one load, tr detached and
// attached in turn every phase (100 ms; costPhaseEnv sets another) (attached on entry and on return; off-on,
// on-off, ...: pairs that cancel a drift), and returns the median of the
// pairs' ratios of its CPU per request, with the medians off and on in
// µs. A pair with a phase of fewer than 20 answers (the KDC or the
// generator held off the CPU: on this shared machine a stall of over
// 150 ms happens) is measured again, at most as many times again.
func kdcCost(t *testing.T, tr *kdcbpf.Tracer, cfg loadgen.Config, kdc int, kdcLog string) (ratio, off, on, prog float64) {
	t.Helper()
	const pairs, least = 60, 10
	phase := costPhase(t)
	// The generator and this goroutine off the KDC's CPU: otherwise they
	// preempt it now and then, and a phase's CPU per request takes their
	// cache damage, which hides part of the program's (the same program
	// measured +1.0 to +2.0 % unpinned, +1.1 to +3.0 % pinned).
	defer pinProcess(t, runtime.NumCPU()-1)()
	runNS := func() float64 {
		ss, err := procOf(t, kdc).Schedstat()
		if err != nil {
			t.Error(err)
		}
		return float64(ss.RunningNanoseconds)
	}
	c := cfg
	started := make(chan struct{})
	marks := 0
	c.Measure = func() {
		if marks++; marks == 1 {
			close(started)
		}
	}
	// The KDC's own count: the TGS_REQ lines it logged from offset at on.
	logf, err := os.Open(kdcLog)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	var buf []byte
	logged := func(at int64) (int64, int64) {
		fi, err := logf.Stat()
		if err != nil {
			t.Error(err)
			return at, 0
		}
		end := fi.Size()
		buf = slices.Grow(buf[:0], int(end-at))[:end-at]
		if _, err := logf.ReadAt(buf, at); err != nil {
			t.Error(err)
		}
		return end, int64(bytes.Count(buf, []byte("TGS_REQ")))
	}
	logAt, _ := logged(0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// µs per answered request of each phase, by state: off, on, and on
	// with the kernel's run-time statistics.
	var offs, ons, accts, ratios, acctRatios []float64
	stalls := 0
	// The kernel's own account of the programs' run time in the phases
	// with statistics, and the KDC's requests in them. The statistics
	// cost two clock reads a program run: on only in those phases, so
	// that the on phases' ratio is the programs' cost alone.
	var acctRequests float64
	progs := map[string][2]float64{} // ns and runs in the accounted phases, by program
	progTime := func() []kdcbpf.RunTime {
		rt, err := tr.RunTimes()
		if err != nil {
			t.Error(err)
		}
		return rt
	}
	stop := make(chan struct{})
	go func() {
		defer close(stop)
		defer cancel()
		<-started
		attached := true
		var stats io.Closer
		set := func(on, acct bool) {
			if on && !attached {
				if err := tr.Attach(); err != nil {
					t.Error(err)
				}
			} else if !on && attached {
				tr.Detach()
			}
			attached = on
			if acct && stats == nil {
				var err error
				if stats, err = kdcbpf.EnableRunTimeStats(); err != nil {
					t.Errorf("BPF run-time statistics: %v", err)
				}
			} else if !acct && stats != nil {
				stats.Close()
				stats = nil
			}
		}
		defer set(true, false)
		// Each round: off, on, accounted; the next the other way round, so
		// that on and accounted each sit once before and once after off.
		const phaseOff, phaseOn, phaseAcct = 0, 1, 2
		for i := 0; len(ratios) < pairs && i < 2*pairs; i++ {
			var got [3]float64
			stalled := false
			for k := range 3 {
				kind := k
				if i%2 == 1 {
					kind = 2 - k
				}
				set(kind != phaseOff, kind == phaseAcct)
				// (Each reading at once: the run time, then where the
				// log ends.)
				r0, p0 := runNS(), progTime()
				logAt, _ = logged(logAt)
				time.Sleep(phase)
				r1, p1 := runNS(), progTime()
				var n int64
				logAt, n = logged(logAt)
				stalled = stalled || n < least
				got[kind] = (r1 - r0) / float64(max(1, n)) / 1e3
				if kind == phaseAcct && len(p0) == len(p1) {
					for j := range p1 {
						v := progs[p1[j].Program]
						v[0] += float64(p1[j].Runtime - p0[j].Runtime)
						v[1] += float64(p1[j].Runs - p0[j].Runs)
						progs[p1[j].Program] = v
					}
					acctRequests += float64(n)
				}
			}
			if stalled {
				stalls++
				continue
			}
			offs, ons, accts = append(offs, got[phaseOff]), append(ons, got[phaseOn]), append(accts, got[phaseAcct])
			ratios, acctRatios = append(ratios, got[phaseOn]/got[phaseOff]), append(acctRatios, got[phaseAcct]/got[phaseOff])
		}
	}()
	res, lerr := loadgen.Batched(ctx, c, loadgen.KindTGS, 32, 4*pairs*3*phase, 0)
	<-stop
	if lerr != nil && !errors.Is(lerr, context.Canceled) {
		t.Fatal(lerr)
	}
	if len(ratios) < pairs {
		t.Fatalf("%d pairs of phases measured, want %d (%d stalled; %d requests in %v, errors %v)", len(ratios), pairs, stalls, len(res.Records), res.Wall, res.ErrorTexts)
	}
	t.Logf("KDC CPU per tgs request, µs, off: %s; on: %s; on with run-time statistics: %s (%d rounds measured again)", fmtList(offs), fmtList(ons), fmtList(accts), stalls)
	t.Logf("with the kernel's run-time statistics on too: %.1f µs, %+.1f %% (median of the rounds' ratios to off)", medianOf(accts), 100*(medianOf(acctRatios)-1))
	var progNS float64
	var each []string
	for _, name := range slices.Sorted(maps.Keys(progs)) {
		v := progs[name]
		progNS += v[0]
		each = append(each, fmt.Sprintf("%s %.2f µs in %.2f runs", name, v[0]/max(1, acctRequests)/1e3, v[1]/max(1, acctRequests)))
	}
	t.Logf("the programs' run time per KDC request in the accounted phases, by the kernel's account: %s", strings.Join(each, ", "))
	return medianOf(ratios), medianOf(offs), medianOf(ons), progNS / max(1, acctRequests) / 1e3
}

// pinProcess pins every thread of this process to cpu (the threads it
// starts later inherit it) and returns what puts them back.
func pinProcess(t *testing.T, cpu int) func() {
	t.Helper()
	var orig, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &orig); err != nil {
		t.Fatal(err)
	}
	one.Set(cpu)
	each := func(set *unix.CPUSet) {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range tasks {
			tid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			// (A thread that exited meanwhile: ESRCH, nothing to pin.)
			if err := unix.SchedSetaffinity(tid, set); err != nil && !errors.Is(err, unix.ESRCH) {
				t.Fatal(err)
			}
		}
	}
	each(&one)
	return func() { each(&orig) }
}

// costPhaseEnv lengthens kdcCost's phases where the KDC answers too few
// requests in 100 ms for a phase to count (an emulated guest: under qemu
// TCG, attaching a trampoline alone takes longer than that).
const costPhaseEnv = "KRB5_EXPORTER_KDCSERVICE_COST_PHASE"

func costPhase(t *testing.T) time.Duration {
	v := os.Getenv(costPhaseEnv)
	if v == "" {
		return 100 * time.Millisecond
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a duration such as 1s", costPhaseEnv, v)
	}
	return d
}

func medianOf(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func fmtRatios(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%.2f", x)
	}
	return strings.Join(s, " ")
}

func fmtList(v []float64) string {
	s := ""
	for i, x := range v {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%.1f", x)
	}
	return s
}

// costConfig is the generator's configuration against r, as the bench
// makes it: r's users from their keytab, its services.
func costConfig(t *testing.T, r *realm.Realm) loadgen.Config {
	t.Helper()
	ps, creds := krb5test.UserCredentials(t, r)
	return loadgen.Config{
		KDC:   r.KDCAddr,
		Users: len(ps),
		Client: func(i int, tr krb5.Transport) (*krb5.Client, error) {
			u := (i - 1) % len(ps)
			return krb5.NewClient(krb5.Options{KDC: r.KDCAddr, Transport: tr, Client: ps[u], Credentials: creds[u], UDPRetransmit: time.Second})
		},
		Services: r.Opts.Services,
		Service:  krb5test.Services(t, r),
		Timeout:  5 * time.Second,
	}
}
