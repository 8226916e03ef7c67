package tailer

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-kit/log"
	"golang.org/x/sys/unix"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// watcherHolds reports whether t's watcher has opened the file f is open
// on (false while there is no watcher).
func watcherHolds(t *Tailer, f *os.File) bool {
	if t.w == nil {
		return false
	}
	k, _ := keyOf(f)
	t.w.mu.Lock()
	defer t.w.mu.Unlock()
	_, ok := t.w.ids[k]
	return ok
}

// TestRotatedAwayWhileRestoring: right after a restart has restored the
// saved position and before anything is read, the log is rotated, a new
// file F gets lines and is rotated away for good (deleted; or renamed to
// .1 and renamed over by the next rotation), and the file after it gets
// lines. The directory must be watched before the positions are restored:
// then F is opened on its creation and read, and every line is handed on
// once with nothing counted unread. Watched only after restore, F came
// and went unseen and its lines were lost without a count.
func TestRotatedAwayWhileRestoring(t *testing.T) {
	for _, method := range []string{"delete", "rename"} {
		t.Run(method, func(t *testing.T) {
			h := newHarness(t)
			h.opts = Options{FromBeginning: true, MinInterval: 2 * time.Millisecond, PollInterval: time.Hour, RotateWait: time.Hour}
			w := newLogWriter(t, h.path)
			w.lines(5)
			h.start()
			h.waitLines(5)
			h.stop()

			rotate := func() {
				if method == "delete" {
					if err := os.Remove(h.path); err != nil {
						t.Fatal(err)
					}
				} else if err := os.Rename(h.path, h.path+".1"); err != nil {
					t.Fatal(err)
				}
				w.reopen()
			}
			waited := true
			h.opts.restored = func(tl *Tailer) {
				w.lines(3) // to the restored file, after its saved position
				rotate()   // F
				w.lines(4)
				// The watcher opens F on its creation (no gate): wait for
				// that, bounded, before F goes.
				deadline := time.Now().Add(3 * time.Second)
				for !watcherHolds(tl, w.f) {
					if time.Now().After(deadline) {
						waited = false
						break
					}
					time.Sleep(time.Millisecond)
				}
				rotate() // G; with rename F is at .1
				w.lines(2)
				if method == "rename" {
					rotate() // H; F renamed over by G
					w.lines(2)
				}
			}
			h.start()
			defer h.stop()
			n := w.n
			h.waitLinesUpTo(n, 5*time.Second)
			if !waited {
				t.Error("the watcher did not open the file created after the restore")
			}
			h.exactlyOnce(n)
			if u := h.cur.stats.Unread.Load(); u != 0 {
				t.Errorf("unread files %d, want 0", u)
			}
		})
	}
}

// TestWatcherIDsPruned: a log deleted and re-created 3*minPrune times
// while the tailer runs. Every file is opened (by the watcher on its
// creation or by the tailer) and read once; the watcher's set of the
// files it has seen does not grow with the rotations (the files let go
// and gone are dropped from it), and the counting of missed files, which
// no longer rests on the size of that set, counts none.
func TestWatcherIDsPruned(t *testing.T) {
	const rotations = 3 * minPrune
	h := newHarness(t)
	h.opts = Options{FromBeginning: true, MinInterval: 2 * time.Millisecond, PollInterval: time.Hour, RotateWait: time.Millisecond}
	w := newLogWriter(t, h.path)
	w.lines(2)
	h.start()
	defer h.stop()
	h.waitLines(2)
	most := 0
	for range rotations {
		if err := os.Remove(h.path); err != nil {
			t.Fatal(err)
		}
		w.reopen()
		w.lines(2)
		h.waitLines(w.n) // read: opened before the next rotation deletes it
		tl := h.cur.tl
		tl.w.mu.Lock()
		most = max(most, len(tl.w.ids))
		tl.w.mu.Unlock()
	}
	if most >= 2*minPrune {
		t.Errorf("the watcher remembered up to %d files after %d rotations, want fewer than %d", most, rotations, 2*minPrune)
	}
	h.exactlyOnce(w.n)
	tl := h.cur.tl
	tl.w.account()
	if u, v := h.cur.stats.Unread.Load(), tl.w.vanished.Load(); u+v != 0 {
		t.Errorf("unread files %d (+%d not yet taken), want 0", u, v)
	}
}

// TestTurnedDownOpenNotNoted: the tailer opens a file and turns it down
// (replaced between a directory listing and the open, or not holding a
// saved position). The watcher must still open and queue that file when
// an event names it: had the tailer's open been noted, the watcher would
// leave the file to the tailer, which does not hold it, and its lines
// would be lost without a count.
func TestTurnedDownOpenNotNoted(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "krb5kdc.log")
	wt := newEventWatcher(path) // no file yet: nothing there at the start
	tl := New(Options{Path: path}, log.NewNopLogger(), &Positions{files: map[string]Position{}}, &Stats{}, func([]byte, bool) {})
	tl.w = wt
	if err := os.WriteFile(path, []byte("F\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := tl.openNotedIf(path, func(*file, os.FileInfo) bool { return false }); err == nil {
		t.Fatal("a file turned down was returned")
	}
	wt.rotEvent("krb5kdc.log", "krb5kdc.log", unix.IN_CREATE, 0) // handled late
	q := wt.take()
	for _, f := range q {
		f.Close()
	}
	if len(q) != 1 {
		t.Errorf("the watcher queued %d files, want the one the tailer turned down", len(q))
	}
	wt.account()
	if n := wt.vanished.Load(); n != 0 {
		t.Errorf("unread %d, want 0", n)
	}
}

// TestRestoredFileRenamedNotACreation: after a restart the log the
// tailer restored (there before the watch began) is renamed to .1; the
// rename event names it, but it is no new file. Then a new log is created
// and deleted before the watcher gets to its creation, and another one
// is created. Exactly one file was missed and must be counted: counting
// the restored file as one opened since the start hid it (lost without a
// count).
func TestRestoredFileRenamedNotACreation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "krb5kdc.log")
	if err := os.WriteFile(path, []byte("P0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wt := newEventWatcher(path)
	wt.since = watchStart() // the watch begins (see watchRotations)
	// restore opens the log at its saved position
	f0, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f0.Close()
	wt.mu.Lock()
	wt.note(f0)
	wt.mu.Unlock()

	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	wt.rotEvent("krb5kdc.log", "krb5kdc.log", unix.IN_MOVED_FROM, 7)
	wt.rotEvent("krb5kdc.log.1", "krb5kdc.log", unix.IN_MOVED_TO, 7)
	if err := os.WriteFile(path, []byte("F\n"), 0o644); err != nil { // F
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("G\n"), 0o644); err != nil { // G
		t.Fatal(err)
	}
	wt.rotEvent("krb5kdc.log", "krb5kdc.log", unix.IN_CREATE, 0) // F's, handled late
	wt.rotEvent("krb5kdc.log", "krb5kdc.log", unix.IN_DELETE, 0)
	wt.rotEvent("krb5kdc.log", "krb5kdc.log", unix.IN_CREATE, 0) // G's
	wt.account()
	q := wt.take()
	for _, f := range q {
		f.Close()
	}
	if len(q) != 1 {
		t.Errorf("queued %d files, want 1 (G)", len(q))
	}
	if n := wt.vanished.Load(); n != 1 {
		t.Errorf("unread %d, want 1 (F)", n)
	}
}

// TestCreatedAsTheWatchBeganCounted: a log created the moment the watch
// began, opened by the tailer and deleted before the watcher read its
// creation, was opened: it is not missed. File birth times come from the
// kernel's coarse clock, a tick behind a fine clock's reading of the
// watch's start, so such a file looked older than the watch, its open was
// not counted, and the creation counted as a file missed (1 run in 20 of
// TestWatcherIDsPruned beside another suite).
func TestCreatedAsTheWatchBeganCounted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "krb5kdc.log")
	gate := make(chan struct{})
	wt := newWatcher(Options{Path: path, MinInterval: time.Millisecond, PollInterval: time.Hour, gate: gate}, log.NewNopLogger())
	defer wt.close()
	if !wt.active() {
		if testutil.InCI() {
			t.Fatal("inotify unavailable in CI")
		}
		t.Skip("inotify unavailable")
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	wt.mu.Lock()
	wt.note(f) // the tailer's open
	wt.mu.Unlock()
	f.Close()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	close(gate) // the watcher reads the creation now; the file is gone
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		wt.mu.Lock()
		c := wt.creates
		wt.mu.Unlock()
		if c > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the watcher did not see the creation")
		}
	}
	wt.account()
	if v := wt.vanished.Load(); v != 0 {
		t.Errorf("a file opened by the tailer counted as missed (%d)", v)
	}
}
