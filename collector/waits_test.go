package collector

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// procOf is pid in procfs: the tests read /proc through it, not through
// the collector's parsers.
func procOf(t *testing.T, pid int) procfs.Proc {
	t.Helper()
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		t.Fatal(err)
	}
	p, err := fs.Proc(pid)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// schedstat returns pid's run_delay and run time from /proc/PID/schedstat
// in seconds, read by procfs (not the collector's parser).
func schedstat(t *testing.T, pid int) (wait, run float64) {
	t.Helper()
	ss, err := procOf(t, pid).Schedstat()
	if err != nil {
		t.Fatal(err)
	}
	return float64(ss.WaitingNanoseconds) / 1e9, float64(ss.RunningNanoseconds) / 1e9
}

// hog runs a shell busy loop (no child process: the loop is built in)
// pinned to cpu until stopped, killed at the latest when the test ends,
// after 60 s, or with this process (Pdeathsig).
func hog(t *testing.T, cpu int) func() {
	t.Helper()
	cmd := exec.Command("taskset", "-c", strconv.Itoa(cpu), "sh", "-c", "while :; do :; done")
	// Its own session: with sched_autogroup on, the processes of one
	// session share one share of the CPU (krb5kdc has its own session).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() })
	var once sync.Once
	stop := func() {
		once.Do(func() {
			timer.Stop()
			cmd.Process.Kill()
			cmd.Wait()
		})
	}
	t.Cleanup(stop)
	return stop
}

// flood sends AS requests for an unknown principal over UDP as fast as it
// can for d, without waiting for the answers (a reader drains them), so
// that the KDC always has one waiting; those the kernel drops do not
// matter.
func flood(t *testing.T, r *realm.Realm, d time.Duration) {
	t.Helper()
	conn, pkt := asConn(t, r, "collector-flood")
	defer conn.Close()
	stop := drain(conn)
	for end := time.Now().Add(d); time.Now().Before(end); {
		for range 16 {
			conn.Write(pkt)
		}
		time.Sleep(time.Millisecond)
	}
	stop()
}

// drain reads and drops conn's answers until stop, which returns once the
// reader has (an ICMP refusal's error does not end it).
func drain(conn net.Conn) (stop func()) {
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
	return func() {
		conn.SetReadDeadline(time.Now())
		<-done
	}
}

// TestCPUWaitUnderContention: a harness KDC (krb5kdc -w 1) pinned to CPU 0
// is kept busy (a flood of AS requests: it never sleeps, so the
// scheduler's favour for waking tasks plays no part) alone and with eight
// busy loops pinned to the same CPU, three times, alternated. Its
// worker's run delay, as the collector reports it, lies between procfs's
// reads of /proc/PID/schedstat just before and after each scrape, and per
// second of its own CPU time it waits at least 2 s longer under
// contention than alone (the median of each; eight loops sharing its CPU
// fairly make it about 8 s).
//
// It compares loads, so it runs in scripts/test-alone.sh: in the race run,
// beside the other packages, the KDC "alone" already waited 5.0 s per
// second run and the eight loops added 1.75 (a clean clone's make test).
func TestCPUWaitUnderContention(t *testing.T) {
	testutil.Alone(t)
	testutil.RequireProgram(t, "taskset")
	r := upRealm(t, 1, false)
	pids := r.KDCPids()
	if len(pids) != 2 {
		t.Fatalf("KDC pids %v, want supervisor and worker", pids)
	}
	for _, p := range pids {
		if out, err := exec.Command("taskset", "-a", "-p", "-c", "0", strconv.Itoa(p)).CombinedOutput(); err != nil {
			t.Fatalf("taskset: %v %s", err, out)
		}
	}
	worker := pids[1]
	_, reg := newTestCollector(t, realmConfig(r))
	read := func() (wait, run float64) {
		t.Helper()
		before, _ := schedstat(t, worker)
		s := gather(t, reg)
		after, run := schedstat(t, worker)
		wait = s.Value("krb5_kdc_worker_cpu_wait_seconds_total", "worker", "0")
		if wait < before || wait > after {
			t.Errorf("worker 0 CPU wait %.9f s reported, schedstat said %.9f before and %.9f after the scrape", wait, before, after)
		}
		if p := s.Value("krb5_process_cpu_wait_seconds_total", "program", "krb5kdc"); p < wait {
			t.Errorf("krb5kdc's CPU wait %.9f s, less than its worker's %.9f", p, wait)
		}
		return wait, run
	}
	// Waits per second run while the KDC is kept busy for 700 ms.
	measure := func() float64 {
		w0, r0 := read()
		flood(t, r, 700*time.Millisecond)
		w1, r1 := read()
		if r1 <= r0 {
			t.Fatalf("the worker did not run during the load")
		}
		return (w1 - w0) / (r1 - r0)
	}
	// Alternated, so that the machine's own load falls on both.
	const hogs = 8
	var alone, contended []float64
	for range 3 {
		alone = append(alone, measure())
		var stops []func()
		for range hogs {
			stops = append(stops, hog(t, 0))
		}
		contended = append(contended, measure())
		for _, stop := range stops {
			stop()
		}
	}
	slices.Sort(alone)
	slices.Sort(contended)
	t.Logf("worker run delay per second of its CPU time, the KDC kept busy: alone %.2f (median of %.2f), with %d busy loops on its CPU %.2f (median of %.2f)",
		alone[1], alone, hogs, contended[1], contended)
	// A KDC that never sleeps shares its CPU fairly: each busy loop adds
	// about one second of waiting per second run, whatever else the
	// machine runs; a quarter of that is required.
	if d := contended[1] - alone[1]; d < hogs/4 {
		t.Errorf("run delay per CPU second: %.2f with %d busy loops on the KDC's CPU, %.2f alone: want at least %d more", contended[1], hogs, alone[1], hogs/4)
	}
}

// TestDiskWaitReported: with task delay accounting on, a harness KDC that
// writes last_success after each login (the default) reports the waits
// of its worker for its disk as /proc/PID/stat's field 42 has them
// (procfs's parser), growing with real logins (MIT kinit) when its
// database is on a block device (on before Linux 5.14, which has no
// switch); with it off (the default since Linux 5.14), the collector says
// so: krb5_exporter_task_delayacct_enabled 0,
// no disk wait series and one log line however many scrapes.
func TestDiskWaitReported(t *testing.T) {
	t.Parallel()
	// Before Linux 5.14 there is no switch, and accounting is on.
	b, err := os.ReadFile("/proc/sys/kernel/task_delayacct")
	switchable := err == nil
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	on := !switchable || strings.TrimSpace(string(b)) == "1"
	r := upRealm(t, 1, false)
	pids := r.KDCPids()
	if len(pids) != 2 {
		t.Fatalf("KDC pids %v, want supervisor and worker", pids)
	}
	logs := &testutil.LockedBuffer{}
	_, reg := newTestCollectorLogging(t, realmConfig(r), log.NewLogfmtLogger(logs))
	if !on {
		for range 3 {
			s := gather(t, reg)
			if v, ok := s.Find("krb5_exporter_task_delayacct_enabled"); !ok || v != 0 {
				t.Errorf("krb5_exporter_task_delayacct_enabled %v (present %v) with kernel.task_delayacct 0", v, ok)
			}
			for _, name := range []string{"krb5_process_disk_wait_seconds_total", "krb5_kdc_worker_disk_wait_seconds_total"} {
				if n := s.Count(name); n != 0 {
					t.Errorf("%d %s series with task delay accounting off", n, name)
				}
			}
		}
		if n := strings.Count(logs.String(), "task delay accounting is off"); n != 1 {
			t.Errorf("%d log lines saying task delay accounting is off after 3 scrapes, want 1:\n%s", n, logs.String())
		}
		t.Log("kernel.task_delayacct is 0: checked that the collector says so; the disk waits are checked where it is 1")
		return
	}
	worker := pids[1]
	statTicks := func() float64 {
		st, err := procOf(t, worker).Stat()
		if err != nil {
			t.Fatal(err)
		}
		return float64(st.DelayAcctBlkIOTicks) / userHZ
	}
	read := func() float64 {
		before := statTicks()
		s := gather(t, reg)
		after := statTicks()
		if v, ok := s.Find("krb5_exporter_task_delayacct_enabled"); ok != switchable || (ok && v != 1) {
			t.Errorf("krb5_exporter_task_delayacct_enabled %v (present %v) with task delay accounting on (switchable: %v)", v, ok, switchable)
		}
		w := s.Value("krb5_kdc_worker_disk_wait_seconds_total", "worker", "0")
		if w < before || w > after {
			t.Errorf("worker 0 disk wait %.2f s reported, /proc/PID/stat said %.2f before and %.2f after the scrape", w, before, after)
		}
		if p := s.Value("krb5_process_disk_wait_seconds_total", "program", "krb5kdc"); p < w {
			t.Errorf("krb5kdc's disk wait %.2f s, less than its worker's %.2f", p, w)
		}
		return w
	}
	w0 := read()
	env := append(os.Environ(), r.Env()...)
	env = append(env, "KRB5CCNAME=FILE:"+t.TempDir()+"/cc")
	const logins = 200
	start := time.Now()
	for i := range logins {
		kinit := exec.Command("kinit", "-k", "-t", r.UserKeytab, r.User(i%5+1))
		kinit.Env = env
		if out, err := kinit.CombinedOutput(); err != nil {
			t.Fatalf("kinit: %v %s", err, out)
		}
	}
	w1 := read()
	t.Logf("%d logins in %.1f s: the worker waited %.2f s for its disk", logins, time.Since(start).Seconds(), w1-w0)
	if onBlockDevice(t, r.Dir) && w1 <= w0 {
		t.Errorf("%d logins writing last_success to a block device: no disk wait reported", logins)
	}
}

// onBlockDevice reports whether dir is on a block device (not tmpfs or
// ramfs, where a sync never waits for a disk).
func onBlockDevice(t *testing.T, dir string) bool {
	t.Helper()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	return fs.Type != unix.TMPFS_MAGIC && fs.Type != unix.RAMFS_MAGIC
}
