package kdclog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// TestJournalCost checks the README's claim on the journal source's cost
// as ratios measured side by side in one run, which noise does not turn
// over: the same 30,000 KDC lines counted from a file and from a journal,
// CPU time from /proc (BenchmarkJournalCost measures the figures the
// README quotes: file 0.37 µs a line, journal source 7.7, journalctl 39).
// The journal source must cost less than journalctl spends producing its
// JSON (the README: a fifth; 0.29 here on a quiet machine, 0.48 with a
// load average of 40 on 2 cores), and the file source less than a third of
// the journal source (the README: a twentieth; measured 0.04-0.10).
func TestJournalCost(t *testing.T) {
	if testing.Short() {
		t.Skip("a measurement of a few seconds of CPU")
	}
	if testutil.Race {
		// Measured under -race: journal source 2.1 times journalctl.
		t.Skip("the race detector multiplies the exporter's CPU, not journalctl's; scripts/test-alone.sh runs this test without it")
	}
	testutil.RequireProgram(t, "journalctl")
	if _, err := os.Stat(journalRemote); err != nil {
		if testutil.InCI() {
			t.Fatalf("%s missing in CI: %v", journalRemote, err)
		}
		t.Skip(err)
	}
	fixture, lines := fixtureEntries(t, "testdata/mit-1.20-kdc.log")
	const n = 30_000
	var entries []journalEntry
	var text []string
	for i := 0; len(entries) < n; i++ {
		if e := fixture[i%len(fixture)]; e.ident == "krb5kdc" {
			entries, text = append(entries, e), append(text, lines[i%len(fixture)])
		}
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "krb5kdc.log")
	if err := os.WriteFile(file, []byte(strings.Join(text, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	jdir := filepath.Join(dir, "journal")
	if err := os.Mkdir(jdir, 0o700); err != nil {
		t.Fatal(err)
	}
	ts := int64(1764556800000000)
	writeJournal(t, filepath.Join(jdir, "remote.journal"), &ts, entries)

	fileSrc := config.LogSource{Path: file, Type: "kdc", StartAt: "beginning"}
	jSrc := config.LogSource{Type: "kdc", StartAt: "beginning", Journal: &config.JournalSource{Directory: jdir}}
	fileCPU, _ := runSource(t, fileSrc, func(m *Manager) bool { return m.linesRead(file, n) })
	selfCPU, jctlCPU := runSource(t, jSrc, func(m *Manager) bool { return m.entriesRead(jSrc.Key(), n) })
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / n / 1e3 }
	t.Logf("CPU per line: file source %.2f µs, journal source %.2f µs, journalctl %.2f µs (journal/journalctl %.2f, file/journal %.2f)",
		per(fileCPU), per(selfCPU), per(jctlCPU), float64(selfCPU)/float64(jctlCPU), float64(fileCPU)/float64(selfCPU))
	if selfCPU >= jctlCPU {
		t.Errorf("the journal source used %v of CPU, journalctl %v: not less", selfCPU, jctlCPU)
	}
	if fileCPU*3 >= selfCPU {
		t.Errorf("the file source used %v of CPU, the journal source %v: not less than a third", fileCPU, selfCPU)
	}
}
