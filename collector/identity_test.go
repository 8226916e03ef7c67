package collector

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// A local user's `cp /bin/sleep /tmp/krb5kdc; /tmp/krb5kdc` must not count
// as the KDC: not keep krb5_process_up at 1 with the real KDC stopped, nor
// supply -w and -r. TestIdentityHostile runs TestIdentityInNamespace in a
// pid namespace of its own (bash as its pid 1 reaps the daemons), so that
// discovery by name sees only this test's processes, not the KDCs of other
// tests running on the machine. There, the exporter runs as nobody (it
// cannot read /proc/PID/exe of the others) against a real krb5kdc -w 2 run
// as root and fakes run as another unprivileged user.

const nsEnv = "KRB5_EXPORTER_IDENTITY_NS"

// fakeUID runs the fakes: neither root, nobody (the exporter) nor the test.
const fakeUID = 4242

func TestIdentityHostile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a pid namespace and to run processes as other users")
	}
	testutil.RequireProgram(t, "unshare")
	testutil.RequireProgram(t, "bash")
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "--pid", "--fork", "--mount-proc", "bash", "-c", `"$0" "$@"; exit $?`,
		os.Args[0], "-test.run=^TestIdentityInNamespace$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), nsEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestIdentityInNamespace") {
		t.Fatalf("in its pid namespace: %v\n%s", err, out)
	}
	t.Logf("in its pid namespace:\n%s", out)
}

func TestIdentityInNamespace(t *testing.T) {
	if os.Getenv(nsEnv) == "" {
		t.Skip("runs only inside TestIdentityHostile's pid namespace")
	}
	r := upRealm(t, 2, false)
	dir, err := os.MkdirTemp("", "krb5-exporter-identity-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "collector.test")
	copyFileMode(t, os.Args[0], bin, 0o755)

	// The fakes: a copy of sleep, and a script (its comm is its own name)
	// whose command line claims 8 workers and the realm EVIL.
	sleepBin, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	fakeDir := func(name string) string {
		d := filepath.Join(dir, name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(d, "krb5kdc")
	}
	copied, script := fakeDir("copy"), fakeDir("script")
	copyFileMode(t, sleepBin, copied, 0o755)
	// The script waits in the shell itself, in the open of a FIFO no one
	// writes: a child it forked would be one more "krb5kdc" until its exec.
	fifo := filepath.Join(dir, "never")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(fifo, 0o666)
	if err := os.WriteFile(script, []byte("#!/bin/sh\nread line < "+fifo+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The script first: the oldest, it would be the main process whose
	// command line is read.
	runFake(t, fakeUID, script, "-w", "8", "-r", "EVIL")
	runFake(t, fakeUID, copied, "600")

	cfg := Config{ProcFS: "/proc", Process: true, KDCConf: true}
	for _, f := range []struct{ dst, src *string }{{&cfg.KDCConfPath, &r.KDCConf}, {&cfg.Krb5ConfPath, &r.Krb5Conf}} {
		*f.dst = filepath.Join(dir, filepath.Base(*f.src))
		copyFileMode(t, *f.src, *f.dst, 0o644)
	}
	cfg.Identity.SystemdDir = filepath.Join(dir, "no-systemd")

	// The real KDC alongside the fakes: only it counts.
	s, log := scrapeAs(t, bin, dir, cfg, 65534)
	checkKDC(t, "real KDC and two fakes", s, len(r.KDCPids()), 2)
	if v := s.Value("krb5_exporter_process_rejected_total", "program", "krb5kdc", "reason", "user"); v != 2 {
		t.Errorf("rejected{reason=user} = %v, want the 2 fakes", v)
	}
	if n := strings.Count(log, "is not counted as krb5kdc"); n != 1 {
		t.Errorf("logged %d rejections in %d scrapes of 2 fakes, want 1 (once per reason):\n%s", n, unprivScrapes, log)
	}
	if !strings.Contains(log, "uid "+strconv.Itoa(fakeUID)) {
		t.Errorf("the rejection does not say the fake's uid:\n%s", log)
	}

	// The real KDC stopped: the fakes keep nothing up.
	if err := r.StopKDC(); err != nil {
		t.Fatal(err)
	}
	s, _ = scrapeAs(t, bin, dir, cfg, 65534)
	checkKDC(t, "fakes only", s, 0, 0)
	// The kdcservice collector traces what discovery found: nothing here
	// (checked below against a run that traces the real KDC).
	svc := cfg
	svc.KDCService = true
	s, _ = scrapeAs(t, bin, dir, svc, 0)
	tracedFakes := s.Value("krb5_kdc_service_tracing_up")

	// A namesake running as root, outside any unit (as a set-uid program
	// started through a link named krb5kdc would): as root the exporter
	// reads its executable; as nobody, on a systemd host, its cgroup.
	rootFake := fakeDir("root")
	copyFileMode(t, sleepBin, rootFake, 0o755)
	runFake(t, 0, rootFake, "600")
	if err := r.StartKDC(context.Background()); err != nil {
		t.Fatal(err)
	}
	s, _ = scrapeAs(t, bin, dir, svc, 0)
	checkKDC(t, "exporter as root", s, len(r.KDCPids()), 2)
	if v := s.Value("krb5_exporter_process_rejected_total", "program", "krb5kdc", "reason", "executable"); v != 1 {
		t.Errorf("as root: rejected{reason=executable} = %v, want 1 (the root fake)", v)
	}
	switch v := s.Value("krb5_kdc_service_tracing_up"); {
	case v != 1 && testutil.InCI():
		t.Errorf("kdcservice does not trace the real KDC in CI (tracing_up %v)", v)
	case v != 1:
		t.Logf("kdcservice cannot trace here (tracing_up %v): its check against the fakes says nothing", v)
	case tracedFakes != 0:
		t.Errorf("kdcservice traced the fakes: tracing_up %v with only fakes running", tracedFakes)
	}

	// A systemd host: the KDC started by hand is outside its unit, so an
	// exporter that cannot read its executable does not count it; started
	// the distribution's way, in krb5-kdc.service, it counts by the
	// default rule (no pid file, no flag) and the root fake still does not.
	if err := os.Mkdir(cfg.Identity.SystemdDir, 0o755); err != nil {
		t.Fatal(err)
	}
	s, _ = scrapeAs(t, bin, dir, cfg, 65534)
	checkKDC(t, "systemd host, KDC outside its unit", s, 0, 0)
	if v := s.Value("krb5_exporter_process_rejected_total", "program", "krb5kdc", "reason", "unit"); v != float64(1+len(r.KDCPids())) {
		t.Errorf("rejected{reason=unit} = %v, want the KDC's %d processes and the root fake", v, len(r.KDCPids()))
	}
	moveToUnit(t, r.KDCPids(), "krb5-kdc.service")
	s, _ = scrapeAs(t, bin, dir, cfg, 65534)
	checkKDC(t, "systemd host, KDC in krb5-kdc.service", s, len(r.KDCPids()), 2)
	if v := s.Value("krb5_exporter_process_rejected_total", "program", "krb5kdc", "reason", "unit"); v != 1 {
		t.Errorf("rejected{reason=unit} = %v, want the root fake", v)
	}
}

// checkKDC checks the krb5kdc the exporter saw against the harness's:
// procs processes (0: not running) started with -w workers, and nothing
// from the fakes' command line.
func checkKDC(t *testing.T, what string, s *scrape, procs, workers int) {
	t.Helper()
	if v := s.Value("krb5_process_up", "program", "krb5kdc"); v != boolNum(procs > 0) {
		t.Errorf("%s: krb5_process_up = %v", what, v)
	}
	if v := s.Value("krb5_process_processes", "program", "krb5kdc"); v != float64(procs) {
		t.Errorf("%s: krb5_process_processes = %v, the harness's KDC has %d", what, v, procs)
	}
	if v, ok := s.Find("krb5_kdc_workers_configured"); procs > 0 && v != float64(workers) || procs == 0 && ok && v != 0 {
		t.Errorf("%s: krb5_kdc_workers_configured = %v, want %d", what, v, workers)
	}
	for _, n := range s.Names("krb5_") {
		if s.Count(n, "realm", "EVIL") > 0 {
			t.Errorf("%s: %s has the fake's -r EVIL", what, n)
		}
	}
}

// runFake starts path as uid until the test ends and waits for its comm
// to be krb5kdc.
func runFake(t *testing.T, uid int, path string, args ...string) {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	comm := "/proc/" + strconv.Itoa(cmd.Process.Pid) + "/comm"
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(comm); err == nil && string(b) == "krb5kdc\n" {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%s did not start as krb5kdc", path)
		}
	}
}

// scrapeAs runs the collectors in a copy of this test binary as uid
// (TestUnprivilegedChild) and returns its last scrape and its log.
func scrapeAs(t *testing.T, bin, dir string, cfg Config, uid int) (*scrape, string) {
	t.Helper()
	spec, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	outDir, err := os.MkdirTemp(dir, "out-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(outDir, 0o777); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(outDir, "metrics.txt")
	cmd := exec.Command(bin, "-test.run=^TestUnprivilegedChild$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), childEnv+"="+string(spec), childEnv+"_OUT="+out)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	log, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child as uid %d: %v\n%s", uid, err, log)
	}
	return testutil.ReadExposition(t, out), string(log)
}

// moveToUnit puts pids into the cgroup systemd gives unit, in systemd's
// hierarchy (name=systemd of cgroup v1 where there is one, else v2), as
// systemd starting the unit would; they go back at cleanup.
func moveToUnit(t *testing.T, pids []int, unit string) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	base, orig := "/sys/fs/cgroup", ""
	for _, line := range strings.Split(string(b), "\n") {
		if _, p, ok := strings.Cut(line, ":name=systemd:"); ok {
			base, orig = "/sys/fs/cgroup/systemd", p
			break
		}
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			orig = p
		}
	}
	if _, err := os.Stat(base + "/cgroup.procs"); err != nil {
		if testutil.InCI() {
			t.Fatalf("no cgroup hierarchy of systemd at %s in CI", base)
		}
		t.Skipf("no cgroup hierarchy of systemd at %s", base)
	}
	slice := filepath.Join(base, "system.slice")
	_, sliceErr := os.Stat(slice)
	cg := filepath.Join(slice, unit)
	if err := os.MkdirAll(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, pid := range pids {
			os.WriteFile(filepath.Join(base, orig, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
		}
		os.Remove(cg)
		if sliceErr != nil {
			os.Remove(slice)
		}
	})
	for _, pid := range pids {
		if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			t.Fatalf("moving %d into %s: %v", pid, cg, err)
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if !strings.Contains(string(b), ":/system.slice/"+unit+"\n") {
			t.Fatalf("pid %d not in %s:\n%s", pid, unit, b)
		}
	}
}

// TestPidFileUntrusted: a pid file that group or others may write names
// no process (krb5kdc counts as not running), is counted once in
// krb5_exporter_process_rejected_total{reason="pid_file"} however many
// scrapes see it, and counts again once it is fixed.
func TestPidFileUntrusted(t *testing.T) {
	cfg := fixtureConfig(t, fixtureDir+"/proc")
	cfg.KDCPidFile = filepath.Join(t.TempDir(), "krb5kdc.pid")
	if err := os.WriteFile(cfg.KDCPidFile, []byte("20256\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(cfg.KDCPidFile, 0o666); err != nil { // past the umask
		t.Fatal(err)
	}
	_, reg := newTestCollector(t, cfg)
	for i := 0; i < 3; i++ {
		s := gather(t, reg)
		if v := s.Value("krb5_process_up", "program", "krb5kdc"); v != 0 {
			t.Errorf("scrape %d: up %v through a pid file anyone may write", i, v)
		}
		if v := s.Value("krb5_exporter_process_rejected_total", "program", "krb5kdc", "reason", "pid_file"); v != 1 {
			t.Errorf("scrape %d: rejected{pid_file} = %v, want 1", i, v)
		}
	}
	if err := os.Chmod(cfg.KDCPidFile, 0o644); err != nil {
		t.Fatal(err)
	}
	s := gather(t, reg)
	if v := s.Value("krb5_process_processes", "program", "krb5kdc"); v != 3 {
		t.Errorf("pid file fixed: %v processes, want the fixture's 3", v)
	}
}
