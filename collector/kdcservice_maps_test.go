package collector

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/krb5-exporter/krb5-exporter/internal/kdcbpf"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// TestKDCServiceThreadChurn: a watched process (this one, beside the KDC,
// as a namesake discovery accepted would be) whose 5,000 short-lived
// threads each read a datagram from a UDP socket, more than the
// program's thread table holds (4,096): each thread's entry leaves with
// it, so that nothing is counted as map_full and a KDC started afterwards
// is traced: the AS requests timed are the AS_REQ lines of its log, and
// the collector says tracing_up 1. Both ways the program sees receives.
func TestKDCServiceThreadChurn(t *testing.T) {
	r := upRealm(t, 0, false)
	for _, hooks := range []string{"", "syscalls"} {
		t.Run("hooks="+hooks, func(t *testing.T) {
			t.Setenv(kdcbpf.HooksEnv, hooks)
			_, ks, reg := serviceCollector(t, r)
			if err := r.StopKDC(); err != nil {
				t.Fatal(err)
			}
			tr := ks.tracer
			self := os.Getpid()
			if err := tr.Watch([]int{self}); err != nil {
				t.Fatal(err)
			}
			churnThreads(t, 5000)
			var s kdcbpf.Snapshot
			if err := tr.Read(&s); err != nil {
				t.Fatal(err)
			}
			if s.ThreadsFull != 0 {
				t.Errorf("5,000 threads that exited filled the thread table: %d receives not timed", s.ThreadsFull)
			}
			// The KDC, started later, watched with this process.
			if err := r.StartKDC(context.Background()); err != nil {
				t.Fatal(err)
			}
			if err := tr.Watch(append([]int{self}, r.KDCPids()...)); err != nil {
				t.Fatal(err)
			}
			from := testutil.LogSize(t, r.KDCLog)
			before := s.Service[kdcbpf.RequestAS][kdcbpf.TransportUDP].Count
			freshAS(t, r, 50)
			if err := tr.Read(&s); err != nil {
				t.Fatal(err)
			}
			logged := testutil.LogCount(t, r.KDCLog, from, `\bAS_REQ\b`)
			got := s.Service[kdcbpf.RequestAS][kdcbpf.TransportUDP].Count - before
			t.Logf("after 5,000 threads: the KDC logged %d AS_REQ, %d timed; threads full %d", logged, got, s.ThreadsFull)
			if logged == 0 || got != uint64(logged) {
				t.Errorf("the KDC started after 5,000 threads: %d AS requests timed, its log has %d", got, logged)
			}
			sc := gather(t, reg)
			if v := sc.Value("krb5_kdc_service_tracing_up"); v != 1 {
				t.Errorf("krb5_kdc_service_tracing_up %v, want 1", v)
			}
			if v := sc.Value("krb5_kdc_service_tracing_errors_total", "reason", "map_full"); v != 0 {
				t.Errorf("map_full %v, want 0", v)
			}
		})
	}
}

// churnThreads runs n threads of this process, at most 50 at a time,
// each of which reads one datagram from a UDP socket on 127.0.0.1 and
// exits (a goroutine that returns locked to its thread ends the thread).
func churnThreads(t *testing.T, n int) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("udp", "127.0.0.1:"+strconv.Itoa(sa.(*unix.SockaddrInet4).Port))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	sem := make(chan struct{}, 50)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var fails int
	for range n {
		if _, err := conn.Write([]byte{0x6a, 0, 0, 0, 0}); err != nil {
			t.Fatal(err)
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
			buf := make([]byte, 16)
			if _, _, err := unix.Recvfrom(fd, buf, 0); err != nil {
				mu.Lock()
				fails++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if fails > 0 {
		t.Fatalf("%d of %d threads could not read their datagram", fails, n)
	}
}

// TestKDCServiceTracedWhileFull: tracing_up is 0 for a scrape whose
// interval had a full table or that left a process unwatched, 1 again
// once nothing more is refused; the log says it once per episode.
func TestKDCServiceTracedWhileFull(t *testing.T) {
	logs := &testutil.LockedBuffer{}
	c := &kdcServiceCollector{logger: log.NewLogfmtLogger(logs), pids: []int{100}}
	steps := []struct {
		threadsFull uint64
		notWatched  int
		up          bool
		logs        int
	}{
		{0, 0, true, 0},
		{3, 0, false, 1},   // receives refused: not every request timed
		{7, 0, false, 1},   // still refused: logged once
		{7, 0, true, 1},    // no more since the scrape before
		{7, 600, false, 2}, // processes left out: a new episode
		{7, 0, true, 2},
	}
	for i, s := range steps {
		c.snap.ThreadsFull, c.snap.NotWatched = s.threadsFull, s.notWatched
		if got := c.traced(); got != s.up {
			t.Errorf("step %d (threads full %d, not watched %d): traced %v, want %v", i, s.threadsFull, s.notWatched, got, s.up)
		}
		if n := strings.Count(logs.String(), "table of the BPF program is full"); n != s.logs {
			t.Errorf("step %d: %d log lines, want %d", i, n, s.logs)
		}
	}
	c.pids = nil
	if c.traced() {
		t.Error("traced with no krb5kdc")
	}
}

// TestKDCServiceOverfullWatched: a pid file naming a process called
// krb5kdc with 1,100 children of the same name (copies of sh and sleep,
// configured as the KDC's executables),
// the reviewer's namesakes, more than the program's watched table holds
// (1,024: the whole scrape failed, "key too big for map"): the scrape
// does not fail, 512 are watched, the 589 left out are counted as
// map_full at each scrape and tracing_up is 0 (its requests would not all
// be timed), until they exit.
func TestKDCServiceOverfullWatched(t *testing.T) {
	testutil.RequireProgram(t, "sh", "sleep")
	const kids = 1100
	dir := t.TempDir()
	for _, l := range []struct{ sub, target string }{{"sup", "sh"}, {"kid", "sleep"}} {
		path, err := exec.LookPath(l.target)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(filepath.Join(dir, l.sub), 0o755); err != nil {
			t.Fatal(err)
		}
		// A copy, not a link: a configured executable is accepted
		// through links only to a file of the same name.
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, l.sub, "krb5kdc"), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	pidFile := filepath.Join(dir, "krb5kdc.pid")
	script := fmt.Sprintf(`echo $$ > %s.tmp; i=0; while [ $i -lt %d ]; do %s 60 & i=$((i+1)); done; mv %s.tmp %s; wait`,
		pidFile, kids, filepath.Join(dir, "kid", "krb5kdc"), pidFile, pidFile)
	sup := exec.Command(filepath.Join(dir, "sup", "krb5kdc"), "-c", script)
	sup.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := sup.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() {
		syscall.Kill(-sup.Process.Pid, syscall.SIGKILL)
		sup.Wait()
	}
	t.Cleanup(stop)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(pidFile); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the namesakes did not start in 30 s")
		}
	}
	cfg := Config{ProcFS: "/proc", Process: true, KDCService: true, KDCPidFile: pidFile}
	// They are namesakes that discovery accepts: their executables
	// configured as the KDC's (--collector.process.exe), as a site with
	// its KDC elsewhere would, so that the program's table is what is
	// tested.
	cfg.Identity.Executables = []string{filepath.Join(dir, "sup", "krb5kdc"), filepath.Join(dir, "kid", "krb5kdc")}
	cfg.Identity.SystemdDir = noSystemd
	cfg.KadmindPidFile = filepath.Join(dir, "kadmind.pid") // never written
	cfg.KpropdPidFile = filepath.Join(dir, "kpropd.pid")
	logs := &testutil.LockedBuffer{}
	c, err := New(log.NewLogfmtLogger(logs), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	want := kids + 1 - kdcbpf.MaxWatched
	for scrape := 1; scrape <= 2; scrape++ {
		s := gather(t, reg) // fails the test on a scrape error
		if v := s.Value("krb5_kdc_service_tracing_errors_total", "reason", "load"); v != 0 {
			if !testutil.InCI() && strings.Contains(logs.String(), "permission") {
				t.Skipf("BPF not permitted here: %s", logs.String())
			}
			t.Fatalf("the program did not load: %s", logs.String())
		}
		t.Logf("scrape %d: processes %v, tracing_up %v, map_full %v", scrape, s.Value("krb5_process_processes", "program", "krb5kdc"), s.Value("krb5_kdc_service_tracing_up"), s.Value("krb5_kdc_service_tracing_errors_total", "reason", "map_full"))
		if v := s.Value("krb5_kdc_service_tracing_up"); v != 0 {
			t.Errorf("scrape %d: tracing_up %v with %d processes named krb5kdc, %d watched at most", scrape, v, kids+1, kdcbpf.MaxWatched)
		}
		if v := s.Value("krb5_kdc_service_tracing_errors_total", "reason", "map_full"); v != float64(scrape*want) {
			t.Errorf("scrape %d: map_full %v, want %d (%d left out at each scrape)", scrape, v, scrape*want, want)
		}
	}
	if n := strings.Count(logs.String(), "table of the BPF program is full"); n != 1 {
		t.Errorf("%d log lines about the full table, want 1:\n%s", n, logs.String())
	}
	stop()
	if v := gather(t, reg).Value("krb5_kdc_service_tracing_up"); v != 0 {
		t.Errorf("tracing_up %v with no krb5kdc", v)
	}
}
