package bench

import (
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestLimitsOf judges the figures of real loads (report.json's cpu of
// bench --once runs on this project's 2-core machine, other test suites
// running beside them; rounded to 0.1) and says the causes they show,
// one warning per cause. The rows marked "quiet" are real rows with the
// waits other processes caused taken out (no run here had the machine to
// itself): what the same load shows without them.
func TestLimitsOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		u    CPUUse
		full bool
		want []string
	}{
		// --kdc-cpu 0 --generator-cpu 0: the KDC waited 21 % for the CPU
		// it shares with the generator, which ran 19 % of the time.
		{"as pinned together", CPUUse{KDCPerRequestUS: 484.2, GeneratorPerRequestUS: 118.8, Ratio: 0.2, GenBusyPct: 18.9, KDCCores: 1, KDCCoresBusyPct: 77.1, KDCCPUWaitPct: 21.1, SharedCPUs: 1, KDCDiskWaitPct: 0, KDCBusyTotalPct: 98.2, KDCIdlePct: 1.8}, true, []string{causeGenerator}},
		{"tgs pinned together", CPUUse{KDCPerRequestUS: 183.8, GeneratorPerRequestUS: 13.8, Ratio: 0.1, GenBusyPct: 6.8, KDCCores: 1, KDCCoresBusyPct: 90.3, KDCCPUWaitPct: 9.6, SharedCPUs: 1, KDCDiskWaitPct: 0, KDCBusyTotalPct: 99.9, KDCIdlePct: 0.1}, true, []string{causeGenerator}},
		// --kdc-cpu 0 --generator-cpu 1: the generator (0.26x the KDC's
		// CPU per request, what the old check warned about) cannot have
		// taken the KDC's CPU; other processes did.
		{"as pinned apart", CPUUse{KDCPerRequestUS: 538.7, GeneratorPerRequestUS: 139.2, Ratio: 0.3, GenBusyPct: 17.4, KDCCores: 1, KDCCoresBusyPct: 67.5, KDCCPUWaitPct: 17.5, SharedCPUs: 0, KDCDiskWaitPct: 0, KDCBusyTotalPct: 84.9, KDCIdlePct: 15.1}, true, []string{causeCPU}},
		{"as pinned apart, quiet", CPUUse{KDCPerRequestUS: 538.7, GeneratorPerRequestUS: 139.2, Ratio: 0.3, GenBusyPct: 17.4, KDCCores: 1, KDCCoresBusyPct: 97.5, KDCCPUWaitPct: 0.5, SharedCPUs: 0, KDCDiskWaitPct: 0, KDCBusyTotalPct: 98, KDCIdlePct: 2}, true, nil},
		// The steady light load: the KDC 42 % idle is what the load is;
		// its waits for a CPU (39 %, other processes) are a finding.
		{"latency pinned apart", CPUUse{KDCPerRequestUS: 388.4, GeneratorPerRequestUS: 145.7, Ratio: 0.4, GenBusyPct: 7.3, KDCCores: 1, KDCCoresBusyPct: 19.5, KDCCPUWaitPct: 38.8, SharedCPUs: 0, KDCDiskWaitPct: 0, KDCBusyTotalPct: 58.2, KDCIdlePct: 41.8}, false, []string{causeCPU}},
		{"latency unpinned, quiet", CPUUse{KDCPerRequestUS: 513.2, GeneratorPerRequestUS: 182.6, Ratio: 0.4, GenBusyPct: 9.1, KDCCores: 1, KDCCoresBusyPct: 25.7, KDCCPUWaitPct: 0.4, SharedCPUs: 2, KDCDiskWaitPct: 7.0, KDCBusyTotalPct: 33.1, KDCIdlePct: 66.9}, false, nil},
		// Unpinned, last_success on, a bounded dd oflag=dsync on the
		// database's disk: the disk (25 %) and other processes' CPU
		// (64 %, the generator 6 % of a core).
		{"as beside a synchronous writer", CPUUse{KDCPerRequestUS: 923.0, GeneratorPerRequestUS: 443.0, Ratio: 0.5, GenBusyPct: 5.9, KDCCores: 1, KDCCoresBusyPct: 12.3, KDCCPUWaitPct: 64.2, SharedCPUs: 2, KDCDiskWaitPct: 24.8, KDCBusyTotalPct: 100, KDCIdlePct: 0}, true, []string{causeCPU, causeDisk}},
		{"tgs beside a synchronous writer", CPUUse{KDCPerRequestUS: 242.9, GeneratorPerRequestUS: 35.4, Ratio: 0.1, GenBusyPct: 5.8, KDCCores: 1, KDCCoresBusyPct: 40.0, KDCCPUWaitPct: 58.3, SharedCPUs: 2, KDCDiskWaitPct: 0, KDCBusyTotalPct: 98.4, KDCIdlePct: 1.6}, true, []string{causeCPU}},
		// Unpinned, last_success on: the disk (11 %) and other
		// processes' CPU (40 %; SharedCPUs 2 from the setup, a build
		// before the field).
		{"as, last_success on", CPUUse{KDCPerRequestUS: 641.3, GeneratorPerRequestUS: 132.8, Ratio: 0.2, GenBusyPct: 9.3, KDCCores: 1, KDCCoresBusyPct: 44.9, KDCCPUWaitPct: 40.4, SharedCPUs: 2, KDCDiskWaitPct: 11.0, KDCBusyTotalPct: 96.3, KDCIdlePct: 3.7}, true, []string{causeCPU, causeDisk}},
		{"as, last_success on, quiet", CPUUse{KDCPerRequestUS: 641.3, GeneratorPerRequestUS: 132.8, Ratio: 0.2, GenBusyPct: 9.3, KDCCores: 1, KDCCoresBusyPct: 84.9, KDCCPUWaitPct: 0.4, SharedCPUs: 2, KDCDiskWaitPct: 11.0, KDCBusyTotalPct: 96.3, KDCIdlePct: 3.7}, true, []string{causeDisk}},
		// The disk waits explain the idle share up to their own: 13 %
		// idle, 2 % beyond them, is theirs; 8 %
		// idle beyond them is the round trips'.
		{"as, last_success on, quiet, idle within", CPUUse{KDCPerRequestUS: 641.3, GeneratorPerRequestUS: 132.8, Ratio: 0.2, GenBusyPct: 9.3, KDCCores: 1, KDCCoresBusyPct: 75.6, KDCCPUWaitPct: 0.4, SharedCPUs: 2, KDCDiskWaitPct: 11.0, KDCBusyTotalPct: 87, KDCIdlePct: 13}, true, []string{causeDisk}},
		{"as, last_success on, quiet, idle", CPUUse{KDCPerRequestUS: 641.3, GeneratorPerRequestUS: 132.8, Ratio: 0.2, GenBusyPct: 9.3, KDCCores: 1, KDCCoresBusyPct: 70, KDCCPUWaitPct: 0.4, SharedCPUs: 2, KDCDiskWaitPct: 11.0, KDCBusyTotalPct: 81.4, KDCIdlePct: 18.6}, true, []string{causeDisk, causeNetwork}},
		// One blocking client on CPU 0, the KDC on CPU 1: idle 35 %
		// between round trips, a third of it explained by its waits for
		// a CPU (13 %), the rest by the one request in flight.
		{"as, one blocking client", CPUUse{KDCPerRequestUS: 695.2, GeneratorPerRequestUS: 474.8, Ratio: 0.7, GenBusyPct: 35.7, KDCCores: 1, KDCCoresBusyPct: 52.3, KDCCPUWaitPct: 12.9, SharedCPUs: 0, KDCDiskWaitPct: 0, KDCBusyTotalPct: 65.2, KDCIdlePct: 34.8}, true, []string{causeCPU, causeNetwork}},
		{"as, one blocking client, quiet", CPUUse{KDCPerRequestUS: 695.2, GeneratorPerRequestUS: 474.8, Ratio: 0.7, GenBusyPct: 35.7, KDCCores: 1, KDCCoresBusyPct: 52.3, KDCCPUWaitPct: 0.3, SharedCPUs: 0, KDCDiskWaitPct: 0, KDCBusyTotalPct: 52.6, KDCIdlePct: 47.4}, true, []string{causeNetwork}},
		// 64 blocking clients: the generator a whole core, the KDC idle.
		{"as, 64 blocking clients, quiet", CPUUse{KDCPerRequestUS: 491.3, GeneratorPerRequestUS: 279.1, Ratio: 0.6, GenBusyPct: 99.0, KDCCores: 1, KDCCoresBusyPct: 70.4, KDCCPUWaitPct: 0.5, SharedCPUs: 0, KDCDiskWaitPct: 0, KDCBusyTotalPct: 70.9, KDCIdlePct: 29.1}, true, []string{causeGenerator}},
		{"as, 64 blocking clients", CPUUse{KDCPerRequestUS: 491.3, GeneratorPerRequestUS: 279.1, Ratio: 0.6, GenBusyPct: 40.0, KDCCores: 1, KDCCoresBusyPct: 70.4, KDCCPUWaitPct: 27.5, SharedCPUs: 0, KDCDiskWaitPct: 0, KDCBusyTotalPct: 97.9, KDCIdlePct: 2.1}, true, []string{causeCPU}},
		// On an overcommitted VM, the KDC pinned apart: 19 % of its
		// CPU's time stolen, which its CPU time and waits miss, so that it
		// looks idle: the steal, not the round trips.
		{"as, steal", CPUUse{KDCPerRequestUS: 330.5, GeneratorPerRequestUS: 22.8, Ratio: 0.07, GenBusyPct: 5.5, KDCCores: 1, KDCCoresBusyPct: 78.9, KDCCPUWaitPct: 0.8, SharedCPUs: 0, KDCBusyTotalPct: 79.7, KDCIdlePct: 20.3, KDCStealPct: 19.0}, true, []string{causeSteal}},
		// The same idle share, steal below the warn level: the round trips.
		{"as, little steal", CPUUse{KDCPerRequestUS: 330.5, GeneratorPerRequestUS: 22.8, Ratio: 0.07, GenBusyPct: 5.5, KDCCores: 1, KDCCoresBusyPct: 78.9, KDCCPUWaitPct: 0.8, SharedCPUs: 0, KDCBusyTotalPct: 79.7, KDCIdlePct: 20.3, KDCStealPct: 3.0}, true, []string{causeNetwork}},
		// A steady light load is judged on the steal as well.
		{"latency, steal", CPUUse{KDCPerRequestUS: 388.4, GeneratorPerRequestUS: 145.7, Ratio: 0.4, GenBusyPct: 7.3, KDCCores: 1, KDCCoresBusyPct: 19.5, KDCCPUWaitPct: 0.4, SharedCPUs: 0, KDCBusyTotalPct: 19.9, KDCIdlePct: 80.1, KDCStealPct: 12.0}, false, []string{causeSteal}},
		// Not on this machine (no cores known): nothing to judge.
		{"remote KDC", CPUUse{KDCPerRequestUS: 0, GeneratorPerRequestUS: 139.2, GenBusyPct: 17.4}, true, nil},
	} {
		ls := limitsOf("as", tc.u, tc.full, Defaults().Targets.KDCBusyWarnPct)
		var got []string
		for _, l := range ls {
			got = append(got, l.cause)
			says := map[string]string{causeDisk: "waited for its database writes", causeCPU: "other processes on its CPUs held the rate down",
				causeGenerator: "the generator", causeNetwork: "the round trips", causeSteal: "the hypervisor gave the CPU(s) the KDC may use to another guest"}[l.cause]
			if !strings.HasPrefix(l.text, "as: ") || !strings.Contains(l.text, says) {
				t.Errorf("%s: %s warning %q does not name the test and say %q", tc.name, l.cause, l.text, says)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: causes %v, want %v: %q", tc.name, got, tc.want, ls)
		}
	}
}

// TestLimitKindsApart: a repeated test's limits are merged per cause, so
// a disk finding in one repetition and a CPU one in another both stay.
func TestLimitKindsApart(t *testing.T) {
	rr := &run{sys: &System{KDCPids: func() []int { return nil }}, set: Defaults(), rep: &Report{}, repeated: true, count: 2}
	disk := CPUUse{KDCCores: 1, KDCCoresBusyPct: 80, KDCDiskWaitPct: 19, KDCBusyTotalPct: 99, KDCIdlePct: 1}
	cpu := CPUUse{KDCCores: 1, KDCCoresBusyPct: 80, KDCCPUWaitPct: 19, KDCBusyTotalPct: 99, KDCIdlePct: 1}
	rr.round = 1
	rr.checkLimits("as", disk, true)
	rr.round = 2
	rr.checkLimits("as", cpu, true)
	rr.checkLimits("as", disk, true)
	if len(rr.repWarns) != 2 || !slices.Equal(rr.repWarns[0].rounds, []int{1, 2}) || !slices.Equal(rr.repWarns[1].rounds, []int{2}) {
		var ws []repWarn
		for _, w := range rr.repWarns {
			ws = append(ws, *w)
		}
		t.Errorf("repeated limits: %+v, want the disk one (rounds 1, 2) and the CPU one (round 2)", ws)
	}
}

// TestGeneratorBlamedFromEvidence runs the as load (last_success off)
// with the KDC on CPU 0 and this process, the generator, unpinned, then
// on CPU 1, then on CPU 0 with the KDC: only the last, where the KDC
// waits for the CPU the generator runs on, blames the generator. Needs
// the machine to itself (scripts/test-alone.sh): other processes on the
// KDC's CPU are named as such, not as the generator, but they also hide
// what is measured here.
func TestGeneratorBlamedFromEvidence(t *testing.T) {
	testutil.Alone(t)
	testutil.RequireProgram(t, "taskset")
	var own unix.CPUSet
	if err := unix.SchedGetaffinity(0, &own); err != nil {
		t.Fatal(err)
	}
	if own.Count() < 2 || !own.IsSet(0) || !own.IsSet(1) {
		t.Skipf("needs CPUs 0 and 1 (this process may use %d CPUs)", own.Count())
	}
	var cpus []string
	for i := range 1024 {
		if own.IsSet(i) {
			cpus = append(cpus, strconv.Itoa(i))
		}
	}
	all := strings.Join(cpus, ",")
	pinSelf := func(list string) {
		if out, err := exec.Command("taskset", "-a", "-p", "-c", list, strconv.Itoa(os.Getpid())).CombinedOutput(); err != nil {
			t.Fatalf("taskset: %v %s", err, out)
		}
	}
	t.Cleanup(func() { pinSelf(all) })
	r := upRealm(t, realm.Options{NoKadmind: true, DisableLastSuccess: true})
	for _, p := range r.KDCPids() {
		if out, err := execTaskset(p, 0); err != nil {
			t.Fatalf("taskset: %v %s", err, out)
		}
	}
	for _, tc := range []struct {
		generator string
		blamed    bool
	}{{all, false}, {"1", false}, {"0", true}} {
		pinSelf(tc.generator)
		s := small("as")
		s.Duration = 2 * time.Second
		rep := runSuite(t, RealmSystem(r), s)
		if rep.AS == nil {
			t.Fatalf("as did not run: %+v", rep.Tests)
		}
		u := rep.AS.CPU
		blamed := false
		for _, w := range rep.Warnings {
			blamed = blamed || strings.Contains(w, "the generator took the KDC's CPU") || strings.Contains(w, "the generator was the limit")
		}
		t.Logf("generator on CPUs %s, KDC on 0: %d shared; KDC CPU %.1f %%, waiting for a CPU %.1f %%; generator %.1f %% of a core (%.2fx); warnings %q",
			tc.generator, u.SharedCPUs, u.KDCCoresBusyPct, u.KDCCPUWaitPct, u.GenBusyPct, u.Ratio, rep.Warnings)
		if blamed != tc.blamed {
			t.Errorf("generator on CPUs %s, KDC on CPU 0: generator blamed %v, want %v", tc.generator, blamed, tc.blamed)
		}
	}
}

// TestCPUUseSteal: the steal of the KDC's CPUs between two samples is a
// share of those CPUs' time, whatever the number of serving processes;
// absent without steal figures.
func TestCPUUseSteal(t *testing.T) {
	a := Sample{At: time.Second, KDCCores: 1, KDCSteal: 3 * time.Second, StealCPUs: 2}
	b := Sample{At: 3 * time.Second, KDCCores: 1, KDCSteal: 3*time.Second + 600*time.Millisecond, StealCPUs: 2}
	if got := cpuUse(a, b, 100).KDCStealPct; math.Abs(got-15) > 1e-9 {
		t.Errorf("600 ms stolen of 2 CPUs over 2 s: %v %%, want 15", got)
	}
	b.StealCPUs = 0
	if got := cpuUse(a, b, 100).KDCStealPct; got != 0 {
		t.Errorf("no steal figures: %v %%, want 0", got)
	}
}

// A warning that something else held a test's rate down marks the test
// as environment-limited (its FAILs may not be the KDC's); the KDC's own
// disk writes do not: they are its limit.
func TestEnvironmentLimited(t *testing.T) {
	for _, tc := range []struct {
		name string
		u    CPUUse
		want []string
	}{
		{"as beside a synchronous writer: cpu and disk", CPUUse{KDCPerRequestUS: 923.0, GeneratorPerRequestUS: 443.0, Ratio: 0.5, GenBusyPct: 5.9, KDCCores: 1, KDCCoresBusyPct: 12.3, KDCCPUWaitPct: 64.2, SharedCPUs: 2, KDCDiskWaitPct: 24.8, KDCBusyTotalPct: 100, KDCIdlePct: 0}, []string{"as"}},
		{"as, last_success on, quiet: disk only", CPUUse{KDCPerRequestUS: 641.3, GeneratorPerRequestUS: 132.8, Ratio: 0.2, GenBusyPct: 9.3, KDCCores: 1, KDCCoresBusyPct: 84.9, KDCCPUWaitPct: 0.4, SharedCPUs: 2, KDCDiskWaitPct: 11.0, KDCBusyTotalPct: 96.3, KDCIdlePct: 3.7}, nil},
		{"as pinned apart, quiet: nothing", CPUUse{KDCPerRequestUS: 538.7, GeneratorPerRequestUS: 139.2, Ratio: 0.3, GenBusyPct: 17.4, KDCCores: 1, KDCCoresBusyPct: 97.5, KDCCPUWaitPct: 0.5, SharedCPUs: 0, KDCDiskWaitPct: 0, KDCBusyTotalPct: 98, KDCIdlePct: 2}, nil},
	} {
		r := &run{sys: &System{KDCPids: func() []int { return []int{1} }}, set: Defaults(), rep: &Report{}}
		r.checkLimits("as", tc.u, true)
		r.checkLimits("as (again)", tc.u, true) // said once, by the test's name
		if !slices.Equal(r.rep.EnvironmentLimited, tc.want) {
			t.Errorf("%s: environment-limited %v, want %v (warnings %q)", tc.name, r.rep.EnvironmentLimited, tc.want, r.rep.Warnings)
		}
	}
}
