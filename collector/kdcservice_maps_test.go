package collector

import (
	"context"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/go-kit/log"
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
