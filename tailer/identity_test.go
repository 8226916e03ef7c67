package tailer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// sameHead is a first line longer than the 1 KiB content fingerprint:
// every file a writer with this prefix starts has the same fingerprint.
var sameHead = "Dec  1 05:00:00 kdc1 krb5kdc[4242](info): " + strings.Repeat("x", 1100) + " "

// waitDone waits until the tailer has let go of a rotated file read to
// its end (it is in the saved position's Done list).
func (h *harness) waitDone(n int) {
	h.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if p, ok := h.cur.store.Get(h.path); ok && len(p.Done) >= n {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("no rotated file let go after RotateWait")
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (h *harness) rename(to string) {
	h.t.Helper()
	if err := os.Rename(h.path, to); err != nil {
		h.t.Fatal(err)
	}
}

// TestSameHeadsRotatedWhileStopped: files that begin with the same bytes
// are different files. A file created and rotated away while the
// exporter was stopped is never taken for the one read before it that
// had the same first KiB (rotate_torture.py's lines repeat; so do the
// first lines of logs whose writer does not put a time first).
func TestSameHeadsRotatedWhileStopped(t *testing.T) {
	h := newHarness(t)
	h.opts.FromBeginning = true
	w := newLogWriter(t, h.path)
	w.prefix = sameHead
	w.lines(5) // A
	h.start()
	h.waitLines(w.n)
	h.rename(h.path + ".1")
	w.reopen()
	w.lines(5) // B
	h.waitLines(w.n)
	h.waitDone(1) // A read to its end and let go: remembered as done
	h.stop()

	h.rename(h.path + ".1") // B, replacing A
	w.reopen()
	w.lines(5)              // C: never open
	h.rename(h.path + ".1") // replacing B
	w.reopen()
	w.lines(5) // D
	h.start()
	h.waitLinesUpTo(w.n, 3*time.Second)
	h.stop()
	if d := h.cur.stats.Discovered.Load(); d != 1 {
		t.Errorf("discovered %d files never read, want 1 (C)", d)
	}
	h.exactlyOnce(w.n)
}

// TestSameHeadsFasterThanReads: with reads only when the test asks for
// one (polling, no inotify), a file created and rotated away between two
// reads is found although the file read before it began with the same
// bytes.
func TestSameHeadsFasterThanReads(t *testing.T) {
	h := newHarness(t)
	h.opts = Options{FromBeginning: true, NoInotify: true, PollInterval: time.Hour, MinInterval: time.Millisecond, RotateWait: time.Hour}
	w := newLogWriter(t, h.path)
	w.prefix = sameHead
	w.lines(5) // A
	h.start()
	h.waitLines(w.n)
	read := func() {
		h.cur.tl.SetTimings(time.Hour, time.Hour) // a wake-up: one read
	}
	h.rename(h.path + ".1")
	w.reopen()
	w.lines(5)              // B: never open
	h.rename(h.path + ".2") // B moves on before any read
	w.reopen()
	w.lines(5) // C
	read()
	h.waitLinesUpTo(w.n, 3*time.Second)
	h.stop()
	h.exactlyOnce(w.n)
}

// TestRotatedLostCountsOnlyLoss: a restart counts a rotated file as lost
// (krb5_kdc_log_position_mismatches_total{reason="rotated_lost"}) only if
// lines may have gone to it after the stop: not a deleted file read to
// its end once the daemon writes to the new log (it can get no more
// lines), but a renamed one the daemon could still write to that was
// then removed while the exporter was stopped.
func TestRotatedLostCountsOnlyLoss(t *testing.T) {
	t.Run("deleted", func(t *testing.T) {
		h := newHarness(t)
		h.opts.FromBeginning = true
		h.opts.RotateWait = time.Hour // still being read at the stop
		w := newLogWriter(t, h.path)
		w.lines(5)
		h.start()
		h.waitLines(w.n)
		w.f.Close()
		if err := os.Remove(h.path); err != nil {
			t.Fatal(err)
		}
		w.reopen()
		w.lines(5)
		h.waitLines(w.n)
		h.stop()
		h.start()
		w.lines(5)
		h.waitLines(w.n)
		h.stop()
		if n := h.cur.stats.Mismatches[MismatchRotatedLost].Load(); n != 0 {
			t.Errorf("rotated_lost %d, want 0: the deleted file was read to its end and the daemon had moved on", n)
		}
		if n := h.cur.stats.Unread.Load(); n != 0 {
			t.Errorf("unread %d, want 0", n)
		}
		h.exactlyOnce(w.n)
	})
	t.Run("renamed then removed while stopped", func(t *testing.T) {
		h := newHarness(t)
		h.opts.FromBeginning = true
		h.opts.RotateWait = time.Hour
		w := newLogWriter(t, h.path)
		w.lines(5)
		h.start()
		h.waitLines(w.n)
		h.rename(h.path + ".1")
		old := w.f // the daemon has not reopened yet
		w.f = nil
		w.reopen()
		w.lines(5)
		h.waitLines(w.n)
		h.stop()
		// Written to the renamed file after the stop, then the file is
		// removed (compressed): these lines are lost, and counted so.
		if _, err := old.WriteString(sameHead + "seq=99999999 late\n"); err != nil {
			t.Fatal(err)
		}
		old.Close()
		if err := os.Remove(h.path + ".1"); err != nil {
			t.Fatal(err)
		}
		h.start()
		w.lines(5)
		h.waitLines(w.n)
		h.stop()
		if n := h.cur.stats.Mismatches[MismatchRotatedLost].Load(); n != 1 {
			t.Errorf("rotated_lost %d, want 1", n)
		}
		h.exactlyOnce(w.n)
	})
}

// TestCreatedThenGoneBeforeLook: the watcher opened a new log the moment
// it was created; the file is deleted before the tailer looks at the
// path again. Its lines are read through the watcher's descriptor (they
// were lost when the descriptor was closed because the path still named
// the file when it was handed over).
func TestCreatedThenGoneBeforeLook(t *testing.T) {
	h := newHarness(t)
	w := newLogWriter(t, h.path)
	w.lines(5) // A
	tl := h.stepped(func(tl *Tailer) { tl.w = newEventWatcher(h.path) })

	w.f.Close()
	if err := os.Remove(h.path); err != nil {
		t.Fatal(err)
	}
	w.reopen()
	w.lines(5) // B
	f, err := os.Open(h.path)
	if err != nil {
		t.Fatal(err)
	}
	tl.w.queue = append(tl.w.queue, f) // what the watcher does on IN_CREATE
	tl.adoptCreated()
	w.f.Close()
	if err := os.Remove(h.path); err != nil { // B gone before checkPath
		t.Fatal(err)
	}
	w.reopen()
	w.lines(5) // C
	tl.cycle(never)
	tl.cycle(never)
	h.exactlyOnce(w.n)
}

// TestVanishedCounted: a log created and deleted again before the
// watcher could open it is counted as unread (krb5_kdc_log_files_unread_total),
// not lost silently; one renamed away instead is not (it may be found
// next to the log), nor one opened in time.
func TestVanishedCounted(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "krb5kdc.log")
	wt := newEventWatcher(path)
	// The events as inotify reports them; the file is gone when the
	// watcher gets to open it.
	wt.rotEvent("krb5kdc.log", "krb5kdc.log", unix.IN_CREATE, 0)
	wt.rotEvent("krb5kdc.log", "krb5kdc.log", unix.IN_DELETE, 0)
	wt.account()
	if n := wt.vanished.Load(); n != 1 {
		t.Errorf("created and deleted before opened: vanished %d, want 1", n)
	}
	wt.rotEvent("krb5kdc.log", "krb5kdc.log", unix.IN_CREATE, 0)
	wt.rotEvent("krb5kdc.log", "krb5kdc.log", unix.IN_MOVED_FROM, 7)
	wt.rotEvent("krb5kdc.log.1", "krb5kdc.log", unix.IN_MOVED_TO, 7)
	wt.account()
	if n := wt.vanished.Load(); n != 1 {
		t.Errorf("renamed away before opened: vanished %d, want still 1", n)
	}
	// Opened in time: its deletion loses nothing.
	if err := os.WriteFile(path, []byte("a line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wt.rotEvent("krb5kdc.log", "krb5kdc.log", unix.IN_CREATE, 0)
	wt.rotEvent("krb5kdc.log", "krb5kdc.log", unix.IN_DELETE, 0)
	wt.account()
	if n := wt.vanished.Load(); n != 1 {
		t.Errorf("held and then deleted: vanished %d, want still 1", n)
	}
	for _, f := range wt.take() {
		f.Close()
	}
}
