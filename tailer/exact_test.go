package tailer

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// logWriter writes numbered lines to a log through one descriptor opened
// in append mode, the way krb5kdc does, until it is told to reopen.
type logWriter struct {
	t    *testing.T
	path string
	f    *os.File
	n    int
	// prefix, if set, starts every line, so that every file begins with
	// the same bytes (a writer whose lines repeat).
	prefix string
}

func newLogWriter(t *testing.T, path string) *logWriter {
	w := &logWriter{t: t, path: path}
	w.reopen()
	t.Cleanup(func() { w.f.Close() })
	return w
}

func (w *logWriter) reopen() {
	if w.f != nil {
		w.f.Close()
	}
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		w.t.Fatal(err)
	}
	w.f = f
}

func (w *logWriter) lines(k int) {
	for range k {
		// As long as a KDC line, so that 1 KiB holds only a few.
		if _, err := fmt.Fprintf(w.f, "%sseq=%08d %s\n", w.prefix, w.n, strings.Repeat("k", 240)); err != nil {
			w.t.Fatal(err)
		}
		w.n++
	}
}

// copyTruncate is logrotate's copytruncate: copy to name.1 (replacing
// the last copy), then truncate in place.
func copyTruncate(t *testing.T, path string) {
	t.Helper()
	src, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(path + ".1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	dst.Close()
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
}

// missing names the lines not handed on yet, as ranges, to explain a
// failure.
func (h *harness) missing(n int) string {
	seen := make([]bool, n)
	for _, l := range h.recorder.snapshot() {
		if k, err := seqOf(l); err == nil && k >= 0 && k < n {
			seen[k] = true
		}
	}
	var out []string
	for i := 0; i < n; i++ {
		if !seen[i] {
			j := i
			for j+1 < n && !seen[j+1] {
				j++
			}
			out = append(out, fmt.Sprintf("%d-%d", i, j))
			i = j
		}
	}
	return strings.Join(out, ",")
}

// waitLinesUpTo waits until n lines were handed on or d passed.
func (h *harness) waitLinesUpTo(n int, d time.Duration) {
	deadline := time.Now().Add(d)
	for h.recorder.count() < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

// TestExactAcrossRotationsAndRestarts is rotate_torture.py in small: with
// the production timings (reads batched once a second), a log rotated
// with one method, twice in quick succession while running and twice
// while the tailer is stopped, with one rotated name (.1) that each
// rotation replaces, and restarts in between, which free every inode the
// tailer held for the next file to reuse. Every line is handed on once.
func TestExactAcrossRotationsAndRestarts(t *testing.T) {
	for _, method := range []string{"rename", "copytruncate", "delete"} {
		t.Run(method, func(t *testing.T) {
			h := newHarness(t)
			h.opts = Options{FromBeginning: true, MinInterval: time.Second, PollInterval: time.Second}
			w := newLogWriter(t, h.path)
			// late: lines the daemon writes to a renamed file before it
			// reopens its log.
			rotate := func(late int) {
				fmt.Fprintf(h.logs, "TEST rotate at line %d %s\n", w.n, time.Now().UTC().Format(time.RFC3339Nano))
				switch method {
				case "rename":
					if err := os.Rename(h.path, h.path+".1"); err != nil {
						t.Fatal(err)
					}
					w.lines(late)
					w.reopen()
				case "copytruncate":
					copyTruncate(t, h.path)
				case "delete":
					w.f.Close()
					if err := os.Remove(h.path); err != nil {
						t.Fatal(err)
					}
					w.reopen()
				}
			}
			h.start()
			const rounds = 4
			for round := range rounds {
				// Two rotations faster than the reads: the file in between
				// lives for a moment only. A deleted file's lines can be
				// read only while it exists: it lives up to 0.7 s, less
				// than the batch interval that follows a read.
				w.lines(100)
				h.waitLines(w.n)
				rotate(5)
				w.lines(100)
				if method == "delete" {
					h.waitLinesUpTo(w.n, 700*time.Millisecond)
				}
				rotate(5)
				w.lines(100)

				// Stopped while rotated files are still read; the files it
				// held are closed and their inodes free for the next file.
				if method != "delete" {
					h.stop()
					w.lines(50) // read after the restart, in the file it went to
					rotate(5)
					w.lines(50)
					h.start()
				}

				// Two rotations while stopped (one for delete: the file in
				// between would be gone before anyone could read it). The
				// file current at the stop is replaced by the second: no
				// line may go to it after the stop.
				h.waitLines(w.n)
				h.stop()
				rotate(0)
				w.lines(50)
				if method != "delete" {
					rotate(5)
					w.lines(50)
				}
				h.start()
				t.Logf("round %d: %d lines", round, w.n)
			}
			w.lines(10)
			h.waitLines(w.n)
			h.stop() // nothing more can arrive
			h.exactlyOnce(w.n)
		})
	}
}

// TestTwoRotationsWhileStopped: the file between two rotations while the
// tailer was stopped was never open; it is found and read from its start
// (krb5_kdc_log_files_discovered_total), not lost.
func TestTwoRotationsWhileStopped(t *testing.T) {
	h := newHarness(t)
	h.opts.FromBeginning = true
	w := newLogWriter(t, h.path)
	w.lines(10)
	h.start()
	h.waitLines(w.n)
	h.stop()
	for range 2 {
		if err := os.Rename(h.path, h.path+".1"); err != nil {
			t.Fatal(err)
		}
		w.reopen()
		w.lines(10)
	}
	h.start()
	h.waitLines(w.n)
	if d := h.cur.stats.Discovered.Load(); d != 1 {
		t.Errorf("discovered %d files, want 1", d)
	}
	h.stop()
	h.exactlyOnce(w.n)
}

// exactlyOnce checks that lines 0..n-1 of a logWriter were each handed on
// once, and nothing else.
func (h *harness) exactlyOnce(n int) {
	h.t.Helper()
	seen := make([]int, n)
	for _, l := range h.recorder.snapshot() {
		k, err := seqOf(l)
		if err != nil || k < 0 || k >= n {
			h.t.Fatalf("malformed line %q", l[:min(len(l), 40)])
		}
		seen[k]++
	}
	for k, c := range seen {
		if c != 1 {
			h.t.Errorf("line %d handed on %d times", k, c)
		}
	}
}

// seqOf is the number a logWriter put in a line.
func seqOf(l string) (int, error) {
	i := strings.Index(l, "seq=")
	if i < 0 || len(l) < i+12 {
		return 0, fmt.Errorf("no sequence number in %q", l)
	}
	return strconv.Atoi(l[i+4 : i+12])
}

// TestCopyInProgressNotTakenForNew: two copytruncates in quick
// succession. The tailer notices the first truncation while the second
// copy is still being written, then reads the log (the second copy's
// content) from its start. The half-written copy begins like the log
// and holds nothing but what was just read there: it is not a file never
// read (taking it for one handed its lines on twice).
func TestCopyInProgressNotTakenForNew(t *testing.T) {
	h := newHarness(t)
	w := newLogWriter(t, h.path)
	w.lines(100) // A
	tl := h.stepped(nil)

	copyTruncate(t, h.path)
	w.lines(100) // B
	// The second copy, half written: B's first bytes only.
	b, err := os.ReadFile(h.path)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := os.Create(h.path + ".1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Write(b[:len(b)/2]); err != nil {
		t.Fatal(err)
	}
	tl.cycle(never) // the first truncation; B read from the log
	if _, err := cp.Write(b[len(b)/2:]); err != nil {
		t.Fatal(err)
	}
	cp.Close()
	h.secondTruncation(tl, w)
}

// TestCopyRewrittenWhileListed: the copy of a second copytruncate is
// replacing the first copy in place just as the tailer lists the rotated
// files after the first truncation: the listing finds the old size and no
// first bytes yet. That file is decided once it has settled; taking it
// for a file never read handed the second copy's lines on twice.
func TestCopyRewrittenWhileListed(t *testing.T) {
	h := newHarness(t)
	w := newLogWriter(t, h.path)
	w.lines(100) // A
	tl := h.stepped(nil)

	copyTruncate(t, h.path)
	w.lines(100) // B
	rewriting := false
	tl.listed = func(path string) {
		if path == h.path+".1" && !rewriting {
			rewriting = true
			// The second copy starts: it truncates the first.
			if err := os.Truncate(path, 0); err != nil {
				t.Error(err)
			}
		}
	}
	tl.cycle(never) // the first truncation; B read from the log
	if !rewriting {
		t.Fatal("the rotated files were not listed after the truncation")
	}
	tl.listed = nil
	b, err := os.ReadFile(h.path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.path+".1", b, 0o644); err != nil { // the second copy done
		t.Fatal(err)
	}
	h.secondTruncation(tl, w)
}

// secondTruncation ends a second copytruncate whose copy is complete:
// the log is truncated, C written, and after two cycles every line was
// handed on once.
func (h *harness) secondTruncation(tl *Tailer, w *logWriter) {
	h.t.Helper()
	if err := os.Truncate(h.path, 0); err != nil {
		h.t.Fatal(err)
	}
	w.lines(100) // C
	tl.cycle(never)
	tl.cycle(never)
	h.exactlyOnce(w.n)
}
