package collector

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const goldenFile = "testdata/fixture.prom"

// TestGolden scrapes the fixture (krb5kdc -w 2 with an unreaped zombie of
// a previous KDC, kadmind, and an unrelated process) with every collector
// and compares everything but the scrape durations with the golden file.
func TestGolden(t *testing.T) {
	cfg := fixtureConfig(t, filepath.Join(fixtureDir, "proc"))
	_, reg := newTestCollector(t, cfg)
	g := withoutDuration(reg)
	if *update {
		if err := os.WriteFile(goldenFile, []byte(exposition(t, g)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(goldenFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := testutil.GatherAndCompare(g, f); err != nil {
		t.Fatal(err)
	}
	// A second scrape of the same processes: nothing restarted.
	s := gather(t, reg)
	for _, prog := range programNames {
		if v := s.Value("krb5_process_restarts_total", "program", prog); v != 0 {
			t.Errorf("restarts_total{program=%q} = %v on an unchanged fixture", prog, v)
		}
	}
}

// TestGoldenFacts checks the golden file against what the fixture holds,
// so that an -update cannot silently bless a wrong value.
func TestGoldenFacts(t *testing.T) {
	cfg := fixtureConfig(t, filepath.Join(fixtureDir, "proc"))
	_, reg := newTestCollector(t, cfg)
	s := gather(t, reg)
	proc := filepath.Join(fixtureDir, "proc")
	kdc := fixturePIDs(t, proc, "krb5kdc")
	if len(kdc.live) != 3 || len(kdc.zombies) != 1 {
		t.Fatalf("fixture should hold 3 live krb5kdc and 1 zombie, has %v / %v", kdc.live, kdc.zombies)
	}
	for _, name := range []string{"process", "network", "kdcconf"} {
		if v := s.Value("krb5_exporter_collector_scrape_success", "collector", name); v != 1 {
			t.Errorf("collector %s failed", name)
		}
	}
	if v := s.Value("krb5_process_processes", "program", "krb5kdc"); v != 3 {
		t.Errorf("krb5kdc processes = %v, want 3 (the zombie must not count)", v)
	}
	if v := s.Value("krb5_process_up", "program", "kpropd"); v != 0 {
		t.Errorf("kpropd up = %v, want 0", v)
	}
	// CPU: the sum of utime and stime over the live processes.
	var user, sys float64
	for _, pid := range kdc.live {
		st := statFields(t, proc, pid)
		user += st.utime / userHZ
		sys += st.stime / userHZ
	}
	if v := s.Value("krb5_process_cpu_seconds_total", "program", "krb5kdc", "mode", "user"); v != user {
		t.Errorf("krb5kdc user CPU = %v, want %v", v, user)
	}
	if v := s.Value("krb5_process_cpu_seconds_total", "program", "krb5kdc", "mode", "system"); v != sys {
		t.Errorf("krb5kdc system CPU = %v, want %v", v, sys)
	}
	// Workers 0 and 1 are the two children, oldest (then lowest pid) first.
	if n := s.Count("krb5_kdc_worker_cpu_seconds_total", "mode", "user"); n != 2 {
		t.Errorf("%d worker series, want 2", n)
	}
	w0 := statFields(t, proc, kdc.live[1])
	if v := s.Value("krb5_kdc_worker_cpu_seconds_total", "worker", "0", "mode", "system"); v != w0.stime/userHZ {
		t.Errorf("worker 0 system CPU = %v, want %v", v, w0.stime/userHZ)
	}
	if v := s.Value("krb5_kdc_workers_configured"); v != 2 {
		t.Errorf("workers_configured = %v", v)
	}
	// The captured KDC listens on one UDP and one TCP socket, and the
	// capture held one TCP connection open.
	if n := s.Count("krb5_kdc_udp_receive_queue_bytes"); n != 1 {
		t.Errorf("%d UDP sockets, want 1", n)
	}
	if v := s.Value("krb5_kdc_tcp_connections", "state", "established"); v != 1 {
		t.Errorf("established connections = %v, want 1", v)
	}
	if v := s.Value("krb5_kdc_tcp_listen_queue_limit"); v != 5 {
		t.Errorf("listen queue limit = %v, want MIT's default 5", v)
	}
	if v := s.Value("krb5_kdcconf_info", "realm", "PERF.TEST", "db_library", "db2", "disable_last_success", "false",
		"disable_lockout", "false", "spake_groups", "edwards25519"); v != 1 {
		t.Errorf("info = %v", v)
	}
	if n := s.Count("krb5_kdcconf_supported_enctype", "weak", "false"); n != 4 {
		t.Errorf("%d strong enctypes, want 4", n)
	}
	if v := s.Value("krb5_kdc_database_size_bytes", "realm", "PERF.TEST"); v != fixtureDBSize {
		t.Errorf("database size = %v", v)
	}
	if v := s.Value("krb5_kdc_database_modified_time_seconds", "realm", "PERF.TEST"); v != float64(fixtureDBTime.Unix()) {
		t.Errorf("database mtime = %v", v)
	}
}

type fixtureProcs struct{ live, zombies []int }

// fixturePIDs lists the fixture's processes named comm, by pid.
func fixturePIDs(t *testing.T, proc, comm string) fixtureProcs {
	t.Helper()
	entries, err := os.ReadDir(proc)
	if err != nil {
		t.Fatal(err)
	}
	var fp fixtureProcs
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st := statFields(t, proc, pid)
		if st.comm != comm {
			continue
		}
		if st.state == "Z" {
			fp.zombies = append(fp.zombies, pid)
		} else {
			fp.live = append(fp.live, pid)
		}
	}
	return fp
}

type statLine struct {
	comm, state    string
	ppid           int
	utime, stime   float64
	cutime, cstime float64
	threads        float64
	start, rssPgs  float64
	vsize          float64
}

// statFields reads /proc/PID/stat independently of procfs.
func statFields(t testing.TB, proc string, pid int) statLine {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "stat"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	l, r := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	f := strings.Fields(s[r+2:])
	num := func(i int) float64 { // i: field number in proc(5), 1-based
		v, err := strconv.ParseFloat(f[i-3], 64)
		if err != nil {
			t.Fatalf("pid %d stat field %d: %v", pid, i, err)
		}
		return v
	}
	return statLine{comm: s[l+1 : r], state: f[0], ppid: int(num(4)), utime: num(14), stime: num(15),
		cutime: num(16), cstime: num(17), threads: num(20), start: num(22), vsize: num(23), rssPgs: num(24)}
}
