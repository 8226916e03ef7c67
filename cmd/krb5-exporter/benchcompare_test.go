package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/bench/report"
	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// bench compare on the stored pair of real runs (bench/compare/testdata):
// exit 1 with as called slower and the setting that differs said before
// the metrics; a run against itself exit 0; a run that cannot be read
// exit 2 with its path.
func TestBenchCompareCommand(t *testing.T) {
	fast, slow := filepath.Join("..", "..", "bench", "compare", "testdata", "fast"), filepath.Join("..", "..", "bench", "compare", "testdata", "slow")
	var out, errb bytes.Buffer
	if code := run([]string{"bench", "compare", fast, slow}, &out, &errb); code != 1 {
		t.Fatalf("fast slow: exit %d, want 1\n%s%s", code, out.String(), errb.String())
	}
	s := out.String()
	differ, setting, metric := strings.Index(s, "SETTINGS DIFFER (1)"), strings.Index(s, "disable_last_success"), strings.Index(s, "Logins per second")
	if differ < 0 || setting < differ || metric < setting {
		t.Errorf("want the differing setting before the metrics:\n%s", s)
	}
	if !strings.Contains(s, "verdict: 1 metric(s) significantly worse: Logins per second slower -74.1 %") {
		t.Errorf("no verdict line naming as:\n%s", s)
	}
	out.Reset()
	if code := run([]string{"bench", "compare", "--format", "json", fast, filepath.Join(fast, "report.json")}, &out, &errb); code != 0 {
		t.Fatalf("fast fast: exit %d, want 0\n%s%s", code, out.String(), errb.String())
	}
	var c report.Comparison
	if err := json.Unmarshal(out.Bytes(), &c); err != nil {
		t.Fatal(err)
	}
	if c.Worse != 0 || c.Differ != 0 || len(c.Metrics) != 9 {
		t.Errorf("a run against itself: %d worse, %d settings differ, %d metrics", c.Worse, c.Differ, len(c.Metrics))
	}
	errb.Reset()
	missing := filepath.Join(t.TempDir(), "nothing")
	if code := run([]string{"bench", "compare", fast, missing}, &out, &errb); code != 2 || !strings.Contains(errb.String(), missing) {
		t.Errorf("missing run: exit %d, stderr %q", code, errb.String())
	}
	// A FIFO where report.json belongs is refused, not waited on.
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "report.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	if code := run([]string{"bench", "compare", fast, dir}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "not a regular file") {
		t.Errorf("FIFO: exit %d, stderr %q", code, errb.String())
	}
}

// bench --once --baseline, runs one after the other with
// encrypted-timestamp logins (SPAKE's CPU would hide most of the write:
// -33 % against -60 % here on a quiet machine), each a 1 s as load:
//   - A/B at --count 5, a database write per login (last_success)
//     against a run without: compared repetition against repetition,
//     exit 1 although every metric passes its target, as called slower,
//     said after the summary and in report.md ("median of 5");
//   - A/A, one run each (no --count): exit 0, as not called whatever the
//     seconds of the two runs show (the 2x floor), and the verdict line
//     says to use --count 5.
//
// The A/A at --count 5 is TestRealAAAndAB's (the runs at the same
// moment): two invocations one after the other differ by more than the
// 5 % floor on a shared machine (-40 % here, each run's five repetitions
// all on one side; docs/bench.md). Sequential runs differ by more than
// one run's seconds show, so this runs in the pass alone
// (scripts/test-alone.sh). A baseline that cannot be read stops the run
// before it starts (exit 2).
func TestBenchBaselineExitCode(t *testing.T) {
	testutil.Alone(t)
	realmtest.RequireMIT(t)
	args := func(out, base string, lastSuccess bool, count int) []string {
		a := []string{"bench", "--once", "--output-dir", out, "--realm.users=6", "--realm.services=3", "--realm.fillers=-1",
			"--tests", "as", "--duration", "1s", "--batch-inflight", "8", "--target.as-min-rate", "1",
			"--preauth", "encrypted_timestamp", "--count", strconv.Itoa(count)}
		if base != "" {
			a = append(a, "--baseline", base)
		}
		if !lastSuccess {
			a = append(a, "--realm.disable-last-success")
		}
		return a
	}
	// as's change against the baseline, as report.json has it.
	asChange := func(dir string) report.Change {
		t.Helper()
		rep, _, err := report.ReadRun(dir)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Baseline == nil || len(rep.Baseline.Metrics) != 1 {
			t.Fatalf("%s: baseline %+v", dir, rep.Baseline)
		}
		m := rep.Baseline.Metrics[0]
		t.Logf("%s: %s %.0f -> %.0f, %+.1f %% [%+.1f, %+.1f] p=%.3g %s (%d + %d %s)", filepath.Base(dir), m.Name, m.Old, m.New,
			m.ChangePct, m.LowPct, m.HighPct, m.P, m.Verdict, m.OldN, m.NewN, m.Samples)
		return m
	}
	once := func(base string, lastSuccess bool, count int) (dir, stdout string, code int) {
		t.Helper()
		out := t.TempDir()
		stdout, stderr, code := exporter(t, args(out, base, lastSuccess, count)...)
		if code == 2 {
			t.Fatalf("exit 2\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
		}
		return resultDir(t, out), stdout, code
	}
	a0, stdout, code := once("", false, 5)
	if code != 0 {
		t.Fatalf("the baseline run: exit %d\n%s", code, stdout)
	}
	b, stdout, code := once(a0, true, 5)
	if m := asChange(b); code != 1 || !m.RunLevel || m.OldN != 5 || m.NewN != 5 || m.Verdict != report.Slower {
		t.Errorf("A/B at --count 5: exit %d, as %s (run level %v, %d + %d), want 1 and slower", code, m.Verdict, m.RunLevel, m.OldN, m.NewN)
	}
	if !strings.Contains(stdout, "verdict: PASS") || !strings.Contains(stdout, "Compared with the baseline:") ||
		!regexp.MustCompile(`verdict: 1 metric\(s\) significantly worse: Logins per second slower -\d+\.\d+ %`).MatchString(stdout) {
		t.Errorf("A/B stdout:\n%s", stdout)
	}
	md, _ := os.ReadFile(filepath.Join(b, "report.md"))
	if !bytes.Contains(md, []byte("## Compared with the baseline")) || !bytes.Contains(md, []byte("**slower**")) || !bytes.Contains(md, []byte("median of 5 (")) {
		t.Errorf("report.md:\n%s", md)
	}
	s0, _, code := once("", false, 1)
	if code != 0 {
		t.Fatalf("the single baseline run: exit %d", code)
	}
	s1, stdout, code := once(s0, false, 1)
	if m := asChange(s1); code != 0 || m.RunLevel || m.Verdict != report.NoChange ||
		!strings.Contains(stdout, "one run each: only changes beyond 2x are called; use --count 5") {
		t.Errorf("A/A, one run each: exit %d, as %s (run level %v)\n%s", code, m.Verdict, m.RunLevel, stdout)
	}
	_, stderr, code := exporter(t, args(t.TempDir(), filepath.Join(t.TempDir(), "none"), true, 1)...)
	if code != 2 || !strings.Contains(stderr, "--baseline") {
		t.Errorf("unreadable baseline: exit %d, stderr %q", code, stderr)
	}
}

// bench merge refuses runs that are not shards of one run with the
// reason and exit 2 (the stored pair: two whole runs, each shard 1/1),
// and a directory that is not a run.
func TestBenchMergeRefuses(t *testing.T) {
	fast, slow := filepath.Join("..", "..", "bench", "compare", "testdata", "fast"), filepath.Join("..", "..", "bench", "compare", "testdata", "slow")
	var out, errb bytes.Buffer
	if code := run([]string{"bench", "merge", "--output-dir", t.TempDir(), fast, slow}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "are both shard 1/1") {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"bench", "merge", "--output-dir", t.TempDir(), fast, t.TempDir()}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "report.json") {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
}
