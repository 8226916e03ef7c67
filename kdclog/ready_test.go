package kdclog

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestReadyHoldsTheLog: once Ready is closed (serve answers on /metrics
// only then) the log is held open at its saved position, so a rotation
// that deletes it at once loses nothing: the lines written while the
// exporter was stopped are counted.
func TestReadyHoldsTheLog(t *testing.T) {
	dir := t.TempDir()
	path, pos := filepath.Join(dir, "krb5kdc.log"), filepath.Join(dir, "positions.json")
	writeLines(t, path, asIssue("a@PERF.TEST"), asIssue("b@PERF.TEST"))
	tm := startManager(t, pos, src(path))
	waitValue(t, tm.reg, 2, "krb5_kdc_requests_total", "request", "as", "status", "ISSUE")
	tm.stop()

	writeLines(t, path, asIssue("c@PERF.TEST"), asIssue("d@PERF.TEST"), asIssue("e@PERF.TEST"))
	tm = startManager(t, pos, src(path))
	select {
	case <-tm.m.Ready():
	case <-time.After(15 * time.Second):
		t.Fatal("the manager never became ready")
	}
	if err := os.Remove(path); err != nil { // delete rotation, right away
		t.Fatal(err)
	}
	waitValue(t, tm.reg, 3, "krb5_kdc_requests_total", "request", "as", "status", "ISSUE")
}
