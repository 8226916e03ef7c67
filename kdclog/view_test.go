package kdclog

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// Sources says what the status page shows of a log: its lines, the read
// position in the current file, the lag, and the last rotation, here a
// rename, with the lines not understood.
func TestSourcesView(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "krb5kdc.log")
	writeLines(t, path, asIssue("user1@PERF.TEST"), "garbage")
	began := time.Now()
	tm := startManager(t, filepath.Join(dir, "positions.json"),
		config.LogSource{Path: path, Type: "kdc", StartAt: "beginning", PollInterval: 20 * time.Millisecond})
	waitValue(t, tm.reg, 2, "krb5_kdc_log_lines_read_total", "path", path)
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	writeLines(t, path, tgsIssue("user1@PERF.TEST"))
	waitValue(t, tm.reg, 3, "krb5_kdc_log_lines_read_total", "path", path)
	var s SourceStatus
	testutil.Eventually(t, 15*time.Second, "the position of the new file", func() bool {
		srcs := tm.m.Sources()
		if len(srcs) != 1 {
			t.Fatalf("sources: %+v", srcs)
		}
		s = srcs[0]
		return s.Offset == int64(len(tgsIssue("user1@PERF.TEST"))+1)
	})
	if s.Path != path || s.Type != "kdc" || !s.Open || s.Journal || s.Lines != 3 || s.Unparsed != 1 || s.BytesBehind != 0 {
		t.Errorf("source: %+v", s)
	}
	if s.Rotations != 1 || s.LastRotationKind != "rename" || s.LastRotation.Before(began) || s.LastRotation.After(time.Now()) {
		t.Errorf("rotation: %d, last %v (%s), want one rename after %v", s.Rotations, s.LastRotation, s.LastRotationKind, began)
	}
}
