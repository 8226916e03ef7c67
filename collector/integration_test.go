package collector

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/procfs"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// Integration tests run the collectors against real MIT daemons started by
// the realm harness, reading the real /proc.

func upRealm(t *testing.T, workers int, kadmind bool) *realm.Realm {
	t.Helper()
	return realmtest.Realm(t, realm.Options{Users: 5, Services: 2, Workers: workers, NoKadmind: !kadmind})
}

// realmConfig watches this realm's daemons only, through their pid files:
// other tests may run KDCs on this machine at the same time.
func realmConfig(r *realm.Realm) Config {
	cfg := DefaultConfig()
	cfg.KDCPidFile = r.KDCPidFile
	cfg.KadmindPidFile = r.KadmindPidFile
	cfg.KpropdPidFile = filepath.Join(r.Dir, "kpropd.pid") // never written
	cfg.KDCConfPath = r.KDCConf
	cfg.Krb5ConfPath = r.Krb5Conf
	// The harness's daemons run in no systemd unit: an unprivileged
	// child (which cannot read their executable) on a systemd host would
	// reject them (kdcproc.Rule).
	cfg.Identity.SystemdDir = filepath.Join(r.Dir, "no-systemd")
	return cfg
}

// asLoad sends n AS requests for a principal that does not exist over UDP,
// each waiting up to 2 s for its answer (a request left unanswered on a
// busy machine is not an error here), bounded by 20 s, so the KDC uses
// some CPU.
func asLoad(t *testing.T, r *realm.Realm, n int) {
	t.Helper()
	conn, b := asConn(t, r, "collector-load")
	defer conn.Close()
	buf := make([]byte, 4096)
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; i < n && time.Now().Before(deadline); i++ {
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := conn.Read(buf); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("request %d: %v", i, err)
		}
	}
}

// asConn returns a UDP connection to the realm's KDC and an AS request
// for name, a principal that does not exist.
func asConn(t *testing.T, r *realm.Realm, name string) (net.Conn, []byte) {
	t.Helper()
	b, err := realm.ASRequest(r.Realm, name)
	if err != nil {
		t.Fatal(err)
	}
	return dialKDC(t, r), b
}

// awaitReply reads the KDC's next reply on conn (failing after 5 s) and
// returns when it came.
func awaitReply(t *testing.T, conn net.Conn) time.Time {
	t.Helper()
	buf := make([]byte, 4096)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(buf); err != nil {
		t.Fatalf("no answer from the KDC: %v", err)
	}
	return time.Now()
}

// dialKDC connects to r's KDC over UDP; the test's end closes it.
func dialKDC(t *testing.T, r *realm.Realm) net.Conn {
	t.Helper()
	conn, err := net.Dial("udp", r.KDCAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// loadUntilTick sends AS requests in batches of 500 until the pids' own
// /proc/PID/stat show at least one clock tick of CPU time, so that the CPU
// checks compare real numbers; bounded by 40 batches and 60 s. How much
// CPU the machine grants in a window does not matter, only that the work
// was done: 20,000 requests cost any KDC far more than one tick.
func loadUntilTick(t *testing.T, r *realm.Realm, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for batch := 0; ; batch++ {
		if u, s := ticks(t, pids...); u+s > 0 {
			return
		}
		if batch == 40 || time.Now().After(deadline) {
			t.Fatalf("%d requests in %d batches left no CPU tick in /proc/PID/stat of %v", batch*500, batch, pids)
		}
		asLoad(t, r, 500)
	}
}

// ticks sums utime and stime of the pids from /proc/PID/stat.
func ticks(t *testing.T, pids ...int) (user, sys float64) {
	t.Helper()
	for _, pid := range pids {
		st := statFields(t, "/proc", pid)
		user += st.utime
		sys += st.stime
	}
	return user, sys
}

// checkCPU checks that the CPU seconds reported lie between the ticks read
// just before and just after the scrape: they match each process's stat
// to the tick.
func checkCPU(t *testing.T, what string, got float64, before, after float64) {
	t.Helper()
	g := math.Round(got * userHZ)
	if g < before || g > after {
		t.Errorf("%s: %v ticks reported, /proc/PID/stat said %v before and %v after the scrape", what, g, before, after)
	}
}

func TestIntegrationSingleProcess(t *testing.T) {
	t.Parallel()
	r := upRealm(t, 0, false)
	pids := r.KDCPids()
	if len(pids) != 1 {
		t.Fatalf("KDC pids %v", pids)
	}
	loadUntilTick(t, r, pids...)
	_, reg := newTestCollector(t, realmConfig(r))
	u0, s0 := ticks(t, pids...)
	fds0 := listFDs(t, pids)
	s := gather(t, reg)
	fds1 := listFDs(t, pids)
	u1, s1 := ticks(t, pids...)
	checkCPU(t, "krb5kdc user", s.Value("krb5_process_cpu_seconds_total", "program", "krb5kdc", "mode", "user"), u0, u1)
	checkCPU(t, "krb5kdc system", s.Value("krb5_process_cpu_seconds_total", "program", "krb5kdc", "mode", "system"), s0, s1)

	for name, want := range map[string]float64{
		"krb5_process_up/krb5kdc": 1, "krb5_process_processes/krb5kdc": 1,
		"krb5_process_up/kadmind": 0, "krb5_process_up/kpropd": 0,
	} {
		metric, prog := filepath.Split(name)
		if v := s.Value(filepath.Clean(metric), "program", prog); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	if v := s.Value("krb5_kdc_workers"); v != 0 {
		t.Errorf("workers = %v", v)
	}
	if v := s.Value("krb5_kdc_workers_configured"); v != 0 {
		t.Errorf("workers_configured = %v", v)
	}
	if n := s.Count("krb5_kdc_worker_cpu_seconds_total"); n != 0 {
		t.Errorf("%d worker series for a single-process KDC", n)
	}
	if v := s.Value("krb5_process_open_fds", "program", "krb5kdc"); v < min(fds0, fds1) || v > max(fds0, fds1) {
		t.Errorf("open fds = %v, /proc/PID/fd held %v before and %v after the scrape", v, fds0, fds1)
	}
	if v := s.Value("krb5_process_resident_memory_bytes", "program", "krb5kdc"); v < 1<<20 {
		t.Errorf("RSS = %v", v)
	}
	checkNetwork(t, s, r)
	for _, name := range []string{"process", "network", "kdcconf"} {
		if v := s.Value("krb5_exporter_collector_scrape_success", "collector", name); v != 1 {
			t.Errorf("collector %s failed", name)
		}
	}
}

// checkNetwork: the harness KDC listens on one UDP and one TCP socket on
// KDCAddr, with MIT's default backlog.
func checkNetwork(t *testing.T, s *scrape, r *realm.Realm) {
	t.Helper()
	if n := s.Count("krb5_kdc_udp_receive_queue_bytes"); n != 1 {
		t.Errorf("%d UDP sockets, want 1", n)
	}
	if _, ok := s.Find("krb5_kdc_udp_drops_total", "address", r.KDCAddr); !ok {
		t.Errorf("no UDP socket on %s", r.KDCAddr)
	}
	if v := s.Value("krb5_kdc_tcp_listen_queue_limit", "address", r.KDCAddr); v != 5 {
		t.Errorf("accept queue limit = %v, want 5", v)
	}
	if _, ok := s.Find("krb5_host_udp_receive_buffer_errors_total", "proto", "udp"); !ok {
		t.Error("no host RcvbufErrors")
	}
	if _, ok := s.Find("krb5_host_tcp_listen_overflows_total"); !ok {
		t.Error("no host ListenOverflows")
	}
	if v := s.Value("krb5_kdcconf_info", "realm", r.Realm, "db_library", "db2", "spake_groups", "edwards25519"); v != 1 {
		t.Errorf("info = %v", v)
	}
}

// TestIntegrationWorkers: krb5kdc -w 2 and kadmind; then a worker is
// killed (MIT 1.20's supervisor then stops the whole KDC: it does not
// restart workers), the KDC is started again, and finally stopped.
func TestIntegrationWorkers(t *testing.T) {
	t.Parallel()
	r := upRealm(t, 2, true)
	pids := r.KDCPids()
	if len(pids) != 3 {
		t.Fatalf("KDC pids %v, want supervisor and 2 workers", pids)
	}
	loadUntilTick(t, r, pids...)
	_, reg := newTestCollector(t, realmConfig(r))
	kadmind := r.KadmindPid()

	u0, s0 := ticks(t, pids...)
	w0u0, w0s0 := ticks(t, pids[1])
	w1u0, w1s0 := ticks(t, pids[2])
	ku0, ks0 := ticks(t, kadmind)
	s := gather(t, reg)
	u1, s1 := ticks(t, pids...)
	w0u1, w0s1 := ticks(t, pids[1])
	w1u1, w1s1 := ticks(t, pids[2])
	ku1, ks1 := ticks(t, kadmind)
	checkCPU(t, "krb5kdc user", s.Value("krb5_process_cpu_seconds_total", "program", "krb5kdc", "mode", "user"), u0, u1)
	checkCPU(t, "krb5kdc system", s.Value("krb5_process_cpu_seconds_total", "program", "krb5kdc", "mode", "system"), s0, s1)
	checkCPU(t, "kadmind user", s.Value("krb5_process_cpu_seconds_total", "program", "kadmind", "mode", "user"), ku0, ku1)
	checkCPU(t, "kadmind system", s.Value("krb5_process_cpu_seconds_total", "program", "kadmind", "mode", "system"), ks0, ks1)
	// Worker 0 is the lower pid: forked first, so never younger.
	checkCPU(t, "worker 0 user", s.Value("krb5_kdc_worker_cpu_seconds_total", "worker", "0", "mode", "user"), w0u0, w0u1)
	checkCPU(t, "worker 0 system", s.Value("krb5_kdc_worker_cpu_seconds_total", "worker", "0", "mode", "system"), w0s0, w0s1)
	checkCPU(t, "worker 1 user", s.Value("krb5_kdc_worker_cpu_seconds_total", "worker", "1", "mode", "user"), w1u0, w1u1)
	checkCPU(t, "worker 1 system", s.Value("krb5_kdc_worker_cpu_seconds_total", "worker", "1", "mode", "system"), w1s0, w1s1)
	if v := s.Value("krb5_process_processes", "program", "krb5kdc"); v != 3 {
		t.Errorf("krb5kdc processes = %v", v)
	}
	if v := s.Value("krb5_process_up", "program", "kadmind"); v != 1 {
		t.Errorf("kadmind up = %v", v)
	}
	if v, w := s.Value("krb5_kdc_workers"), s.Value("krb5_kdc_workers_configured"); v != 2 || w != 2 {
		t.Errorf("workers = %v, configured = %v", v, w)
	}
	checkNetwork(t, s, r)
	oldStart := s.Value("krb5_kdc_worker_start_time_seconds", "worker", "1")

	// Kill worker 0. The KDC goes down: up 0 and no series of dead pids.
	if err := syscall.Kill(pids[1], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s = waitScrape(t, reg, func(s *scrape) bool { return s.Value("krb5_process_up", "program", "krb5kdc") == 0 })
	kdcDown(t, s)
	if v := s.Value("krb5_process_up", "program", "kadmind"); v != 1 {
		t.Errorf("kadmind up = %v after the KDC died", v)
	}

	// Started again: one restart, new workers under the same indexes.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.StartKDC(ctx); err != nil {
		t.Fatal(err)
	}
	// The KDC answers as soon as its first worker runs; the supervisor may
	// not have forked the second yet.
	s = waitScrape(t, reg, func(s *scrape) bool { v, _ := s.Find("krb5_kdc_workers"); return v == 2 })
	if v := s.Value("krb5_process_restarts_total", "program", "krb5kdc"); v != 1 {
		t.Errorf("restarts = %v, want 1", v)
	}
	if v := s.Value("krb5_process_restarts_total", "program", "kadmind"); v != 0 {
		t.Errorf("kadmind restarts = %v", v)
	}
	if n := s.Count("krb5_kdc_worker_start_time_seconds"); n != 2 {
		t.Errorf("%d worker series after the restart, want 2", n)
	}
	for _, w := range []string{"0", "1"} {
		if v := s.Value("krb5_kdc_worker_start_time_seconds", "worker", w); v <= oldStart {
			t.Errorf("worker %s started at %v, not after the old one (%v)", w, v, oldStart)
		}
	}

	// Stopped.
	if err := r.StopKDC(); err != nil {
		t.Fatal(err)
	}
	s = gather(t, reg)
	kdcDown(t, s)
	if v := s.Value("krb5_process_restarts_total", "program", "krb5kdc"); v != 1 {
		t.Errorf("restarts = %v while down, want 1", v)
	}
}

// waitScrape scrapes until cond holds, for at most 15 s.
func waitScrape(t *testing.T, reg prometheus.Gatherer, cond func(*scrape) bool) *scrape {
	t.Helper()
	var s *scrape
	testutil.Eventually(t, 15*time.Second, "a scrape meeting the condition", func() bool {
		s = gather(t, reg)
		return cond(s)
	})
	return s
}

// stopKDC sends SIGSTOP to the KDC's processes and SIGCONT at cleanup.
func stopKDC(t *testing.T, r *realm.Realm) func() {
	t.Helper()
	pids := r.KDCPids()
	for _, p := range pids {
		syscall.Kill(p, syscall.SIGSTOP)
	}
	cont := func() {
		for _, p := range pids {
			syscall.Kill(p, syscall.SIGCONT)
		}
	}
	t.Cleanup(cont)
	return cont
}

// procUDPStats sums the receive queue and drops of the KDC's unconnected
// UDP sockets on r.KDCAddr from /proc/PID/net/udp{,6} of its processes,
// parsed as the collector's /proc path does.
func procUDPStats(t *testing.T, r *realm.Realm) (queue, drops float64) {
	t.Helper()
	pfs, err := procfs.NewFS("/proc")
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[uint64]bool{}
	for _, pid := range r.KDCPids() {
		in, err := socketInodes(pfs, pid)
		if err != nil {
			t.Fatal(err)
		}
		maps.Copy(inodes, in)
	}
	for _, name := range []string{"udp", "udp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", r.KDCPids()[0], name))
		if err != nil {
			t.Fatal(err)
		}
		if err := parseUDPLines(b, func(l udpLine) {
			if inodes[l.inode] && l.st == udpUnconnected && hostPort(l.ip, l.port) == r.KDCAddr {
				queue += float64(l.rxQueue)
				drops += float64(l.drops)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	return queue, drops
}

// networkOf returns c's network collector.
func networkOf(t *testing.T, c *KDCCollector) *networkCollector {
	t.Helper()
	for _, nc := range c.collectors {
		if n, ok := nc.c.(*networkCollector); ok {
			return n
		}
	}
	t.Fatal("no network collector")
	return nil
}

// TestIntegrationUDPFlood stops the KDC briefly and floods its UDP port
// on loopback (5,000 datagrams, at most 60 s): its receive buffer
// fills and the kernel drops the rest, which the drop counters show.
func TestIntegrationUDPFlood(t *testing.T) {
	t.Parallel()
	r := upRealm(t, 2, false)
	c, reg := newTestCollector(t, realmConfig(r))
	s := gather(t, reg)
	drops0 := s.Value("krb5_kdc_udp_drops_total", "address", r.KDCAddr)
	rcvbuf0 := s.Value("krb5_host_udp_receive_buffer_errors_total", "proto", "udp")
	inErr0 := s.Value("krb5_host_udp_in_errors_total", "proto", "udp")

	cont := stopKDC(t, r)
	conn := dialKDC(t, r)
	// 5,000 datagrams are 20 times what the receive buffer holds: all of
	// them are sent (the time bound only guards against a hang), so that
	// drops do not depend on how fast this machine sends.
	payload := make([]byte, 1000)
	deadline := time.Now().Add(60 * time.Second)
	sent := 0
	for ; sent < 5000 && time.Now().Before(deadline); sent++ {
		if _, err := conn.Write(payload); err != nil {
			t.Fatalf("datagram %d: %v", sent, err)
		}
	}
	s = gather(t, reg)
	if v := s.Value("krb5_process_up", "program", "krb5kdc"); v != 1 {
		t.Errorf("a stopped (not dead) KDC reported up = %v", v)
	}
	queued := s.Value("krb5_kdc_udp_receive_queue_bytes", "address", r.KDCAddr)
	drops := s.Value("krb5_kdc_udp_drops_total", "address", r.KDCAddr) - drops0
	if queued == 0 {
		t.Error("nothing queued on the stopped KDC's socket")
	}
	if drops <= 0 || drops >= float64(sent) {
		t.Errorf("socket drops rose by %v for %d datagrams sent", drops, sent)
	}
	// Host-wide counters: other sockets may add to them, never subtract.
	if v := s.Value("krb5_host_udp_receive_buffer_errors_total", "proto", "udp") - rcvbuf0; v < drops {
		t.Errorf("RcvbufErrors rose by %v, less than the socket's %v drops", v, drops)
	}
	if v := s.Value("krb5_host_udp_in_errors_total", "proto", "udp") - inErr0; v < drops {
		t.Errorf("InErrors rose by %v, less than the socket's %v drops", v, drops)
	}
	t.Logf("sent %d datagrams: %v bytes queued, %v dropped", sent, queued, drops)

	// The same as the KDC's /proc/PID/net/udp{,6} show, through an exact
	// sock_diag request per socket (the inodes did not change since the
	// first scrape's dump), and again through a dump.
	wantQ, wantD := procUDPStats(t, r)
	nc := networkOf(t, c)
	if len(nc.udpMemo.socks) == 0 || nc.diag == nil {
		t.Fatalf("UDP sockets not from sock_diag: memo %+v", nc.udpMemo)
	}
	if queued != wantQ || drops+drops0 != wantD {
		t.Errorf("by lookup: queued %v, drops %v; /proc/PID/net/udp: %v, %v", queued, drops+drops0, wantQ, wantD)
	}
	nc.udpMemo = sockMemo{}
	s = gather(t, reg)
	if len(nc.udpMemo.socks) == 0 {
		t.Fatal("no dump")
	}
	if q, d := s.Value("krb5_kdc_udp_receive_queue_bytes", "address", r.KDCAddr), s.Value("krb5_kdc_udp_drops_total", "address", r.KDCAddr); q != wantQ || d != wantD {
		t.Errorf("by dump: queued %v, drops %v; /proc/PID/net/udp: %v, %v", q, d, wantQ, wantD)
	}

	// Resumed: the KDC drains the queue; the counter does not go back.
	cont()
	s = waitScrape(t, reg, func(s *scrape) bool {
		return s.Value("krb5_kdc_udp_receive_queue_bytes", "address", r.KDCAddr) == 0
	})
	if v := s.Value("krb5_kdc_udp_drops_total", "address", r.KDCAddr) - drops0; v < drops {
		t.Errorf("drops fell from %v to %v", drops, v)
	}
}

// TestIntegrationTCPBacklog stops the KDC and opens TCP connections until
// its accept queue (MIT's default backlog of 5) is full: the queue length
// reaches the limit plus one and the kernel counts an overflow for the
// next SYN. Seven dials.
func TestIntegrationTCPBacklog(t *testing.T) {
	t.Parallel()
	r := upRealm(t, 0, false)
	withConns := realmConfig(r)
	withConns.TCPConnections = true
	_, reg := newTestCollector(t, withConns)
	s := gather(t, reg)
	over0 := s.Value("krb5_host_tcp_listen_overflows_total")
	hostDrops0 := s.Value("krb5_host_tcp_listen_drops_total")
	drops0, ok := s.Find("krb5_kdc_tcp_listen_drops_total", "address", r.KDCAddr)
	if !ok {
		t.Fatalf("no krb5_kdc_tcp_listen_drops_total for %s", r.KDCAddr)
	}
	limit := s.Value("krb5_kdc_tcp_listen_queue_limit", "address", r.KDCAddr)

	if limit != 5 {
		t.Fatalf("accept queue limit %v, want MIT's default backlog 5", limit)
	}

	cont := stopKDC(t, r)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// The kernel queues up to limit+1 connections (it drops a SYN once the
	// queue holds more than limit). Each connection is waited for in the
	// queue before the next dial, so that the count does not depend on how
	// soon the kernel processes the client's last ACK.
	for len(conns) < int(limit)+1 {
		c, err := net.DialTimeout("tcp", r.KDCAddr, 10*time.Second)
		if err != nil {
			t.Fatalf("connection %d with room in the queue: %v", len(conns)+1, err)
		}
		conns = append(conns, c)
		n := float64(len(conns))
		waitScrape(t, reg, func(s *scrape) bool {
			return s.Value("krb5_kdc_tcp_listen_queue_length", "address", r.KDCAddr) >= n
		})
	}
	// The queue is full: one more SYN is dropped and counted as an
	// overflow. What the dial returns is not the point (a timeout here
	// proves nothing), the kernel's counter is.
	if c, err := net.DialTimeout("tcp", r.KDCAddr, 300*time.Millisecond); err == nil {
		conns = append(conns, c)
	}
	s = waitScrape(t, reg, func(s *scrape) bool {
		return s.Value("krb5_host_tcp_listen_overflows_total") > over0
	})
	// The KDC socket's own drops: at least the SYN just dropped, at most
	// what the host's listeners dropped meanwhile (other tests' too).
	drops := s.Value("krb5_kdc_tcp_listen_drops_total", "address", r.KDCAddr) - drops0
	if hostDrops := s.Value("krb5_host_tcp_listen_drops_total") - hostDrops0; drops < 1 || drops > hostDrops {
		t.Errorf("the KDC socket dropped %v, the host's listeners %v: want 1 or more, at most the host's", drops, hostDrops)
	}
	q := s.Value("krb5_kdc_tcp_listen_queue_length", "address", r.KDCAddr)
	if q != limit+1 {
		t.Errorf("accept queue = %v with %d connections made and a limit of %v, want %v", q, len(conns), limit, limit+1)
	}
	if v := s.Value("krb5_kdc_tcp_connections", "state", "established"); v < limit+1 {
		t.Errorf("established = %v, want at least %v", v, limit+1)
	}
	t.Logf("%d connections made; accept queue %v, limit %v", len(conns), q, limit)

	// Without the connection count (the default: no walk of the connection
	// table), the accept queue is still read, from the listener dump.
	_, reg2 := newTestCollector(t, realmConfig(r))
	s2 := gather(t, reg2)
	if v := s2.Value("krb5_kdc_tcp_listen_queue_length", "address", r.KDCAddr); v != q {
		t.Errorf("accept queue = %v without connection counting, %v with", v, q)
	}
	if n := s2.Count("krb5_kdc_tcp_connections"); n != 0 {
		t.Errorf("%d connection series with connection counting off", n)
	}
	cont()
}
