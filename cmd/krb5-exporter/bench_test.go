package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/bench"
	"github.com/krb5-exporter/krb5-exporter/bench/report"
	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// smallBench are the flags of a quick run against a small ephemeral realm.
func smallBench(out string, extra ...string) []string {
	return append([]string{"bench", "--once", "--output-dir", out,
		"--realm.users=6", "--realm.services=3", "--realm.fillers=-1",
		"--clients", "2", "--duration", "500ms", "--login-rate", "30", "--tgs-per-login", "1",
		"--client-levels", "1,2", "--level-duration", "300ms", "--startup-rounds", "1",
		"--kadmin-operations", "10", "--dump-rounds", "1", "--degradation-rounds", "2", "--degradation-logins", "20"}, extra...)
}

// resultDir is the one results/<timestamp> directory a run wrote.
func resultDir(t *testing.T, out string) string {
	t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(out, "*"))
	if len(dirs) != 1 {
		t.Fatalf("result directories %v", dirs)
	}
	return dirs[0]
}

// A passing run exits 0 and writes every output; an impossible target
// gives FAIL and exit code 1.
func TestBenchOnceVerdictAndExitCode(t *testing.T) {
	t.Parallel()
	realmtest.RequireMIT(t)
	out := t.TempDir()
	textfile := filepath.Join(t.TempDir(), "bench.prom")
	stdout, stderr, code := exporter(t, smallBench(out, "--tests", "dump,as", "--target.as-min-rate", "1", "--textfile", textfile)...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"Database dump time", "Logins per second", "verdict: PASS"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, stdout)
		}
	}
	dir := resultDir(t, out)
	for _, f := range []string{"report.md", "report.json", "report.html", "raw/as-requests.csv", "raw/resource-samples.csv"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	var rep bench.Report
	b, _ := os.ReadFile(filepath.Join(dir, "report.json"))
	if err := json.Unmarshal(b, &rep); err != nil || rep.Verdict != bench.Pass || rep.Schema != report.SchemaVersion {
		t.Errorf("report.json: %v verdict %q schema %d", err, rep.Verdict, rep.Schema)
	}
	mfs := testutil.ReadExposition(t, textfile).MFs
	if mf := mfs["krb5_bench_last_run_success"]; mf == nil || mf.Metric[0].GetGauge().GetValue() != 1 {
		t.Errorf("textfile: krb5_bench_last_run_success %v", mf)
	}
	if mf := mfs["krb5_bench_pass"]; mf == nil || len(mf.Metric) != 2 {
		t.Errorf("textfile: krb5_bench_pass %v", mf)
	}

	out2 := t.TempDir()
	stdout, stderr, code = exporter(t, smallBench(out2, "--tests", "dump", "--target.dump-max-s", "0.0000001")...)
	if code != 1 {
		t.Fatalf("impossible target: exit %d, want 1\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "FAIL") || !strings.Contains(stdout, "verdict: FAIL") {
		t.Errorf("summary does not say FAIL:\n%s", stdout)
	}
	md, _ := os.ReadFile(filepath.Join(resultDir(t, out2), "report.md"))
	if !strings.Contains(string(md), "**FAIL**") {
		t.Errorf("report.md does not say FAIL:\n%s", md)
	}
}

// Settings come from the flags, the configuration file and the defaults;
// a bad file is one error with file:line, exit 2, nothing run.
func TestBenchConfigErrors(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "bench.yml")
	os.WriteFile(cfg, []byte("clients: 4\nclinets: 3\n"), 0o600)
	_, stderr, code := exporter(t, "bench", "--once", "--config.file", cfg)
	if code != 2 || !strings.Contains(stderr, cfg+`:2: unknown key "clinets"`) {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	_, stderr, code = exporter(t, "bench", "--once", "--tests", "as,nosuch")
	if code != 2 || !strings.Contains(stderr, `unknown test "nosuch"`) {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	os.WriteFile(cfg, []byte("duration: 0s\n"), 0o600)
	_, stderr, code = exporter(t, "bench", "--once", "--config.file", cfg)
	if code != 2 || !strings.Contains(stderr, "duration must be positive") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
	// --count 1..20, from the flag and the file; the comparison's factor
	// floor at least 1.
	for _, a := range [][]string{{"--count", "0"}, {"--count", "21"}, {"--count=-3"}} {
		_, stderr, code = exporter(t, append([]string{"bench", "--once"}, a...)...)
		if code != 2 || !strings.Contains(stderr, "--count: count ") || !strings.Contains(stderr, "out of range 1..20") {
			t.Errorf("%v: exit %d, stderr %q", a, code, stderr)
		}
	}
	os.WriteFile(cfg, []byte("count: 50\n"), 0o600)
	if _, stderr, code = exporter(t, "bench", "--once", "--config.file", cfg); code != 2 || !strings.Contains(stderr, "count 50 out of range 1..20") {
		t.Errorf("count: 50 in the file: exit %d, stderr %q", code, stderr)
	}
	_, stderr, code = exporter(t, "bench", "compare", "--single-run-floor", "0.5", "a", "b")
	if code != 2 || !strings.Contains(stderr, "--single-run-floor must be a factor >= 1") {
		t.Errorf("--single-run-floor 0.5: exit %d, stderr %q", code, stderr)
	}
}

// Against an existing realm (a configuration file): read-only by default
// (kadmin is skipped without --allow-writes), the KDC's processes found by
// its pid file, and a second bench against the same realm at the same
// time is refused.
func TestBenchExistingRealm(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir() // the benches' TMPDIR: the lock file
	env := []string{"TMPDIR=" + tmp}
	r := realmtest.Realm(t, realm.Options{Users: 6, Services: 3})
	cfg := filepath.Join(t.TempDir(), "bench.yml")
	yml := fmt.Sprintf(`clients: 2
duration: 4s
login_rate: 20
tgs_per_login: 1
realm:
  name: %s
  kdc: %s
  domain: %s
  users_keytab: %s
  users: 6
  services: 3
  kadmind: %s
  admin_principal: %s
  admin_keytab: %s
  krb5_config: %s
  kdc_conf: %s
  kdc_pid_file: %s
  dump_command: [kdb5_util, -r, %s]
`, r.Realm, r.KDCAddr, r.Domain, r.UserKeytab, r.KadmindAddr, r.AdminPrincipal, r.AdminKeytab, r.Krb5Conf, r.KDCConf, r.KDCPidFile, r.Realm)
	if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	first := exec.Command(binary, "bench", "--once", "--config.file", cfg, "--output-dir", out, "--tests", "latency,memory,kadmin,dump")
	first.Env = append(os.Environ(), env...)
	var o1, e1 bytes.Buffer
	first.Stdout, first.Stderr = &o1, &e1
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(tmp, "krb5-bench-"+r.Realm+"_"+strings.ReplaceAll(r.KDCAddr, ":", "_")+".lock")
	testutil.Eventually(t, 30*time.Second, "the first bench holds its lock", func() bool {
		f, err := os.Open(lock)
		if err != nil {
			return false
		}
		defer f.Close()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
			return true // held
		}
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return false
	})
	_, stderr, code := exporterEnv(t, env, "bench", "--once", "--config.file", cfg, "--output-dir", t.TempDir(), "--tests", "as")
	if code != 2 || !strings.Contains(stderr, "another bench is running against realm "+r.Realm) {
		t.Errorf("second bench: exit %d, %q", code, stderr)
	}
	// 1 is a verdict (a latency target missed on a busy machine); 2
	// would be a run that could not start.
	if err := first.Wait(); err != nil && first.ProcessState.ExitCode() != 1 {
		t.Fatalf("first bench: %v\n%s\n%s", err, o1.String(), e1.String())
	}
	var rep bench.Report
	b, _ := os.ReadFile(filepath.Join(resultDir(t, out), "report.json"))
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	status := map[string]string{}
	for _, tr := range rep.Tests {
		status[tr.Name] = tr.Status
	}
	if status["latency"] != "pass" && status["latency"] != "fail" || status["kadmin"] != "skipped" || status["dump"] != "pass" || status["memory"] == "skipped" {
		t.Errorf("statuses %v", status)
	}
	if rep.Memory == nil || rep.Memory.PeakBytes == 0 {
		t.Errorf("no KDC memory from the pid file: %+v", rep.Memory)
	}
}

// Without --once the bench runs on a schedule and serves the last
// results as krb5_bench_* on /metrics.
func TestBenchDaemonServesResults(t *testing.T) {
	realmtest.RequireMIT(t)
	addr := realmtest.Addr(t)
	args := append(smallBench(t.TempDir(), "--tests", "dump"), "--web.listen-address", addr, "--interval", "1h")
	args = slices.DeleteFunc(args, func(a string) bool { return a == "--once" })
	cmd, logs := startExporter(t, args...)
	base := "http://" + addr
	testutil.Eventually(t, 60*time.Second, "krb5_bench_last_run_success on /metrics", func() bool {
		resp, err := http.Get(base + "/metrics")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return metric(t, base, "krb5_bench_last_run_success") != ""
	})
	if got := metric(t, base, "krb5_bench_last_run_success"); got != "krb5_bench_last_run_success 1" {
		t.Errorf("%q; log:\n%s", got, logs.String())
	}
	if got := metric(t, base, "krb5_bench_pass"); got != `krb5_bench_pass{metric="dump_seconds",test="dump"} 1` {
		t.Errorf("%q", got)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("SIGTERM: %v; log:\n%s", err, logs.String())
	}
}

// Two generators with --shard 1/2 and 2/2 against one KDC at the same
// time: both run (the lock is per shard), and each logs in only its own
// users (odd, even), as many times as its report counts (the KDC's log).
func TestBenchShards(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir() // the generators' TMPDIR: the lock files
	r := realmtest.Realm(t, realm.Options{Users: 6, Services: 3, NoKadmind: true})
	cfg := filepath.Join(t.TempDir(), "bench.yml")
	yml := fmt.Sprintf("clients: 2\nduration: 2s\nrealm: {name: %s, kdc: %q, domain: %s, users_keytab: %s, users: 6, services: 3}\n",
		r.Realm, r.KDCAddr, r.Domain, r.UserKeytab)
	if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(r.KDCLog)
	outs := []string{t.TempDir(), t.TempDir()}
	var cmds []*exec.Cmd
	for i, out := range outs {
		c := exec.Command(binary, "bench", "--once", "--config.file", cfg, "--output-dir", out, "--tests", "as", "--target.as-min-rate", "1", "--shard", fmt.Sprintf("%d/2", i+1))
		c.Env = append(os.Environ(), "TMPDIR="+tmp)
		var e bytes.Buffer
		c.Stderr = &e
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
		defer func() {
			if t.Failed() {
				t.Logf("shard %d: %s", i+1, e.String())
			}
		}()
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Errorf("shard %d/2: %v", i+1, err)
		}
	}
	after, _ := os.ReadFile(r.KDCLog)
	issued := map[int]int{} // user number -> logins the KDC issued
	re := regexp.MustCompile(`AS_REQ .* ISSUE: .* user(\d+)@` + regexp.QuoteMeta(r.Realm) + ` for krbtgt/`)
	for _, m := range re.FindAllStringSubmatch(string(after[len(before):]), -1) {
		n, _ := strconv.Atoi(m[1])
		issued[n]++
	}
	for i, out := range outs {
		var rep bench.Report
		b, _ := os.ReadFile(filepath.Join(resultDir(t, out), "report.json"))
		if err := json.Unmarshal(b, &rep); err != nil || rep.AS == nil {
			t.Fatalf("shard %d: %v", i+1, err)
		}
		got := 0
		for u := i + 1; u <= 6; u += 2 {
			got += issued[u]
		}
		ok := rep.AS.Requests - rep.AS.Errors
		if ok == 0 || got < ok || got > ok+rep.AS.Clients {
			t.Errorf("shard %d/2: report %d logins, the KDC issued %d to its users %v", i+1, ok, got, issued)
		}
	}
}
