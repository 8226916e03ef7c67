package main

import (
	"bufio"
	"bytes"
	"context"
	"debug/elf"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// binary is the krb5-exporter built once for all tests: the CLI is tested
// as a user runs it, exit codes and output included.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "krb5-exporter-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "krb5-exporter")
	if err := testutil.BuildExporter(context.Background(), binary); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	stopBrowser()
	os.RemoveAll(dir)
	os.Exit(code)
}

// exporter runs the binary to completion.
func exporter(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	return exporterEnv(t, nil, args...)
}

// exporterEnv is exporter with env added to the binary's environment (a
// parallel test cannot t.Setenv).
func exporterEnv(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

// oneErrorLine checks the promise made to operators: one clear line, no
// panic or stack trace.
func oneErrorLine(t *testing.T, stderr string, want ...string) {
	t.Helper()
	var errs []string
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if strings.Contains(l, "level=error") {
			errs = append(errs, l)
		}
	}
	if len(errs) != 1 || strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic") {
		t.Fatalf("want exactly one error line, got:\n%s", stderr)
	}
	for _, w := range want {
		if !strings.Contains(errs[0], w) {
			t.Errorf("error line %q lacks %q", errs[0], w)
		}
	}
}

// TestBuildMode: the binary the tests run is the build mode asked for
// (testutil.BuildModeEnv; `make test-pie`), so that the PIE run cannot
// quietly test the default build: a PIE is an ELF shared object (ET_DYN),
// the default static build an executable (ET_EXEC).
func TestBuildMode(t *testing.T) {
	f, err := elf.Open(binary)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// A distribution's check step may ask for it in GOFLAGS instead
	// (go-rpm-macros does), which the build inherits.
	want := elf.ET_EXEC
	if os.Getenv(testutil.BuildModeEnv) == "pie" || slices.Contains(strings.Fields(os.Getenv("GOFLAGS")), "-buildmode=pie") {
		want = elf.ET_DYN
	}
	if f.Type != want {
		t.Errorf("%s=%q built a %v, want %v", testutil.BuildModeEnv, os.Getenv(testutil.BuildModeEnv), f.Type, want)
	}
}

func TestVersionAndPlaceholders(t *testing.T) {
	t.Parallel()
	if out, _, code := exporter(t, "--version"); code != 0 || !strings.Contains(out+"", "krb5-exporter, version") {
		// kingpin prints the version to the usage writer (stdout).
		t.Errorf("--version: code %d, %q", code, out)
	}
	if _, stderr, code := exporter(t, "--no-such-flag"); code != 2 || !strings.Contains(stderr, "no-such-flag") {
		t.Errorf("unknown flag: code %d, %q", code, stderr)
	}
}

func TestBadConfigIsOneClearLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yml")
	os.WriteFile(bad, []byte("logs:\n  - path: /var/log/krb5kdc.log\n    type: kdc\n    severity: high\n"), 0o600)

	_, stderr, code := exporter(t, "--config.file", bad)
	if code != exitConfig {
		t.Errorf("exit code %d, want %d", code, exitConfig)
	}
	oneErrorLine(t, stderr, bad+`:4: unknown key \"severity\"`)

	_, stderr, code = exporter(t, "--config.file", bad, "--config.check")
	if code != 1 {
		t.Errorf("--config.check exit code %d, want 1", code)
	}
	oneErrorLine(t, stderr, bad+":4:")

	_, stderr, code = exporter(t, "--config.file", filepath.Join(dir, "missing.yml"))
	if code != exitConfig {
		t.Errorf("missing file: exit code %d", code)
	}
	oneErrorLine(t, stderr, "missing.yml: no such file or directory")

	// A probe module whose keytab is missing fails the check (the daemon
	// serves: TestDaemonBadKeytab).
	nokt := filepath.Join(dir, "nokt.yml")
	os.WriteFile(nokt, []byte("modules:\n  m:\n    realm: EXAMPLE.COM\n    client: probe\n    keytab: "+dir+"/missing.keytab\n"), 0o600)
	_, stderr, code = exporter(t, "--config.file", nokt, "--config.check")
	if code != 1 {
		t.Errorf("missing keytab, --config.check: exit code %d", code)
	}
	oneErrorLine(t, stderr, nokt+":5: modules.m.keytab: cannot open keytab: no such file or directory")
	// The README's promise: a keytab path never reaches a log line.
	if strings.Contains(stderr, "missing.keytab") {
		t.Errorf("--config.check names the keytab:\n%s", stderr)
	}

	// A keytab others can read does not load, and --config.check says why.
	readable := filepath.Join(dir, "readable.keytab")
	os.WriteFile(readable, []byte("x"), 0o644)
	os.Chmod(readable, 0o644)
	rkt := filepath.Join(dir, "rkt.yml")
	os.WriteFile(rkt, []byte("modules:\n  m:\n    realm: EXAMPLE.COM\n    client: probe\n    keytab: "+readable+"\n"), 0o600)
	_, stderr, code = exporter(t, "--config.file", rkt, "--config.check")
	if code != 1 {
		t.Errorf("readable keytab, --config.check: exit %d", code)
	}
	oneErrorLine(t, stderr, rkt+":5: modules.m.keytab: keytab is readable by users other than its owner (mode 0644)", "allow_readable_keys")

	good := filepath.Join(dir, "good.yml")
	os.WriteFile(good, []byte("logs: []\n"), 0o600)
	if out, stderr, code := exporter(t, "--config.file", good, "--config.check"); code != 0 || !strings.Contains(out, "valid") {
		t.Errorf("valid config: code %d, %s %s", code, out, stderr)
	}
}

func TestPortInUse(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, stderr, code := exporter(t, "--web.listen-address", l.Addr().String())
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	oneErrorLine(t, stderr, "address already in use")
}

// daemon starts the exporter on a free port and returns its base URL.
func daemon(t *testing.T, args ...string) (string, *exec.Cmd, *testutil.LockedBuffer) {
	t.Helper()
	addr := realmtest.Addr(t)
	cmd, logs := startExporter(t, append([]string{"--web.listen-address", addr}, args...)...)
	base := "http://" + addr
	// A bound against hangs, not a measurement: a -race exporter beside a
	// second suite on two cores can take seconds to start.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get(base + "/-/healthy"); err == nil {
			resp.Body.Close()
			return base, cmd, logs
		}
		if exited(cmd.Process.Pid) {
			t.Fatalf("exporter exited at start: %s", logs.String())
		}
		if time.Now().After(deadline) {
			t.Fatalf("exporter did not come up within 60s: %s", logs.String())
		}
	}
}

// startExporter starts the exporter with args, its stderr in logs; it
// is stopped (SIGTERM) when the test ends.
func startExporter(t *testing.T, args ...string) (*exec.Cmd, *testutil.LockedBuffer) {
	t.Helper()
	logs := &testutil.LockedBuffer{}
	cmd := exec.Command(binary, args...)
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	return cmd, logs
}

// exited reports a child that has ended but is not reaped yet (a zombie),
// without reaping it: the caller may still Wait for it. A daemon that
// crashes at start (a PIE build did, issue #36) fails the test at once
// instead of after daemon's 60 s.
func exited(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// metric returns the first sample line of a metric from /metrics.
func metric(t *testing.T, base, name string) string {
	t.Helper()
	if lines := metricLines(t, base, name); len(lines) > 0 {
		return lines[0]
	}
	return ""
}

// metricLines returns every sample line of a metric from /metrics.
func metricLines(t *testing.T, base, name string) []string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), name+" ") || strings.HasPrefix(sc.Text(), name+"{") {
			lines = append(lines, sc.Text())
		}
	}
	return lines
}

func post(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Post(url, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestDaemonReload(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "c.yml")
	os.WriteFile(cfg, []byte("logs: []\n"), 0o600)
	base, cmd, logs := daemon(t, "--config.file", cfg)

	if m := metric(t, base, "krb5_exporter_build_info"); !strings.HasSuffix(m, " 1") {
		t.Errorf("build info: %q", m)
	}
	if m := metric(t, base, "krb5_exporter_config_last_reload_successful"); !strings.HasSuffix(m, " 1") {
		t.Errorf("after start: %q", m)
	}
	if resp, err := http.Get(base + "/-/reload"); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /-/reload: %v %v", resp, err)
	}

	// 100 reloads of the same configuration log nothing more than the
	// start's line (the limiter's one a minute); the failure after them
	// is logged at once, and once its line is through, so are theirs.
	for range 100 {
		if code := post(t, base+"/-/reload"); code != http.StatusOK {
			t.Fatalf("reload answered %d", code)
		}
	}
	os.WriteFile(cfg, []byte("logs: {\n"), 0o600)
	if code := post(t, base+"/-/reload"); code != http.StatusInternalServerError {
		t.Errorf("bad reload answered %d", code)
	}
	testutil.Eventually(t, 20*time.Second, "the failed reload's line", func() bool {
		return strings.Contains(logs.String(), "configuration not reloaded")
	})
	if n := strings.Count(logs.String(), "configuration loaded"); n != 1 {
		t.Errorf("the start and 100 reloads logged %d lines, want 1:\n%s", n, logs)
	}
	if m := metric(t, base, "krb5_exporter_config_last_reload_successful"); !strings.HasSuffix(m, " 0") {
		t.Errorf("after failed reload: %q", m)
	}

	os.WriteFile(cfg, []byte("logs: []\n"), 0o600)
	cmd.Process.Signal(syscall.SIGHUP)
	testutil.Eventually(t, 30*time.Second, "SIGHUP reloading the fixed configuration", func() bool {
		return strings.HasSuffix(metric(t, base, "krb5_exporter_config_last_reload_successful"), " 1")
	})
	resp, err := http.Get(base + "/")
	if err != nil || resp.StatusCode != 200 {
		t.Errorf("landing page: %v %v", resp, err)
	}
}

func TestRealmCommands(t *testing.T) {
	t.Parallel()
	realmtest.RequireMIT(t)
	dir := filepath.Join(t.TempDir(), "realm")
	cfgDir := t.TempDir()
	cfg := filepath.Join(cfgDir, "exporter.yml")
	// A link planted where the configuration goes is replaced, not
	// followed (issue 10 item 5).
	victim := filepath.Join(cfgDir, "victim")
	os.WriteFile(victim, []byte("precious\n"), 0o644)
	if err := os.Symlink(victim, cfg); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := exporter(t, "realm", "up", "--dir", dir, "--users=2", "--services=1", "--fillers=-1", "--exporter-config", cfg)
	if code != 0 {
		t.Fatalf("realm up: %d %s", code, stderr)
	}
	t.Cleanup(func() { exporter(t, "realm", "down", "--dir", dir) })
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("--exporter-config wrote through a planted link: %q", b)
	}
	if fi, err := os.Lstat(cfg); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Errorf("--exporter-config: %v %v, want a regular 0600 file", fi.Mode(), err)
	}
	if out, stderr, code := exporter(t, "--config.file", cfg, "--config.check"); code != 0 {
		t.Errorf("the written exporter configuration does not check: %s %s", out, stderr)
	}
	var env []string
	for _, l := range strings.Split(out, "\n") {
		if kv, ok := strings.CutPrefix(l, "export "); ok {
			k, v, _ := strings.Cut(kv, "=")
			env = append(env, k+"="+strings.Trim(v, "'"))
		}
	}
	if len(env) != 3 {
		t.Fatalf("realm up printed no environment:\n%s", out)
	}
	r, err := realm.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	kinit := exec.Command("kinit", "-k", "-t", r.UserKeytab, r.User(2))
	kinit.Env = append(os.Environ(), env...)
	if out, err := kinit.CombinedOutput(); err != nil {
		t.Fatalf("kinit with the printed environment: %v %s", err, out)
	}
	envOut, _, code := exporter(t, "realm", "env", "--dir", dir)
	if code != 0 || !strings.Contains(envOut, "KRB5_CONFIG") {
		t.Errorf("realm env: %d %s", code, envOut)
	}
	pids := r.KDCPids()
	if _, stderr, code := exporter(t, "realm", "down", "--dir", dir); code != 0 {
		t.Fatalf("realm down: %s", stderr)
	}
	for _, p := range pids {
		if syscall.Kill(p, 0) == nil {
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p)); !strings.Contains(string(b), ") Z ") {
				t.Errorf("krb5kdc pid %d still running", p)
			}
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("realm down left %s", dir)
	}
	if _, stderr, code := exporter(t, "realm", "down", "--dir", dir); code != 1 || !strings.Contains(stderr, "no realm in") {
		t.Errorf("realm down of nothing: %d %s", code, stderr)
	}
}

// TestRealmReplicaCommands: realm up --replica-of starts a replica whose
// kpropd has the primary's serial, writes a configuration that checks,
// refuses a replica of a replica or of nothing with one line, and realm
// down stops its kpropd.
func TestRealmReplicaCommands(t *testing.T) {
	t.Parallel()
	realmtest.RequireMIT(t)
	realmtest.RequireKpropd(t)
	pdir, rdir := filepath.Join(t.TempDir(), "p"), filepath.Join(t.TempDir(), "r")
	if _, stderr, code := exporter(t, "realm", "up", "--dir", pdir, "--users=2", "--services=1", "--fillers=-1"); code != 0 {
		t.Fatalf("realm up: %d %s", code, stderr)
	}
	t.Cleanup(func() { exporter(t, "realm", "down", "--dir", pdir) })
	cfg := filepath.Join(t.TempDir(), "replica.yml")
	out, stderr, code := exporter(t, "realm", "up", "--dir", rdir, "--replica-of", pdir, "--iprop-poll", "1s", "--exporter-config", cfg)
	if code != 0 {
		t.Fatalf("realm up --replica-of: %d %s", code, stderr)
	}
	t.Cleanup(func() { exporter(t, "realm", "down", "--dir", rdir) })
	if !strings.Contains(out, "replica of "+pdir) {
		t.Errorf("realm up --replica-of printed:\n%s", out)
	}
	if out, stderr, code := exporter(t, "--config.file", cfg, "--config.check"); code != 0 {
		t.Errorf("the replica's exporter configuration does not check: %s %s", out, stderr)
	}
	if b, _ := os.ReadFile(cfg); !strings.Contains(string(b), "type: kpropd") || strings.Contains(string(b), "type: kadmind") {
		t.Errorf("replica configuration:\n%s", b)
	}
	p, err := realm.Load(pdir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := realm.Load(rdir)
	if err != nil {
		t.Fatal(err)
	}
	pid := r.KpropdPid()
	if pid == 0 {
		t.Fatal("no kpropd running for the replica")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.WaitSerial(ctx, p.IpropLog); err != nil {
		t.Errorf("replica serial: %v", err)
	}
	for _, bad := range []string{rdir, filepath.Join(t.TempDir(), "none")} {
		_, stderr, code := exporter(t, "realm", "up", "--dir", filepath.Join(t.TempDir(), "x"), "--replica-of", bad)
		if code != 1 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, bad) {
			t.Errorf("replica of %s: %d %q", bad, code, stderr)
		}
	}
	if _, stderr, code := exporter(t, "realm", "down", "--dir", rdir); code != 0 {
		t.Fatalf("realm down: %s", stderr)
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.TrimSpace(string(b)) == "kpropd" {
		if st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); !strings.Contains(string(st), ") Z ") {
			t.Errorf("kpropd pid %d still running after realm down", pid)
		}
	}
}
