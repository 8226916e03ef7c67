package bench

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestCoresOf counts the cores real processes may keep busy: one per
// process, at most the CPUs of their affinity, the parent of the others
// (krb5kdc -w's supervisor) not counted.
func TestCoresOf(t *testing.T) {
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip(err)
	}
	start := func(args ...string) *exec.Cmd {
		cmd := exec.Command(args[0], args[1:]...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	a := start("sleep", "30")
	b := start("sleep", "30")
	ncpu := runtime.NumCPU()
	if got, want := coresOf([]int{a.Process.Pid, b.Process.Pid}), min(2, ncpu); got != want {
		t.Errorf("two unpinned processes: %d cores, want %d", got, want)
	}
	for _, p := range []int{a.Process.Pid, b.Process.Pid} {
		if out, err := execTaskset(p, 0); err != nil {
			t.Fatalf("taskset: %v %s", err, out)
		}
	}
	if got := coresOf([]int{a.Process.Pid, b.Process.Pid}); got != 1 {
		t.Errorf("two processes pinned to CPU 0: %d cores, want 1", got)
	}
	// A supervisor and its one worker: the worker's core only.
	sup := start("sh", "-c", "sleep 30 & wait")
	var child int
	for i := 0; i < 200 && child == 0; i++ {
		b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(sup.Process.Pid), "task", strconv.Itoa(sup.Process.Pid), "children"))
		if f := strings.Fields(string(b)); len(f) > 0 {
			child, _ = strconv.Atoi(f[0])
		} else {
			time.Sleep(5 * time.Millisecond)
		}
	}
	if child == 0 {
		t.Fatal("the child never started")
	}
	if got := coresOf([]int{sup.Process.Pid, child}); got != 1 {
		t.Errorf("a parent and its child: %d cores, want 1 (the parent serves none)", got)
	}
	if got := coresOf(nil); got != 0 {
		t.Errorf("no process: %d cores", got)
	}
}

// TestKDCBusyReported runs as and tgs against a real KDC pinned to one
// CPU: the report, report.md and the textfile show how busy the KDC was
// on the one core it may use, and the suite warns when that is below the
// warn level (an impossible 101 % here; none at 0).
func TestKDCBusyReported(t *testing.T) {
	r := upRealm(t, realm.Options{})
	for _, p := range r.KDCPids() {
		if out, err := execTaskset(p, 0); err != nil {
			t.Fatalf("taskset: %v %s", err, out)
		}
	}
	for _, warnAt := range []float64{101, 0} {
		s := small("as", "tgs")
		s.Targets.KDCBusyWarnPct = warnAt
		s.Targets.GeneratorWarnFactor = 0
		rep := runSuite(t, RealmSystem(r), s)
		for _, x := range []struct {
			test string
			l    *Load
		}{{"as", rep.AS}, {"tgs", rep.TGS}} {
			if x.l == nil {
				t.Fatalf("%s did not run: %+v", x.test, rep.Tests)
			}
			u := x.l.CPU
			if u.KDCCores != 1 {
				t.Errorf("%s: KDC cores %d, want 1 (pinned to CPU 0)", x.test, u.KDCCores)
			}
			if u.KDCCoresBusyPct <= 1 || u.KDCCoresBusyPct > 110 {
				t.Errorf("%s: KDC busy %.1f %% of its core", x.test, u.KDCCoresBusyPct)
			}
			warned := false
			for _, w := range rep.Warnings {
				if strings.HasPrefix(w, x.test+": the KDC was ") && strings.Contains(w, "busy on the 1 core(s) it may use") {
					warned = true
				}
			}
			if warned != (warnAt > 0) {
				t.Errorf("%s, warn below %g %%: warned %v; warnings %q", x.test, warnAt, warned, rep.Warnings)
			}
		}
		var md, tf bytes.Buffer
		WriteMarkdown(&md, rep)
		if n := strings.Count(md.String(), "% of the 1 core(s) it may use; KDC "); n != 2 {
			t.Errorf("report.md shows the KDC's busy share %d times, want 2 (as, tgs):\n%s", n, md.String())
		}
		if err := WriteTextfile(&tf, rep); err != nil {
			t.Fatal(err)
		}
		for _, test := range []string{"as", "tgs"} {
			if !strings.Contains(tf.String(), `krb5_bench_kdc_busy_ratio{test="`+test+`"} `) {
				t.Errorf("textfile has no krb5_bench_kdc_busy_ratio for %s:\n%s", test, tf.String())
			}
		}
	}
}
