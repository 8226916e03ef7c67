package tailer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A problem that lasts is one line however often the tailer looks, and
// is logged again when it comes back after the log could be opened.
func TestProblemLoggedOncePerSpell(t *testing.T) {
	h := newHarness(t)
	sub := filepath.Join(h.dir, "sub")
	h.path = filepath.Join(sub, "krb5kdc.log")
	if err := os.WriteFile(sub, nil, 0o644); err != nil { // a file where the log's directory should be: stat fails with ENOTDIR
		t.Fatal(err)
	}
	tl := h.stepped(nil)
	spell := func() {
		for range 3 {
			tl.cycle(never)
		}
	}
	const msg = `msg="cannot stat the log"`
	spell()
	if n, errs := strings.Count(h.logs.String(), msg), tl.stats.ReadErrors.Load(); n != 1 || errs < 3 {
		t.Fatalf("%d lines for %d failed looks, want 1 line for at least 3", n, errs)
	}
	if err := os.Remove(sub); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	appendFile(t, h.path, "a line\n")
	tl.cycle(never)
	h.waitLines(1)
	if err := os.RemoveAll(sub); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sub, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	spell()
	if n := strings.Count(h.logs.String(), msg); n != 2 {
		t.Errorf("%d lines after the problem came back, want 2", n)
	}
}
