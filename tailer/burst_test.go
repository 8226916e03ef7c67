package tailer

import (
	"io"
	"path/filepath"
	"strings"

	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRenameBurstWhileNotScheduled: the writer rotates by rename N times
// (each rename replaces the last kdc.log.1) while the exporter is not
// scheduled (its inotify events wait unread: the gate), as a KDC catching
// up after a pause does. inotify then reports N creations that all name
// the newest file. What can still be read is read exactly once: the file
// held from before, the newest one and the one at kdc.log.1; the files
// renamed over in between are gone, and exactly their number is counted
// unread (krb5_kdc_log_files_unread_total), not zero and not more.
func TestRenameBurstWhileNotScheduled(t *testing.T) {
	const rotations = 6
	h := newHarness(t)
	gate := make(chan struct{})
	h.opts = Options{PollInterval: time.Hour, MinInterval: 2 * time.Millisecond, RotateWait: time.Hour, FromBeginning: true, gate: gate}
	w := newLogWriter(t, h.path)
	w.lines(5)
	h.start()
	defer h.stop()
	h.waitLines(5)

	files := [][]int{{0, 1, 2, 3, 4}} // sequence numbers, by file
	add := func(i, from int) {
		for k := from; k < w.n; k++ {
			files[i] = append(files[i], k)
		}
	}
	for r := 1; r <= rotations; r++ {
		if err := os.Rename(h.path, h.path+".1"); err != nil {
			t.Fatal(err)
		}
		first := w.n
		w.lines(3) // to the renamed file, before the writer reopens
		add(r-1, first)
		w.reopen()
		files = append(files, nil)
		first = w.n
		w.lines(10)
		add(r, first)
	}
	// Held by the tailer, named kdc.log.1, named kdc.log: the rest were
	// renamed over.
	want := map[int]bool{}
	for _, i := range []int{0, rotations - 1, rotations} {
		for _, k := range files[i] {
			want[k] = true
		}
	}
	lost := rotations - 2
	close(gate)

	deadline := time.Now().Add(15 * time.Second)
	for h.recorder.count() < len(want) || h.cur.stats.Unread.Load() < uint64(lost) {
		if time.Now().After(deadline) {
			t.Fatalf("got %d of %d lines, %d unread files of %d", h.recorder.count(), len(want), h.cur.stats.Unread.Load(), lost)
		}
		time.Sleep(2 * time.Millisecond)
	}
	stats := h.cur.stats
	h.stop()
	h.start() // stop drained the tailer; nothing more may come
	seen := map[int]int{}
	for _, l := range h.recorder.snapshot() {
		k, err := seqOf(l)
		if err != nil {
			t.Fatal(err)
		}
		seen[k]++
	}
	for k := range want {
		if seen[k] != 1 {
			t.Errorf("line %d read %d times, want once", k, seen[k])
		}
	}
	for k, c := range seen {
		if !want[k] {
			t.Errorf("line %d read %d times, but its file was gone", k, c)
		}
	}
	if n := stats.Unread.Load(); n != uint64(lost) {
		t.Errorf("unread files %d, want %d (the files renamed over)", n, lost)
	}
}

// TestRenamedAwayBeforeOpened: the watcher gets to the creation of A only
// after A was renamed to kdc.log.1 and B created; the rename event (its
// cookie pairs IN_MOVED_FROM kdc.log with IN_MOVED_TO kdc.log.1) makes it
// open A there before it is removed, so both are held and none is
// counted unread.
func TestRenamedAwayBeforeOpened(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "krb5kdc.log")
	wt := newEventWatcher(path)
	if err := os.WriteFile(path, []byte("A\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("B\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The events as inotify queued them, handled late.
	wt.rotEvent("krb5kdc.log", "krb5kdc.log", unix.IN_CREATE, 0)
	wt.rotEvent("krb5kdc.log", "krb5kdc.log", unix.IN_MOVED_FROM, 9)
	wt.rotEvent("krb5kdc.log.1", "krb5kdc.log", unix.IN_MOVED_TO, 9)
	if err := os.Remove(path + ".1"); err != nil { // rotate 1: A goes
		t.Fatal(err)
	}
	wt.rotEvent("krb5kdc.log", "krb5kdc.log", unix.IN_CREATE, 0)
	wt.account()
	var got []string
	for _, f := range wt.take() {
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(b))
	}
	if strings.Join(got, "") != "B\nA\n" {
		t.Errorf("held %q, want B then A", got)
	}
	if n := wt.vanished.Load(); n != 0 {
		t.Errorf("unread %d, want 0", n)
	}
}

// TestMissedFilesWakeTheTailer: the watcher decides which files were
// missed after a batch of events, when the events' own wake-ups have been
// sent; a tailer that ran in between found nothing to count. Counting
// them wakes the tailer again, so the count does not wait for the next
// write or poll (TestRenameBurstWhileNotScheduled waited 15 s for it
// under load). A batch that misses nothing wakes no one.
func TestMissedFilesWakeTheTailer(t *testing.T) {
	wt := &watcher{rotate: make(chan struct{}, 1), counting: true}
	woken := func() bool {
		select {
		case <-wt.rotate:
			return true
		default:
			return false
		}
	}
	wt.creates, wt.opened, wt.credit = 6, 1, 1 // 4 files gone unopened
	wt.account()
	if n, w := wt.vanished.Load(), woken(); n != 4 || !w {
		t.Fatalf("4 files missed: vanished %d, tailer woken %v; want 4, true", n, w)
	}
	wt.account() // the same batch again: nothing new
	wt.opened++  // a creation whose file was opened
	wt.creates++
	wt.account()
	if n, w := wt.vanished.Load(), woken(); n != 4 || w {
		t.Errorf("nothing more missed: vanished %d, woken %v; want 4, false", n, w)
	}
}
