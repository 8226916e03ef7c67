package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/bench/report"
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
