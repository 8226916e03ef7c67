package collector

import (
	"context"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"math"
	"net"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/realm"
)

// Integration tests run the collectors against real MIT daemons started by
// the realm harness, reading the real /proc.

func upRealm(t *testing.T, workers int, kadmind bool) *realm.Realm {
	t.Helper()
	testutil.RequireMIT(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := realm.Up(ctx, realm.Options{Dir: t.TempDir(), Users: 5, Services: 2, Fillers: -1,
		Workers: workers, NoKadmind: !kadmind})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Down() })
	// Up returns once the KDC answers: the supervisor may still be forking
	// workers, and kadmind may not have written its pid file yet.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if len(r.KDCPids()) == workers+1 && (!kadmind || r.KadmindPid() > 0) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: KDC pids %v, kadmind %d", r.KDCPids(), r.KadmindPid())
		}
	}
	return r
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
	return cfg
}

// asLoad sends n AS requests for a principal that does not exist over UDP,
// each waiting for its answer, bounded by 20 s, so the KDC uses some CPU.
func asLoad(t *testing.T, r *realm.Realm, n int) {
	t.Helper()
	b, err := realm.ASRequest(r.Realm, "collector-load")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("udp", r.KDCAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	buf := make([]byte, 4096)
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; i < n && time.Now().Before(deadline); i++ {
		if _, err := conn.Write(b); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := conn.Read(buf); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
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
	asLoad(t, r, 1000)
	_, reg := newTestCollector(t, realmConfig(r))
	pids := r.KDCPids()
	if len(pids) != 1 {
		t.Fatalf("KDC pids %v", pids)
	}
	u0, s0 := ticks(t, pids...)
	fds0 := countFDs(t, pids)
	s := gather(t, reg)
	fds1 := countFDs(t, pids)
	u1, s1 := ticks(t, pids...)
	checkCPU(t, "krb5kdc user", s.value("krb5_process_cpu_seconds_total", "program", "krb5kdc", "mode", "user"), u0, u1)
	checkCPU(t, "krb5kdc system", s.value("krb5_process_cpu_seconds_total", "program", "krb5kdc", "mode", "system"), s0, s1)
	if u1+s1 == 0 {
		t.Error("1000 requests left no CPU tick: the check above proves little")
	}

	for name, want := range map[string]float64{
		"krb5_process_up/krb5kdc": 1, "krb5_process_processes/krb5kdc": 1,
		"krb5_process_up/kadmind": 0, "krb5_process_up/kpropd": 0,
	} {
		metric, prog := filepath.Split(name)
		if v := s.value(filepath.Clean(metric), "program", prog); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	if v := s.value("krb5_kdc_workers"); v != 0 {
		t.Errorf("workers = %v", v)
	}
	if v := s.value("krb5_kdc_workers_configured"); v != 0 {
		t.Errorf("workers_configured = %v", v)
	}
	if n := s.count("krb5_kdc_worker_cpu_seconds_total"); n != 0 {
		t.Errorf("%d worker series for a single-process KDC", n)
	}
	if v := s.value("krb5_process_open_fds", "program", "krb5kdc"); v < min(fds0, fds1) || v > max(fds0, fds1) {
		t.Errorf("open fds = %v, /proc/PID/fd held %v before and %v after the scrape", v, fds0, fds1)
	}
	if v := s.value("krb5_process_resident_memory_bytes", "program", "krb5kdc"); v < 1<<20 {
		t.Errorf("RSS = %v", v)
	}
	checkNetwork(t, s, r)
	for _, name := range []string{"process", "network", "kdcconf"} {
		if v := s.value("krb5_exporter_collector_scrape_success", "collector", name); v != 1 {
			t.Errorf("collector %s failed", name)
		}
	}
}

// checkNetwork: the harness KDC listens on one UDP and one TCP socket on
// KDCAddr, with MIT's default backlog.
func checkNetwork(t *testing.T, s *scrape, r *realm.Realm) {
	t.Helper()
	if n := s.count("krb5_kdc_udp_receive_queue_bytes"); n != 1 {
		t.Errorf("%d UDP sockets, want 1", n)
	}
	if _, ok := s.find("krb5_kdc_udp_drops_total", "address", r.KDCAddr); !ok {
		t.Errorf("no UDP socket on %s", r.KDCAddr)
	}
	if v := s.value("krb5_kdc_tcp_listen_queue_limit", "address", r.KDCAddr); v != 5 {
		t.Errorf("accept queue limit = %v, want 5", v)
	}
	if _, ok := s.find("krb5_host_udp_receive_buffer_errors_total", "proto", "udp"); !ok {
		t.Error("no host RcvbufErrors")
	}
	if _, ok := s.find("krb5_host_tcp_listen_overflows_total"); !ok {
		t.Error("no host ListenOverflows")
	}
	if v := s.value("krb5_kdcconf_info", "realm", r.Realm, "db_library", "db2", "spake_groups", "edwards25519"); v != 1 {
		t.Errorf("info = %v", v)
	}
}

// TestIntegrationWorkers: krb5kdc -w 2 and kadmind; then a worker is
// killed (MIT 1.20's supervisor then stops the whole KDC: it does not
// restart workers), the KDC is started again, and finally stopped.
func TestIntegrationWorkers(t *testing.T) {
	t.Parallel()
	r := upRealm(t, 2, true)
	asLoad(t, r, 2000)
	_, reg := newTestCollector(t, realmConfig(r))
	pids := r.KDCPids()
	if len(pids) != 3 {
		t.Fatalf("KDC pids %v, want supervisor and 2 workers", pids)
	}
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
	checkCPU(t, "krb5kdc user", s.value("krb5_process_cpu_seconds_total", "program", "krb5kdc", "mode", "user"), u0, u1)
	checkCPU(t, "krb5kdc system", s.value("krb5_process_cpu_seconds_total", "program", "krb5kdc", "mode", "system"), s0, s1)
	checkCPU(t, "kadmind user", s.value("krb5_process_cpu_seconds_total", "program", "kadmind", "mode", "user"), ku0, ku1)
	checkCPU(t, "kadmind system", s.value("krb5_process_cpu_seconds_total", "program", "kadmind", "mode", "system"), ks0, ks1)
	// Worker 0 is the lower pid: forked first, so never younger.
	checkCPU(t, "worker 0 user", s.value("krb5_kdc_worker_cpu_seconds_total", "worker", "0", "mode", "user"), w0u0, w0u1)
	checkCPU(t, "worker 0 system", s.value("krb5_kdc_worker_cpu_seconds_total", "worker", "0", "mode", "system"), w0s0, w0s1)
	checkCPU(t, "worker 1 user", s.value("krb5_kdc_worker_cpu_seconds_total", "worker", "1", "mode", "user"), w1u0, w1u1)
	checkCPU(t, "worker 1 system", s.value("krb5_kdc_worker_cpu_seconds_total", "worker", "1", "mode", "system"), w1s0, w1s1)
	if u1+s1 == 0 {
		t.Error("2000 requests left no CPU tick: the checks above prove little")
	}
	if v := s.value("krb5_process_processes", "program", "krb5kdc"); v != 3 {
		t.Errorf("krb5kdc processes = %v", v)
	}
	if v := s.value("krb5_process_up", "program", "kadmind"); v != 1 {
		t.Errorf("kadmind up = %v", v)
	}
	if v, w := s.value("krb5_kdc_workers"), s.value("krb5_kdc_workers_configured"); v != 2 || w != 2 {
		t.Errorf("workers = %v, configured = %v", v, w)
	}
	checkNetwork(t, s, r)
	oldStart := s.value("krb5_kdc_worker_start_time_seconds", "worker", "1")

	// Kill worker 0. The KDC goes down: up 0 and no series of dead pids.
	if err := syscall.Kill(pids[1], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	s = waitScrape(t, reg, func(s *scrape) bool { return s.value("krb5_process_up", "program", "krb5kdc") == 0 })
	kdcDown(t, s)
	if v := s.value("krb5_process_up", "program", "kadmind"); v != 1 {
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
	s = waitScrape(t, reg, func(s *scrape) bool { v, _ := s.find("krb5_kdc_workers"); return v == 2 })
	if v := s.value("krb5_process_restarts_total", "program", "krb5kdc"); v != 1 {
		t.Errorf("restarts = %v, want 1", v)
	}
	if v := s.value("krb5_process_restarts_total", "program", "kadmind"); v != 0 {
		t.Errorf("kadmind restarts = %v", v)
	}
	if n := s.count("krb5_kdc_worker_start_time_seconds"); n != 2 {
		t.Errorf("%d worker series after the restart, want 2", n)
	}
	for _, w := range []string{"0", "1"} {
		if v := s.value("krb5_kdc_worker_start_time_seconds", "worker", w); v <= oldStart {
			t.Errorf("worker %s started at %v, not after the old one (%v)", w, v, oldStart)
		}
	}

	// Stopped.
	if err := r.StopKDC(); err != nil {
		t.Fatal(err)
	}
	s = gather(t, reg)
	kdcDown(t, s)
	if v := s.value("krb5_process_restarts_total", "program", "krb5kdc"); v != 1 {
		t.Errorf("restarts = %v while down, want 1", v)
	}
}

// waitScrape scrapes until cond holds, for at most 15 s.
func waitScrape(t *testing.T, reg prometheus.Gatherer, cond func(*scrape) bool) *scrape {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		s := gather(t, reg)
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 15s")
		}
		time.Sleep(20 * time.Millisecond)
	}
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

// TestIntegrationUDPFlood stops the KDC briefly and floods its UDP port
// on loopback (at most 5,000 datagrams, at most 5 s): its receive buffer
// fills and the kernel drops the rest, which the drop counters show.
func TestIntegrationUDPFlood(t *testing.T) {
	t.Parallel()
	r := upRealm(t, 2, false)
	_, reg := newTestCollector(t, realmConfig(r))
	s := gather(t, reg)
	drops0 := s.value("krb5_kdc_udp_drops_total", "address", r.KDCAddr)
	rcvbuf0 := s.value("krb5_host_udp_receive_buffer_errors_total", "proto", "udp")
	inErr0 := s.value("krb5_host_udp_in_errors_total", "proto", "udp")

	cont := stopKDC(t, r)
	conn, err := net.Dial("udp", r.KDCAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	payload := make([]byte, 1000)
	deadline := time.Now().Add(5 * time.Second)
	sent := 0
	for ; sent < 5000 && time.Now().Before(deadline); sent++ {
		if _, err := conn.Write(payload); err != nil {
			t.Fatalf("datagram %d: %v", sent, err)
		}
	}
	s = gather(t, reg)
	if v := s.value("krb5_process_up", "program", "krb5kdc"); v != 1 {
		t.Errorf("a stopped (not dead) KDC reported up = %v", v)
	}
	queued := s.value("krb5_kdc_udp_receive_queue_bytes", "address", r.KDCAddr)
	drops := s.value("krb5_kdc_udp_drops_total", "address", r.KDCAddr) - drops0
	if queued == 0 {
		t.Error("nothing queued on the stopped KDC's socket")
	}
	if drops <= 0 || drops >= float64(sent) {
		t.Errorf("socket drops rose by %v for %d datagrams sent", drops, sent)
	}
	// Host-wide counters: other sockets may add to them, never subtract.
	if v := s.value("krb5_host_udp_receive_buffer_errors_total", "proto", "udp") - rcvbuf0; v < drops {
		t.Errorf("RcvbufErrors rose by %v, less than the socket's %v drops", v, drops)
	}
	if v := s.value("krb5_host_udp_in_errors_total", "proto", "udp") - inErr0; v < drops {
		t.Errorf("InErrors rose by %v, less than the socket's %v drops", v, drops)
	}
	t.Logf("sent %d datagrams: %v bytes queued, %v dropped", sent, queued, drops)

	// Resumed: the KDC drains the queue; the counter does not go back.
	cont()
	s = waitScrape(t, reg, func(s *scrape) bool {
		return s.value("krb5_kdc_udp_receive_queue_bytes", "address", r.KDCAddr) == 0
	})
	if v := s.value("krb5_kdc_udp_drops_total", "address", r.KDCAddr) - drops0; v < drops {
		t.Errorf("drops fell from %v to %v", drops, v)
	}
}

// TestIntegrationTCPBacklog stops the KDC and opens TCP connections until
// its accept queue (MIT's default backlog of 5) is full: the queue length
// reaches the limit and the kernel counts overflows. At most 12 dials, the
// last (dropped) one waiting 300 ms.
func TestIntegrationTCPBacklog(t *testing.T) {
	t.Parallel()
	r := upRealm(t, 0, false)
	_, reg := newTestCollector(t, realmConfig(r))
	s := gather(t, reg)
	over0 := s.value("krb5_host_tcp_listen_overflows_total")
	limit := s.value("krb5_kdc_tcp_listen_queue_limit", "address", r.KDCAddr)

	cont := stopKDC(t, r)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for i := 0; i < 12; i++ {
		c, err := net.DialTimeout("tcp", r.KDCAddr, 300*time.Millisecond)
		if err != nil {
			break // SYN dropped: the queue is full
		}
		conns = append(conns, c)
	}
	// A connection is queued when the server gets the client's last ACK,
	// which may be just after the client's Dial returned.
	s = waitScrape(t, reg, func(s *scrape) bool {
		return s.value("krb5_kdc_tcp_listen_queue_length", "address", r.KDCAddr) >= float64(len(conns))
	})
	// The kernel queues up to limit+1 (it drops when the queue is > limit).
	q := s.value("krb5_kdc_tcp_listen_queue_length", "address", r.KDCAddr)
	if float64(len(conns)) < limit || q > limit+1 {
		t.Errorf("accept queue = %v with %d connections made and a limit of %v", q, len(conns), limit)
	}
	if v := s.value("krb5_kdc_tcp_connections", "state", "established"); v < float64(len(conns)) {
		t.Errorf("established = %v, want at least %d", v, len(conns))
	}
	if v := s.value("krb5_host_tcp_listen_overflows_total"); v <= over0 {
		t.Errorf("ListenOverflows did not rise (%v -> %v)", over0, v)
	}
	t.Logf("%d connections completed before one was dropped; accept queue %v, limit %v", len(conns), q, limit)

	// Without the connection count (no walk of the connection table), the
	// accept queue is still read, from the listener dump.
	cfg := realmConfig(r)
	cfg.TCPConnections = false
	_, reg2 := newTestCollector(t, cfg)
	s2 := gather(t, reg2)
	if v := s2.value("krb5_kdc_tcp_listen_queue_length", "address", r.KDCAddr); v != q {
		t.Errorf("accept queue = %v without connection counting, %v with", v, q)
	}
	if n := s2.count("krb5_kdc_tcp_connections"); n != 0 {
		t.Errorf("%d connection series with connection counting off", n)
	}
	cont()
}
