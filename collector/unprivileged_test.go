package collector

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// The usual deployment runs the exporter as an unprivileged user while
// the KDC runs as root: /proc/PID/fd and /proc/PID/io of the daemons are
// then unreadable, and the KDC's sockets must be found by the ports in
// kdc.conf. TestIntegrationUnprivileged runs the collectors that way, in a
// copy of this test binary started as nobody.

const childEnv = "KRB5_EXPORTER_COLLECTOR_CHILD"

// unprivScrapes is how many times the child scrapes.
const unprivScrapes = 3

// TestUnprivilegedChild is the child's side; on its own it skips.
func TestUnprivilegedChild(t *testing.T) {
	spec := os.Getenv(childEnv)
	if spec == "" {
		t.Skip("runs only as the child of TestIntegrationUnprivileged")
	}
	var cfg Config
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
		t.Fatal(err)
	}
	c, err := New(log.NewLogfmtLogger(os.Stderr), cfg)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	// Several scrapes: what cannot be read is logged once, not per scrape.
	for i := 1; i < unprivScrapes; i++ {
		if _, err := reg.Gather(); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(os.Getenv(childEnv+"_OUT"), []byte(exposition(t, reg)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestIntegrationUnprivileged(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start the child as nobody")
	}
	t.Parallel()
	r := upRealm(t, 2, false)

	// The realm directory is root's (0700): give the child world-readable
	// copies of what an exporter user can normally read (kdc.conf, pid
	// file) and a binary it can run.
	dir, err := os.MkdirTemp("", "krb5-exporter-unpriv-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "collector.test")
	copyFileMode(t, os.Args[0], bin, 0o755)
	cfg := realmConfig(r)
	// Without CAP_BPF the kdcservice collector cannot load its program:
	// the rest carries on, and it says so in one line and its metrics.
	cfg.KDCService = true
	for _, f := range []*string{&cfg.KDCConfPath, &cfg.Krb5ConfPath, &cfg.KDCPidFile} {
		dst := filepath.Join(dir, filepath.Base(*f))
		copyFileMode(t, *f, dst, 0o644)
		*f = dst
	}
	spec, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "metrics.txt")
	cmd := exec.Command(bin, "-test.run=^TestUnprivilegedChild$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec), childEnv+"_OUT="+out)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	fds0 := listFDs(t, r.KDCPids())
	childLog, err := cmd.CombinedOutput()
	fds1 := listFDs(t, r.KDCPids())
	if err != nil {
		t.Fatalf("child: %v\n%s", err, childLog)
	}
	// The child could not read the KDC's fds and io and said so, once
	// each over its scrapes (and nothing was logged as failed).
	for _, line := range []string{
		"cannot read fd_links of krb5kdc; finding its sockets by the ports in kdc.conf",
		"cannot read io of krb5kdc; its metrics are omitted",
		"kdcservice collector: cannot trace krb5kdc",
	} {
		if n := strings.Count(string(childLog), line); n != 1 {
			t.Errorf("the child logged %q %d times in %d scrapes, want 1:\n%s", line, n, unprivScrapes, childLog)
		}
	}
	for _, line := range []string{"cannot read status", "cannot read limits", "collector failed"} {
		if strings.Contains(string(childLog), line) {
			t.Errorf("the child logged %q:\n%s", line, childLog)
		}
	}
	s := testutil.ReadExposition(t, out)

	for _, name := range []string{"process", "network", "kdcconf", "kdcservice"} {
		if v := s.Value("krb5_exporter_collector_scrape_success", "collector", name); v != 1 {
			t.Errorf("collector %s failed as nobody", name)
		}
	}
	if v := s.Value("krb5_kdc_service_tracing_up"); v != 0 {
		t.Errorf("krb5_kdc_service_tracing_up %v as nobody, want 0", v)
	}
	if v := s.Value("krb5_kdc_service_tracing_errors_total", "reason", "permission"); v != 1 {
		t.Errorf("krb5_kdc_service_tracing_errors_total{reason=\"permission\"} %v as nobody, want 1", v)
	}
	if n := s.Count("krb5_kdc_request_service_seconds"); n != 0 {
		t.Errorf("%d service-time series as nobody, want none", n)
	}
	if v := s.Value("krb5_process_processes", "program", "krb5kdc"); v != 3 {
		t.Errorf("processes = %v", v)
	}
	// Readable by anyone: stat, status, limits.
	for _, name := range []string{"krb5_process_cpu_seconds_total", "krb5_process_context_switches_total", "krb5_process_max_fds"} {
		if _, ok := s.Find(name, "program", "krb5kdc"); !ok {
			t.Errorf("no %s as nobody", name)
		}
	}
	// Owner only: omitted, not zero.
	if _, ok := s.Find("krb5_process_io_read_bytes_total", "program", "krb5kdc"); ok {
		t.Error("io reported although nobody cannot read /proc/PID/io")
	}
	// fd/ cannot be listed, but since Linux 6.2 its size (stat) is the
	// number of open descriptors, for anyone; before, it is omitted.
	if v, ok := s.Find("krb5_process_open_fds", "program", "krb5kdc"); ok {
		// The harness's readiness connection may close meanwhile.
		lo, hi := min(fds0, fds1), max(fds0, fds1)
		if v < lo || v > hi {
			t.Errorf("open fds as nobody = %v, root counts %v before and %v after", v, fds0, fds1)
		}
	}
	// What could not be read is a metric too; what could, says so. The
	// fd count is readable as its directory's size since Linux 6.2.
	_, fdCount := s.Find("krb5_process_open_fds", "program", "krb5kdc")
	for _, prog := range []string{"krb5kdc"} { // the realm runs no kadmind
		want := map[string]float64{"status": 1, "limits": 1, "io": 0, "fd": boolNum(fdCount)}
		if prog == "krb5kdc" {
			want["fd_links"] = 0
		}
		for file, w := range want {
			if v, ok := s.Find("krb5_exporter_proc_readable", "program", prog, "file", file); !ok || v != w {
				t.Errorf("proc_readable{program=%q,file=%q} = %v (present %v), want %v", prog, file, v, ok, w)
			}
		}
	}
	// Sockets found by the ports of kdc.conf.
	checkNetwork(t, s, r)
	// The database lives in the root-only realm directory.
	if _, ok := s.Find("krb5_kdc_database_size_bytes"); ok {
		t.Error("database size reported although nobody cannot stat it")
	}
}

func copyFileMode(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	o, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(o, in); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dst, mode); err != nil {
		t.Fatal(err)
	}
}

func listFDs(t *testing.T, pids []int) float64 {
	t.Helper()
	n := 0
	for _, pid := range pids {
		fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
		if err != nil {
			t.Fatal(err)
		}
		n += len(fds)
	}
	return float64(n)
}
