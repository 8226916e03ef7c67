package collector

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"
)

// addReapedCPU moves the CPU time of worker into the supervisor's
// cutime/cstime and removes the worker, as krb5kdc reaping an exited
// worker does.
func addReapedCPU(t *testing.T, root string, supervisor, worker int) {
	t.Helper()
	fields := func(pid int) (head string, f []string) {
		b, err := os.ReadFile(filepath.Join(root, strconv.Itoa(pid), "stat"))
		if err != nil {
			t.Fatal(err)
		}
		s := strings.TrimSpace(string(b))
		r := strings.LastIndexByte(s, ')')
		return s[:r+1], strings.Fields(s[r+2:]) // f[0] is field 3 (state)
	}
	num := func(s string) uint64 {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	_, w := fields(worker)
	head, s := fields(supervisor)
	// Fields 14/15 are utime/stime, 16/17 cutime/cstime.
	s[13] = strconv.FormatUint(num(s[13])+num(w[11]), 10)
	s[14] = strconv.FormatUint(num(s[14])+num(w[12]), 10)
	if err := os.WriteFile(filepath.Join(root, strconv.Itoa(supervisor), "stat"), []byte(head+" "+strings.Join(s, " ")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	removeProc(t, root, worker)
}

// TestProcessCPUMonotonic: a worker that exits before the supervisor takes
// its CPU time out of the live processes' sum; the supervisor's reaped
// children's time holds it, so the counter does not drop.
func TestProcessCPUMonotonic(t *testing.T) {
	root := editableFixture(t)
	_, reg := newTestCollector(t, fixtureConfig(t, root))
	before := gather(t, reg)
	addReapedCPU(t, root, fxSupervisor, fxWorker0) // the worker with system time
	after := gather(t, reg)
	for _, mode := range []string{"user", "system"} {
		b := before.Value("krb5_process_cpu_seconds_total", "program", "krb5kdc", "mode", mode)
		a := after.Value("krb5_process_cpu_seconds_total", "program", "krb5kdc", "mode", mode)
		if a < b {
			t.Errorf("cpu %s went from %v to %v when a worker exited", mode, b, a)
		}
	}
}

// TestWorkerSeriesSorted: the per-worker series of -w 64 are sent in the
// order the registry sorts each family into (label values as strings,
// label pairs by name), so that its sort has sorted input; all of them,
// once each.
func TestWorkerSeriesSorted(t *testing.T) {
	c, _ := newTestCollector(t, fixtureConfig(t, fixtureTree65(t)))
	for scrape := 0; scrape < 2; scrape++ {
		ch := make(chan prometheus.Metric)
		go func() {
			c.Collect(ch)
			close(ch)
		}()
		seen := map[string][]string{}
		for m := range ch {
			name := m.Desc().String()
			if !strings.Contains(name, "krb5_kdc_worker_") {
				continue
			}
			var d dto.Metric
			if err := m.Write(&d); err != nil {
				t.Fatal(err)
			}
			var key []string
			for _, l := range d.Label {
				key = append(key, l.GetValue())
			}
			seen[name] = append(seen[name], strings.Join(key, "\x00"))
		}
		if len(seen) != 2 {
			t.Fatalf("%d worker families", len(seen))
		}
		for name, keys := range seen {
			if n := len(keys); n != 64 && n != 128 {
				t.Errorf("%s: %d series", name, n)
			}
			for i := 1; i < len(keys); i++ {
				if keys[i-1] >= keys[i] {
					t.Errorf("%s: series %q sent after %q", name, keys[i], keys[i-1])
				}
			}
		}
	}
}

// TestOpenFilesLimit: krb5_process_max_fds comes from prlimit(2) on the
// live /proc and equals the "Max open files" soft limit that
// /proc/PID/limits of a real process shows (parsed here, not by
// limitsOpenFiles), with a soft limit set below the hard one; when
// prlimit is refused (EPERM, another user's daemon) the file gives the
// same; in a copied tree, and after the process exited, prlimit is not
// trusted.
func TestOpenFilesLimit(t *testing.T) {
	cmd := exec.Command("sh", "-c", "ulimit -S -n 1234 && exec sleep 60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	dir := "/proc/" + strconv.Itoa(pid)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, _ := os.ReadFile(dir + "/comm"); string(b) == "sleep\n" {
			break // exec'd: the limit is set
		}
		if time.Now().After(deadline) {
			t.Fatal("the child did not exec sleep")
		}
	}
	// The oracle: the file's soft and hard columns.
	b, err := os.ReadFile(dir + "/limits")
	if err != nil {
		t.Fatal(err)
	}
	var soft, hard string
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			f := strings.Fields(rest)
			soft, hard = f[0], f[1]
		}
	}
	if soft != "1234" || hard == soft {
		t.Fatalf("the child's limits say soft %q, hard %q; want soft 1234 below the hard limit", soft, hard)
	}
	want, _ := strconv.ParseUint(soft, 10, 64)

	k, _ := newTestCollector(t, DefaultConfig())
	var c *processCollector
	for _, nc := range k.collectors {
		if pc, ok := nc.c.(*processCollector); ok {
			c = pc
		}
	}
	if c == nil || c.prlimit == nil {
		t.Fatal("no process collector, or prlimit not used on this process's own /proc")
	}
	calls := 0
	c.prlimit = func(pid int, rl *unix.Rlimit) error { calls++; return prlimitNoFile(pid, rl) }
	p := &kdcProc{pid: pid, dir: dir}
	if got, err := c.openFilesLimit(p); err != nil || got != want || calls != 1 {
		t.Errorf("through prlimit: %v, %v (%d calls), want %d from one call", got, err, calls, want)
	}
	c.prlimit = func(int, *unix.Rlimit) error { calls++; return unix.EPERM }
	if got, err := c.openFilesLimit(p); err != nil || got != want || calls != 2 {
		t.Errorf("prlimit refused, from the file: %v, %v (%d calls), want %d", got, err, calls, want)
	}

	if ownPidNamespace(editableFixture(t), false) {
		t.Error("a copied tree taken for this pid namespace's /proc")
	}
	cmd.Process.Kill()
	cmd.Wait()
	c.prlimit = prlimitNoFile
	if _, err := c.openFilesLimit(p); !gone(err) {
		t.Errorf("after the process exited: %v, want an error of a gone process", err)
	}
}
