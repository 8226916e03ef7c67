package tailer

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// recorder records every line handed on, so a test can check that each line
// written arrived exactly once.
type recorder struct {
	mu    sync.Mutex
	lines []string
	cut   int
}

func (s *recorder) handle(line []byte, truncated bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if truncated {
		s.cut++
		return
	}
	s.lines = append(s.lines, string(line))
}

func (s *recorder) snapshot() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.lines...)
}

func (s *recorder) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.lines)
}

// run is one tailer "process": its own position store loaded from disk.
type run struct {
	cancel context.CancelFunc
	done   chan struct{}
	store  *Positions
	stats  *Stats
	tl     *Tailer
}

type harness struct {
	t        *testing.T
	dir      string
	path     string
	posFile  string
	opts     Options
	recorder *recorder
	cur      *run
	logs     *testutil.LockedBuffer // the tailers' log lines, shown when the test fails
}

func newHarness(t *testing.T) *harness {
	dir := t.TempDir()
	logs := &testutil.LockedBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the tailers' log:\n%s", logs)
		}
	})
	return &harness{
		logs:    logs,
		t:       t,
		dir:     dir,
		path:    filepath.Join(dir, "krb5kdc.log"),
		posFile: filepath.Join(dir, "positions.json"),
		opts: Options{
			PollInterval: 20 * time.Millisecond,
			MinInterval:  2 * time.Millisecond,
			RotateWait:   400 * time.Millisecond,
		},
		recorder: &recorder{},
	}
}

// start starts a tailer as a freshly started exporter would and returns
// after its first cycle.
func (h *harness) start() {
	h.t.Helper()
	store, err := OpenPositions(h.posFile, log.NewNopLogger())
	if err != nil {
		h.t.Fatal(err)
	}
	fmt.Fprintf(h.logs, "TEST start %s\n", time.Now().UTC().Format(time.RFC3339Nano))
	ctx, cancel := context.WithCancel(context.Background())
	r := &run{cancel: cancel, done: make(chan struct{}), store: store, stats: &Stats{}}
	opts := h.opts
	opts.Path = h.path
	h.batch(&opts)
	logger := log.With(log.NewLogfmtLogger(h.logs), "t", log.DefaultTimestampUTC, "run", fmt.Sprintf("%p", r))
	tl := New(opts, logger, store, r.stats, h.recorder.handle)
	r.tl = tl
	go func() {
		defer close(r.done)
		tl.Run(ctx)
	}()
	h.cur = r
	// Wait until the tailer has opened the file (or found it missing), so
	// that what a test writes next is new to it.
	select {
	case <-tl.cycled:
	case <-r.done:
	case <-time.After(15 * time.Second):
		h.t.Fatal("the tailer did not complete its first cycle")
	}
}

// stop stops it cleanly and writes the position file, as the manager does.
func (h *harness) stop() {
	h.t.Helper()
	fmt.Fprintf(h.logs, "TEST stop %s\n", time.Now().UTC().Format(time.RFC3339Nano))
	h.cur.cancel()
	<-h.cur.done
	if err := h.cur.store.Flush(); err != nil {
		h.t.Fatal(err)
	}
	h.cur.store.Close()
}

// never is a cycle's stop function for a tailer a test steps by hand.
func never() bool { return false }

// stepped returns a tailer the test drives cycle by cycle (no goroutine,
// no inotify unless setup adds a watcher), restored and read once. Its
// log goes to the harness's.
func (h *harness) stepped(setup func(*Tailer)) *Tailer {
	h.t.Helper()
	store, err := OpenPositions("", log.NewNopLogger())
	if err != nil {
		h.t.Fatal(err)
	}
	opts := Options{Path: h.path, FromBeginning: true, NoInotify: true}
	h.batch(&opts)
	tl := New(opts, log.NewLogfmtLogger(h.logs), store, &Stats{}, h.recorder.handle)
	if setup != nil {
		setup(tl)
	}
	tl.restore()
	tl.cycle(never)
	h.t.Cleanup(tl.closeAll)
	return tl
}

// batched makes the harness's tailers hand on whole lines through
// Options.Lines (TestLinesHandler), split here with a method of the test's
// own; the recorder still gets the cut lines through the LineHandler.
var batched bool

func (h *harness) batch(opts *Options) {
	if !batched {
		return
	}
	opts.Lines = func(buf []byte) uint64 {
		lines := strings.SplitAfter(string(buf), "\n")
		if last := lines[len(lines)-1]; last != "" {
			h.t.Errorf("Lines handed on a part of a line: %q", last)
		}
		for _, l := range lines[:len(lines)-1] {
			h.recorder.handle([]byte(strings.TrimSuffix(l, "\n")), false)
		}
		return uint64(len(lines) - 1)
	}
}

// TestLinesHandler runs the exactness tests again with the lines of each
// read handed on at once (Options.Lines, as the log collector does): every
// line exactly once, across rotations, restarts, cut lines.
func TestLinesHandler(t *testing.T) {
	batched = true
	defer func() { batched = false }()
	for _, tc := range []struct {
		name string
		f    func(*testing.T)
	}{
		{"LongLine", TestLongLine},
		{"Rotations", TestRotations},
		{"Restarts", TestRestarts},
		{"RestartMidLine", TestRestartMidLine},
		{"TruncatedToSameSize", TestTruncatedToSameSize},
	} {
		t.Run(tc.name, tc.f)
	}
}

func (h *harness) waitLines(n int) {
	h.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for h.recorder.count() < n {
		if time.Now().After(deadline) {
			h.t.Fatalf("got %d lines, want %d (missing %s)", h.recorder.count(), n, h.missing(n))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func checkExact(t *testing.T, got []string, want []string) {
	t.Helper()
	seen := map[string]int{}
	for _, l := range got {
		seen[l]++
	}
	for _, l := range want {
		if seen[l] != 1 {
			t.Errorf("line %q handed on %d times", l, seen[l])
		}
		delete(seen, l)
	}
	for l, n := range seen {
		t.Errorf("unexpected line %q (%d times)", l, n)
	}
}

func TestStartAtEndAndPartialLine(t *testing.T) {
	h := newHarness(t)
	appendFile(t, h.path, "old 1\nold 2\npartial-at-start")
	h.start()
	defer h.stop()
	appendFile(t, h.path, " rest\nnew 1\nnew ")
	h.waitLines(1)
	time.Sleep(60 * time.Millisecond) // several polls: "new " must wait for its newline
	if got := h.recorder.snapshot(); len(got) != 1 || got[0] != "new 1" {
		t.Fatalf("lines %q, want [new 1]", got)
	}
	appendFile(t, h.path, "2\n")
	h.waitLines(2)
	checkExact(t, h.recorder.snapshot(), []string{"new 1", "new 2"})
}

func TestFromBeginningAndLateFile(t *testing.T) {
	h := newHarness(t)
	h.opts.FromBeginning = true
	appendFile(t, h.path, "a\nb\n")
	h.start()
	h.waitLines(2)
	h.stop()
	checkExact(t, h.recorder.snapshot(), []string{"a", "b"})

	// A file that appears after the start is read from its beginning even
	// with the default start at the end.
	h2 := newHarness(t)
	h2.start()
	defer h2.stop()
	appendFile(t, h2.path, "x\ny\n")
	h2.waitLines(2)
	checkExact(t, h2.recorder.snapshot(), []string{"x", "y"})
	if !h2.cur.stats.Open.Load() {
		t.Error("file_open gauge is 0")
	}
}

func TestLongLine(t *testing.T) {
	h := newHarness(t)
	h.opts.MaxLineBytes = 100
	h.opts.BufferBytes = 256
	h.start()
	defer h.stop()
	appendFile(t, h.path, "short\n"+strings.Repeat("x", 1000)+"\nafter\n")
	h.waitLines(2)
	time.Sleep(50 * time.Millisecond)
	checkExact(t, h.recorder.snapshot(), []string{"short", "after"})
	h.recorder.mu.Lock()
	cut := h.recorder.cut
	h.recorder.mu.Unlock()
	if cut != 1 {
		t.Errorf("over-long line handed on %d times, want once (cut)", cut)
	}
}

// TestRotations rotates the file once with every method while the tailer
// runs and checks that every line arrived exactly once.
func TestRotations(t *testing.T) {
	h := newHarness(t)
	h.opts.FromBeginning = true
	var want []string
	w := func(s string) {
		appendFile(t, h.path, s+"\n")
		want = append(want, s)
	}
	h.opts.RotateWait = 5 * time.Second // the test waits for its lines, not for the wait
	w("first")
	began := time.Now()
	h.start()
	defer h.stop()
	h.waitLines(1)

	// rename + a few more lines to the renamed file (the daemon has not
	// reopened yet) + a new file.
	f, err := os.OpenFile(h.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(h.path, h.path+".1"); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, "to renamed")
	want = append(want, "to renamed")
	w("in new file")
	time.Sleep(60 * time.Millisecond)
	fmt.Fprintln(f, "late to renamed")
	want = append(want, "late to renamed")
	f.Close()
	h.waitLines(len(want))

	// copytruncate.
	w("before copy")
	h.waitLines(len(want))
	w("copied, unread")
	data, _ := os.ReadFile(h.path)
	os.WriteFile(h.path+".2", data, 0o644)
	os.Truncate(h.path, 0)
	w("after truncate")
	h.waitLines(len(want))

	// delete, write to the deleted file, create again later.
	f, _ = os.OpenFile(h.path, os.O_WRONLY|os.O_APPEND, 0)
	os.Remove(h.path)
	fmt.Fprintln(f, "to deleted")
	want = append(want, "to deleted")
	time.Sleep(100 * time.Millisecond)
	fmt.Fprintln(f, "to deleted 2")
	want = append(want, "to deleted 2")
	f.Close()
	time.Sleep(100 * time.Millisecond)
	w("recreated")
	h.waitLines(len(want))
	time.Sleep(100 * time.Millisecond)
	checkExact(t, h.recorder.snapshot(), want)

	st := h.cur.stats
	for k, n := range map[int]uint64{RotationRename: 1, RotationTruncate: 1, RotationDelete: 1} {
		if got := st.Rotations[k].Load(); got != n {
			t.Errorf("%s rotations: %d, want %d", RotationNames[k], got, n)
		}
	}
	if st.CopyFound.Load() != 1 {
		t.Errorf("copy of the truncated file not read")
	}
	// The status page's last rotation: the deletion, seen during the test.
	if last := time.Unix(0, st.LastRotation.Load()); last.Before(began) || last.After(time.Now()) || RotationNames[st.LastRotationKind.Load()] != "delete" {
		t.Errorf("last rotation %v (%s), want the deletion, after %v", last, RotationNames[st.LastRotationKind.Load()], began)
	}
}

// TestRestarts stops the tailer, changes the file in every way while it is
// stopped, and checks that the next run reads on exactly.
func TestRestarts(t *testing.T) {
	h := newHarness(t)
	var want []string
	w := func(s string) {
		appendFile(t, h.path, s+"\n")
		want = append(want, s)
	}
	appendFile(t, h.path, "before start\n")
	h.start()
	w("one")
	h.waitLines(1)
	h.stop()

	steps := []struct {
		name     string
		mismatch int // -1: none
		change   func(i int)
	}{
		{"plain", -1, func(i int) { w("while down " + strconv.Itoa(i)) }},
		{"partial", -1, func(i int) { appendFile(t, h.path, "half ") }},
		{"finish", -1, func(i int) { appendFile(t, h.path, "done\n"); want = append(want, "half done") }},
		{"rename", MismatchRotatedRecovered, func(i int) {
			w("before rename " + strconv.Itoa(i))
			os.Rename(h.path, h.path+"."+strconv.Itoa(i))
			w("new file " + strconv.Itoa(i))
		}},
		{"copytruncate", MismatchTruncated, func(i int) {
			w("before copy " + strconv.Itoa(i))
			data, _ := os.ReadFile(h.path)
			os.WriteFile(h.path+"."+strconv.Itoa(i), data, 0o644)
			os.Truncate(h.path, 0)
			w("after truncate " + strconv.Itoa(i))
		}},
		{"copytruncate and grow", MismatchRewritten, func(i int) {
			w("before copy " + strconv.Itoa(i))
			data, _ := os.ReadFile(h.path)
			os.WriteFile(h.path+"."+strconv.Itoa(i), data, 0o644)
			os.Truncate(h.path, 0)
			for j := range 20 {
				w(fmt.Sprintf("after truncate %d, a longer line than before to grow past the old size %d", i, j))
			}
		}},
		{"deleted, absent", -1, func(i int) { os.Remove(h.path) }},
		{"created while down", -1, func(i int) { w("created " + strconv.Itoa(i)) }},
	}
	for i, s := range steps {
		s.change(i)
		h.start()
		h.waitLines(len(want))
		time.Sleep(40 * time.Millisecond) // nothing more may arrive
		checkExact(t, h.recorder.snapshot(), want)
		if s.mismatch >= 0 && h.cur.stats.Mismatches[s.mismatch].Load() != 1 {
			t.Errorf("%s: %s mismatch not reported", s.name, MismatchNames[s.mismatch])
		}
		if s.name == "copytruncate" && h.cur.stats.CopyFound.Load() != 1 {
			t.Errorf("%s: copy not read", s.name)
		}
		if s.name != "partial" { // would finish the half line
			w("after restart " + strconv.Itoa(i))
			h.waitLines(len(want))
		}
		h.stop()
	}
	checkExact(t, h.recorder.snapshot(), want)
}

// TestRestartMidLine: the file ends mid-line at each stop, the part
// read together with whole lines before it (so that those lines move the
// saved offset), and the line is completed after the restart: the whole
// line is handed on once and its first part never alone. TestRestarts'
// partial step writes its half line alone, which moves no offset; the
// saved offset set past the partial part (fl.off = fl.readOff) passed it.
func TestRestartMidLine(t *testing.T) {
	h := newHarness(t)
	appendFile(t, h.path, "before start\n")
	var want []string
	for i, parts := range [][]string{
		{"whole 0\nhalf ", "done 0\n"},
		{"whole 1\nfirst ", "second ", "third 1\n"}, // two restarts within the line
		{"whole 2\nwhole 3\nhalf ", "done 2\nwhole 4\n"},
	} {
		h.start()
		for j, p := range parts {
			if j > 0 {
				h.stop()
				appendFile(t, h.path, p)
				h.start()
			} else {
				appendFile(t, h.path, p) // one write: one read of whole lines and a part
			}
			whole := strings.Count(strings.Join(parts[:j+1], ""), "\n")
			h.waitLines(len(want) + whole)
			time.Sleep(40 * time.Millisecond) // nothing more may arrive
		}
		h.stop()
		want = append(want, strings.Split(strings.TrimSuffix(strings.Join(parts, ""), "\n"), "\n")...)
		checkExact(t, h.recorder.snapshot(), want)
		if t.Failed() {
			t.Fatalf("round %d", i)
		}
	}
}

func TestPollingOnly(t *testing.T) {
	h := newHarness(t)
	h.opts.NoInotify = true
	h.start()
	defer h.stop()
	appendFile(t, h.path, "polled\n")
	h.waitLines(1)
	if h.cur.stats.Inotify.Load() {
		t.Error("inotify gauge set with NoInotify")
	}
}

// TestUnwatchableDirectory follows a file in a directory inotify may not
// watch (no read permission): polling must still find every line. root
// reads every directory, so as root the test runs as nobody, in a copy of
// the test binary.
func TestUnwatchableDirectory(t *testing.T) {
	if os.Geteuid() == 0 {
		runAsNobody(t, "TestUnwatchableDirectory")
		return
	}
	h := newHarness(t)
	sub := filepath.Join(h.dir, "locked")
	os.Mkdir(sub, 0o755)
	h.path = filepath.Join(sub, "krb5kdc.log")
	appendFile(t, h.path, "")
	os.Chmod(sub, 0o311) // search but no read: inotify_add_watch fails
	defer os.Chmod(sub, 0o755)
	h.start()
	defer h.stop()
	if h.cur.stats.Inotify.Load() {
		t.Fatal("inotify claims to watch a directory it may not read")
	}
	appendFile(t, h.path, "found by polling\n")
	h.waitLines(1)
}

// runAsNobody runs one test of this package as the user nobody, in a copy
// of the test binary nobody may execute, and fails if it fails.
func runAsNobody(t *testing.T, test string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "tailer-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "tailer.test")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^"+test+"$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+test) {
		t.Fatalf("%s as nobody: %v\n%s", test, err, out)
	}
}

// countingLogger counts log lines.
type countingLogger struct {
	mu sync.Mutex
	n  int
}

func (l *countingLogger) Log(...any) error {
	l.mu.Lock()
	l.n++
	l.mu.Unlock()
	return nil
}

// wantOnce fails the test unless exactly one line was logged.
func (l *countingLogger) wantOnce(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	n := l.n
	l.mu.Unlock()
	if n != 1 {
		t.Errorf("logged %d times, want once", n)
	}
}

// TestUnreadablePath: a path that cannot be read (here a directory) is an
// error counted at every check but logged once, and the tailer carries on
// and follows the file once it is one.
func TestUnreadablePath(t *testing.T) {
	h := newHarness(t)
	os.Mkdir(h.path, 0o755)
	logger := &countingLogger{}
	store, _ := OpenPositions("", logger)
	stats := &Stats{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	tl := New(Options{Path: h.path, PollInterval: 10 * time.Millisecond}, logger, store, stats, h.recorder.handle)
	go func() { defer close(done); tl.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for stats.ReadErrors.Load() < 5 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if stats.ReadErrors.Load() < 5 {
		t.Fatalf("read errors: %d", stats.ReadErrors.Load())
	}
	logger.wantOnce(t)
	os.Remove(h.path)
	appendFile(t, h.path, "now a file\n")
	h.waitLines(1)
	cancel()
	<-done
}

// TestTruncatedToSameSize: after copytruncate the daemon may write exactly
// as many bytes as the file held before (KDC lines of one login are the
// same length as the previous login's). Nothing new lies beyond the old
// offset, yet every line is new.
func TestTruncatedToSameSize(t *testing.T) {
	h := newHarness(t)
	h.opts.FromBeginning = true
	appendFile(t, h.path, "login user0005 line 1\nlogin user0005 line 2\n")
	h.start()
	defer h.stop()
	h.waitLines(2)

	data, _ := os.ReadFile(h.path)
	os.WriteFile(h.path+".1", data, 0o644)
	os.Truncate(h.path, 0)
	appendFile(t, h.path, "login user0006 line 1\nlogin user0006 line 2\n")
	h.waitLines(4)
	time.Sleep(100 * time.Millisecond)
	checkExact(t, h.recorder.snapshot(), []string{
		"login user0005 line 1", "login user0005 line 2", "login user0006 line 1", "login user0006 line 2",
	})
	if got := h.cur.stats.Rotations[RotationTruncate].Load(); got != 1 {
		t.Errorf("truncations seen: %d, want 1", got)
	}
}

// TestFIFOAtPath: a FIFO at the log's path (nobody writes to it, so a
// blocking open waits for ever) is a read error counted at every check and
// logged once; the tailer is ready at once, follows the file that replaces
// the FIFO, and a FIFO put at the path after start neither hangs it nor
// its stop (issue 26 item 5: the watcher's blocking open of the path hung
// the start-up, the serving for 10 s, and SIGTERM).
func TestFIFOAtPath(t *testing.T) {
	h := newHarness(t)
	if err := syscall.Mkfifo(h.path, 0o600); err != nil {
		t.Fatal(err)
	}
	logger := &countingLogger{}
	store, _ := OpenPositions("", logger)
	stats := &Stats{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	tl := New(Options{Path: h.path, PollInterval: 10 * time.Millisecond, FromBeginning: true, RotateWait: time.Hour}, logger, store, stats, h.recorder.handle)
	go func() { defer close(done); tl.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("the tailer did not stop within 5 s")
		}
	}()
	select {
	case <-tl.Ready():
	case <-time.After(5 * time.Second):
		t.Fatal("not ready after 5 s with a FIFO at the path")
	}
	testutil.Eventually(t, 10*time.Second, "read errors counted", func() bool { return stats.ReadErrors.Load() >= 3 })
	logger.wantOnce(t)
	os.Remove(h.path)
	appendFile(t, h.path, "one\n")
	h.waitLines(1)

	// Rotated away, a FIFO in its place: the old file is still read.
	if err := os.Rename(h.path, h.path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(h.path, 0o600); err != nil {
		t.Fatal(err)
	}
	before := stats.ReadErrors.Load()
	testutil.Eventually(t, 10*time.Second, "read errors counted again", func() bool { return stats.ReadErrors.Load() > before })
	appendFile(t, h.path+".1", "two\n")
	h.waitLines(2)
}
