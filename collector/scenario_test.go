package collector

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/go-kit/log"
)

// Pids in the fixture (testdata/fixture/proc).
const (
	fxSupervisor = 20256
	fxWorker0    = 20257
	fxWorker1    = 20258
	fxZombie     = 20250 // the supervisor of the KDC killed before the capture
	fxKadmind    = 20254
)

// editableFixture copies the fixture's proc tree into a temp dir.
func editableFixture(t testing.TB) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "proc")
	copyTree(t, filepath.Join(fixtureDir, "proc"), root)
	return root
}

// cloneProc copies process from to pid with the given parent, starting
// startDelta clock ticks after from.
func cloneProc(t testing.TB, root string, from, pid, ppid int, startDelta uint64) {
	t.Helper()
	dst := filepath.Join(root, strconv.Itoa(pid))
	copyTree(t, filepath.Join(root, strconv.Itoa(from)), dst)
	path := filepath.Join(dst, "stat")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	r := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[r+2:]) // f[0] is field 3 (state)
	f[1] = strconv.Itoa(ppid)
	start, _ := strconv.ParseUint(f[19], 10, 64) // field 22
	f[19] = strconv.FormatUint(start+startDelta, 10)
	s = strconv.Itoa(pid) + " " + s[strings.IndexByte(s, '('):r+1] + " " + strings.Join(f, " ") + "\n"
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func removeProc(t testing.TB, root string, pid int) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(root, strconv.Itoa(pid))); err != nil {
		t.Fatal(err)
	}
}

func writePidFile(t testing.TB, pid int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "krb5kdc.pid")
	if err := os.WriteFile(p, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// kdcDown checks what a stopped KDC must look like: up 0 and no series
// that belonged to its processes.
func kdcDown(t *testing.T, s *scrape) {
	t.Helper()
	if v := s.Value("krb5_process_up", "program", "krb5kdc"); v != 0 {
		t.Errorf("krb5kdc up = %v, want 0", v)
	}
	if v := s.Value("krb5_process_processes", "program", "krb5kdc"); v != 0 {
		t.Errorf("krb5kdc processes = %v, want 0", v)
	}
	for _, name := range []string{"krb5_process_cpu_seconds_total", "krb5_process_resident_memory_bytes",
		"krb5_process_open_fds", "krb5_process_start_time_seconds", "krb5_process_io_read_bytes_total",
		"krb5_process_cpu_wait_seconds_total", "krb5_process_disk_wait_seconds_total"} {
		if n := s.Count(name, "program", "krb5kdc"); n != 0 {
			t.Errorf("%d stale %s series for krb5kdc", n, name)
		}
	}
	for _, name := range s.Names("krb5_kdc_") {
		if !strings.HasPrefix(name, "krb5_kdc_database_") {
			t.Errorf("stale series %s while the KDC is down", name)
		}
	}
	if n := len(s.Names("krb5_host_")); n != 0 {
		t.Errorf("%d host counter families while no KDC namespace exists", n)
	}
	for _, name := range []string{"process", "network", "kdcconf"} {
		if v, ok := s.Find("krb5_exporter_collector_scrape_success", "collector", name); !ok || v != 1 {
			t.Errorf("collector %s: scrape_success %v (series present: %v) while the KDC is down, want 1", name, v, ok)
		}
	}
}

func TestPidFiles(t *testing.T) {
	proc := filepath.Join(fixtureDir, "proc")
	t.Run("supervisor", func(t *testing.T) {
		cfg := fixtureConfig(t, proc)
		cfg.KDCPidFile = writePidFile(t, fxSupervisor)
		_, reg := newTestCollector(t, cfg)
		s := gather(t, reg)
		if v := s.Value("krb5_process_processes", "program", "krb5kdc"); v != 3 {
			t.Errorf("processes = %v, want the supervisor and its 2 workers", v)
		}
		if v := s.Value("krb5_kdc_workers"); v != 2 {
			t.Errorf("workers = %v", v)
		}
	})
	for name, pidFile := range map[string]func(t *testing.T) string{
		"stale (zombie)": func(t *testing.T) string { return writePidFile(t, fxZombie) },
		"other program":  func(t *testing.T) string { return writePidFile(t, fxKadmind) },
		"missing":        func(t *testing.T) string { return filepath.Join(t.TempDir(), "none.pid") },
		"garbage": func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "krb5kdc.pid")
			os.WriteFile(p, []byte("krb5kdc\n"), 0o644)
			return p
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := fixtureConfig(t, proc)
			cfg.KDCPidFile = pidFile(t)
			_, reg := newTestCollector(t, cfg)
			kdcDown(t, gather(t, reg))
		})
	}
	t.Run("all programs, no children files", func(t *testing.T) {
		// The fixture has no task/*/children: the full scan is used.
		cfg := fixtureConfig(t, proc)
		cfg.KDCPidFile = writePidFile(t, fxSupervisor)
		cfg.KadmindPidFile = writePidFile(t, fxKadmind)
		cfg.KpropdPidFile = filepath.Join(t.TempDir(), "kpropd.pid")
		_, reg := newTestCollector(t, cfg)
		s := gather(t, reg)
		for prog, want := range map[string]float64{"krb5kdc": 3, "kadmind": 1, "kpropd": 0} {
			if v := s.Value("krb5_process_processes", "program", prog); v != want {
				t.Errorf("%s processes = %v, want %v", prog, v, want)
			}
		}
	})
	t.Run("worker", func(t *testing.T) {
		// A pid file naming a worker selects that worker alone.
		cfg := fixtureConfig(t, proc)
		cfg.KDCPidFile = writePidFile(t, fxWorker1)
		_, reg := newTestCollector(t, cfg)
		s := gather(t, reg)
		if v := s.Value("krb5_process_processes", "program", "krb5kdc"); v != 1 {
			t.Errorf("processes = %v, want 1", v)
		}
	})
}

// TestRestarts replays a worker being replaced and then the whole KDC
// restarting, on an edited copy of the fixture.
func TestRestarts(t *testing.T) {
	root := editableFixture(t)
	_, reg := newTestCollector(t, fixtureConfig(t, root))
	s := gather(t, reg)
	start1 := s.Value("krb5_kdc_worker_start_time_seconds", "worker", "1")

	// Worker 1 is replaced by a newer process: it takes the free index 1,
	// worker 0 keeps its index, the KDC did not restart.
	cloneProc(t, root, fxWorker1, 30001, fxSupervisor, 500)
	removeProc(t, root, fxWorker1)
	s = gather(t, reg)
	if n := s.Count("krb5_kdc_worker_start_time_seconds"); n != 2 {
		t.Fatalf("%d worker series after a replacement, want 2", n)
	}
	if v := s.Value("krb5_kdc_worker_start_time_seconds", "worker", "1"); v != start1+5 {
		t.Errorf("worker 1 start = %v, want %v (the replacement)", v, start1+5)
	}
	if v := s.Value("krb5_process_restarts_total", "program", "krb5kdc"); v != 0 {
		t.Errorf("restarts = %v after a worker replacement, want 0", v)
	}

	// The KDC restarts: a new supervisor with new workers.
	cloneProc(t, root, fxSupervisor, 40000, 1, 1000)
	cloneProc(t, root, fxWorker0, 40001, 40000, 1000)
	cloneProc(t, root, fxWorker0, 40002, 40000, 1000)
	for _, pid := range []int{fxSupervisor, fxWorker0, 30001} {
		removeProc(t, root, pid)
	}
	s = gather(t, reg)
	if v := s.Value("krb5_process_restarts_total", "program", "krb5kdc"); v != 1 {
		t.Errorf("restarts = %v after a KDC restart, want 1", v)
	}
	if n := s.Count("krb5_kdc_worker_cpu_seconds_total", "mode", "user"); n != 2 {
		t.Errorf("%d worker series, want 2 (indexes reused, none stale)", n)
	}
	for _, w := range []string{"0", "1"} {
		if _, ok := s.Find("krb5_kdc_worker_cpu_seconds_total", "worker", w); !ok {
			t.Errorf("no series for worker %s", w)
		}
	}

	// Stopped: nothing of the KDC's processes remains; the restart count
	// stays.
	for _, pid := range []int{40000, 40001, 40002} {
		removeProc(t, root, pid)
	}
	s = gather(t, reg)
	kdcDown(t, s)
	if v := s.Value("krb5_process_restarts_total", "program", "krb5kdc"); v != 1 {
		t.Errorf("restarts = %v while down, want 1", v)
	}
	if _, ok := s.Find("krb5_kdc_workers_configured"); ok {
		t.Error("workers_configured reported without a running KDC")
	}
	if _, ok := s.Find("krb5_kdcconf_info"); !ok {
		t.Error("kdc.conf settings should not depend on the KDC running")
	}
}

// TestKDCConfBroken: a kdc.conf that does not parse fails the kdcconf
// collector with a parse error count, and the others keep working.
func TestKDCConfBroken(t *testing.T) {
	cfg := fixtureConfig(t, filepath.Join(fixtureDir, "proc"))
	if err := os.WriteFile(cfg.KDCConfPath, []byte("[realms]\n\tPERF.TEST = {\n\t\tkdc_listen = 88\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	_, reg := newTestCollectorLogging(t, cfg, log.NewLogfmtLogger(&logs))
	for i := 0; i < 3; i++ {
		s := gather(t, reg)
		if v := s.Value("krb5_exporter_collector_scrape_success", "collector", "kdcconf"); v != 0 {
			t.Error("kdcconf succeeded on a broken file")
		}
		if v := s.Value("krb5_exporter_kdcconf_parse_errors_total"); v != 1 {
			t.Errorf("parse errors = %v on scrape %d, want 1", v, i+1)
		}
		if _, ok := s.Find("krb5_kdcconf_info"); ok {
			t.Error("settings reported from a broken file")
		}
		for _, name := range []string{"process", "network"} {
			if v := s.Value("krb5_exporter_collector_scrape_success", "collector", name); v != 1 {
				t.Errorf("%s failed because of kdc.conf", name)
			}
		}
		// Still reported: it comes from the command line.
		if v := s.Value("krb5_kdc_workers_configured"); v != 2 {
			t.Errorf("workers_configured = %v", v)
		}
	}
	// Three scrapes, one problem: one line saying where, one failure.
	countLogs := func(want map[string]int) {
		t.Helper()
		for line, n := range want {
			if got := strings.Count(logs.String(), line); got != n {
				t.Errorf("%q logged %d times, want %d:\n%s", line, got, n, logs.String())
			}
		}
	}
	const (
		parse     = `msg="cannot parse KDC profile`
		failed    = `changes" name=kdcconf`
		recovered = `recovered" name=kdcconf`
	)
	countLogs(map[string]int{parse: 1, "kdc.conf:3: end of file": 3, failed: 1, recovered: 0}) // kdcconf, replication

	// Repaired: one recovery line, settings back.
	good, err := os.ReadFile(filepath.Join(fixtureDir, "kdc.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg.KDCConfPath, good, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if v := gather(t, reg).Value("krb5_exporter_collector_scrape_success", "collector", "kdcconf"); v != 1 {
			t.Error("kdcconf still failing after the repair")
		}
	}
	countLogs(map[string]int{parse: 1, failed: 1, recovered: 1})

	// Unreadable (here a directory, since root reads any file): counted,
	// logged once more, whatever the number of scrapes.
	if err := os.Remove(cfg.KDCConfPath); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(cfg.KDCConfPath, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		s := gather(t, reg)
		if v := s.Value("krb5_exporter_collector_scrape_success", "collector", "kdcconf"); v != 0 {
			t.Error("kdcconf succeeded on an unreadable file")
		}
		if v := s.Value("krb5_exporter_kdcconf_parse_errors_total"); v != 2 {
			t.Errorf("parse errors = %v with kdc.conf unreadable, want 2", v)
		}
	}
	countLogs(map[string]int{parse: 2, "kdc.conf: open: not a regular file: a directory": 3, failed: 2, recovered: 1})
}

func TestDisabledCollectors(t *testing.T) {
	cfg := fixtureConfig(t, filepath.Join(fixtureDir, "proc"))
	cfg.Process, cfg.KDCConf, cfg.Replication = false, false, false
	c, reg := newTestCollector(t, cfg)
	if got := strings.Join(c.Enabled(), ","); got != "network" {
		t.Errorf("enabled = %s", got)
	}
	s := gather(t, reg)
	if len(s.Names("krb5_process_")) != 0 || len(s.Names("krb5_kdcconf_")) != 0 {
		t.Error("disabled collectors reported metrics")
	}
	if v := s.Value("krb5_kdc_udp_drops_total"); v != 0 {
		t.Errorf("udp drops = %v", v)
	}

	cfg.TCPConnections = false
	_, reg = newTestCollector(t, cfg)
	s = gather(t, reg)
	if n := s.Count("krb5_kdc_tcp_connections"); n != 0 {
		t.Errorf("%d connection series with --no-collector.network.tcp-connections", n)
	}
	if _, ok := s.Find("krb5_kdc_tcp_listen_queue_length"); !ok {
		t.Error("the accept queue needs no connection count")
	}
}

func TestNewBadProcFS(t *testing.T) {
	cfg := DefaultConfig()
	cfg.ProcFS = filepath.Join(t.TempDir(), "nonexistent")
	if _, err := New(nil, cfg); err == nil {
		t.Error("New accepted a missing procfs")
	}
}

// TestPidFileWarnsOnce: an unusable pid file is a configuration problem:
// one log line, and up 0 on every scrape.
func TestPidFileWarnsOnce(t *testing.T) {
	cfg := fixtureConfig(t, filepath.Join(fixtureDir, "proc"))
	cfg.KDCPidFile = filepath.Join(t.TempDir(), "krb5kdc.pid")
	if err := os.WriteFile(cfg.KDCPidFile, []byte("not a pid\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	_, reg := newTestCollectorLogging(t, cfg, log.NewLogfmtLogger(&logs))
	for i := 0; i < 3; i++ {
		if v := gather(t, reg).Value("krb5_process_up", "program", "krb5kdc"); v != 0 {
			t.Errorf("up = %v with an unusable pid file", v)
		}
	}
	if n := strings.Count(logs.String(), "does not hold a pid"); n != 1 {
		t.Errorf("%d warnings in:\n%s", n, logs.String())
	}
}
