package journal

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/go-kit/log"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// Real journal files, not mocks: entries are written with
// systemd-journal-remote (it turns the journal export format into journal
// files) and read back by a real journalctl.

const journalRemote = "/lib/systemd/systemd-journal-remote"

func needJournal(t *testing.T) {
	t.Helper()
	for _, p := range []string{journalRemote, "journalctl"} {
		if _, err := exec.LookPath(p); err != nil {
			if testutil.InCI() {
				t.Fatalf("%s missing in CI: %v", p, err)
			}
			t.Skipf("%s not installed: %v", p, err)
		}
	}
}

type record struct {
	ident string
	pid   int
	msg   string
}

// writer appends entries to one journal file, with strictly increasing
// timestamps across calls.
type writer struct {
	t    *testing.T
	path string
	ts   int64
	boot string // _BOOT_ID of the entries written
}

func newWriter(t *testing.T, dir string) *writer {
	return &writer{t: t, path: filepath.Join(dir, "remote.journal"), ts: 1764556800000000, boot: "0123456789abcdef0123456789abcdef"}
}

func (w *writer) write(recs ...record) {
	w.t.Helper()
	var b bytes.Buffer
	for _, r := range recs {
		w.ts++
		fmt.Fprintf(&b, "__REALTIME_TIMESTAMP=%d\n_BOOT_ID=%s\nSYSLOG_IDENTIFIER=%s\n_COMM=%s\n_UID=0\n_PID=%d\nPRIORITY=6\nMESSAGE=%s\n\n",
			w.ts, w.boot, r.ident, r.ident, r.pid, r.msg)
	}
	w.append(&b)
}

// append writes entries in the journal export format to the file.
func (w *writer) append(export *bytes.Buffer) {
	w.t.Helper()
	cmd := exec.Command(journalRemote, "-o", w.path, "-")
	cmd.Stdin = export
	if out, err := cmd.CombinedOutput(); err != nil {
		w.t.Fatalf("systemd-journal-remote: %v\n%s", err, out)
	}
}

// writeMessage appends one entry whose message is any bytes, in the export
// format's binary form (little-endian size, then the data).
func (w *writer) writeMessage(ident string, msg []byte) {
	w.t.Helper()
	w.ts++
	var b bytes.Buffer
	fmt.Fprintf(&b, "__REALTIME_TIMESTAMP=%d\n_BOOT_ID=%s\nSYSLOG_IDENTIFIER=%s\n_COMM=%s\n_UID=0\n_PID=1\nMESSAGE\n", w.ts, w.boot, ident, ident)
	binary.Write(&b, binary.LittleEndian, uint64(len(msg)))
	b.Write(msg)
	b.WriteString("\n\n")
	w.append(&b)
}

// batch makes n entries; every third belongs to another program, which the
// follower must not hand on.
func batch(from, n int) (all, ours []record) {
	for i := from; i < from+n; i++ {
		r := record{ident: "krb5kdc", pid: 4000 + i%3, msg: fmt.Sprintf("AS_REQ line %d with \"quotes\" and \\ back", i)}
		switch i % 3 {
		case 1:
			r.ident = "kadmind"
		case 2:
			r.ident, r.msg = "sshd", fmt.Sprintf("Accepted publickey %d", i)
		}
		all = append(all, r)
		if r.ident != "sshd" {
			ours = append(ours, r)
		}
	}
	return all, ours
}

type memStore struct {
	mu sync.Mutex
	m  map[string]string
}

func (s *memStore) Cursor(k string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[k]
}

func (s *memStore) SetCursor(k, c string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[k] = c
}

type collect struct {
	mu  sync.Mutex
	got []record
}

func (c *collect) handle(e *Entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, record{string(e.Identifier), e.PID, string(e.Message)})
}

// waitLast waits until the last entry handed on is r.
func (c *collect) waitLast(t *testing.T, r record) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, "the entry "+r.msg, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.got) > 0 && c.got[len(c.got)-1] == r
	})
}

func (c *collect) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.got)
}

type running struct {
	f      *Follower
	stats  *Stats
	cancel context.CancelFunc
	done   chan struct{}
}

func start(t *testing.T, opts Options, store CursorStore, c *collect) *running {
	t.Helper()
	return startLogger(t, opts, store, c, testutil.Logger(t))
}

func startLogger(t *testing.T, opts Options, store CursorStore, c *collect, logger log.Logger) *running {
	t.Helper()
	stats := &Stats{}
	f, err := New(opts, "journal:test", logger, store, stats, c.handle)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{f: f, stats: stats, cancel: cancel, done: make(chan struct{})}
	go func() { defer close(r.done); f.Run(ctx) }()
	t.Cleanup(r.stop)
	return r
}

func (r *running) stop() {
	r.cancel()
	<-r.done
}

// Every entry of ours is handed on exactly once, in order, across appends
// while running and while stopped, and restarts that resume at the cursor.
func TestFollowExactlyOnceAcrossRestarts(t *testing.T) {
	needJournal(t)
	dir := t.TempDir()
	w := newWriter(t, dir)
	store := &memStore{m: map[string]string{}}
	c := &collect{}
	opts := Options{Programs: []string{"krb5kdc", "kadmind"}, Directory: dir, FromBeginning: true}
	var want []record
	add := func(from, n int) {
		all, ours := batch(from, n)
		w.write(all...)
		want = append(want, ours...)
	}
	add(0, 30) // before the first start: read from the beginning
	r := start(t, opts, store, c)
	testutil.Eventually(t, 30*time.Second, "the first entries", func() bool { return c.n() == len(want) })
	for round := 0; round < 3; round++ {
		add(1000*(round+1), 25) // while running
		testutil.Eventually(t, 30*time.Second, "entries appended while running", func() bool { return c.n() == len(want) })
		r.stop()
		add(1000*(round+1)+500, 25) // while stopped
		r = start(t, opts, store, c)
		testutil.Eventually(t, 30*time.Second, "entries appended while stopped", func() bool { return c.n() == len(want) })
	}
	if got := r.stats.CursorLost.Load(); got != 0 {
		t.Errorf("cursor lost %d times", got)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.got) != len(want) {
		t.Fatalf("got %d entries, want %d", len(c.got), len(want))
	}
	for i := range want {
		if c.got[i] != want[i] {
			t.Fatalf("entry %d: got %+v, want %+v", i, c.got[i], want[i])
		}
	}
}

// A reboot between stop and start: the entries of boot A written after the
// cursor, then boot B's, are each handed on once, and a cursor the journal
// still holds is not called lost; the same when boot B's entries are in a
// file of their own in the directory (copies, remote journals).
// journalctl --follow alone reads only the newest boot.
func TestFollowAcrossReboot(t *testing.T) {
	needJournal(t)
	for _, newFile := range []bool{false, true} {
		t.Run(fmt.Sprintf("boot B in a new file %v", newFile), func(t *testing.T) {
			dir := t.TempDir()
			w := newWriter(t, dir)
			w.boot = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
			store := &memStore{m: map[string]string{}}
			c := &collect{}
			var logged bytes.Buffer
			var logMu sync.Mutex
			logger := log.LoggerFunc(func(kv ...any) error {
				logMu.Lock()
				defer logMu.Unlock()
				fmt.Fprintln(&logged, kv...)
				t.Log(kv...)
				return nil
			})
			opts := Options{Programs: []string{"krb5kdc", "kadmind"}, Directory: dir, FromBeginning: true}
			var want []record
			add := func(w *writer, from, n int) {
				all, ours := batch(from, n)
				w.write(all...)
				want = append(want, ours...)
			}
			add(w, 0, 12) // boot A, read
			r := startLogger(t, opts, store, c, logger)
			testutil.Eventually(t, 30*time.Second, "boot A's entries", func() bool { return c.n() == len(want) })
			r.stop()
			add(w, 100, 9) // boot A after the cursor, while stopped
			wb := *w
			wb.boot = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
			if newFile {
				wb.path = filepath.Join(dir, "remote-boot-b.journal")
			}
			add(&wb, 200, 9) // boot B before the start
			r = startLogger(t, opts, store, c, logger)
			add(&wb, 300, 6) // boot B while running
			c.waitLast(t, want[len(want)-1])
			r.stop()
			c.mu.Lock()
			got := c.got
			c.mu.Unlock()
			if !slices.Equal(got, want) {
				t.Errorf("got %d entries, want %d:\ngot  %v\nwant %v", len(got), len(want), got, want)
			}
			if n := r.stats.CursorLost.Load(); n != 0 {
				t.Errorf("cursor lost counted %d times", n)
			}
			logMu.Lock()
			defer logMu.Unlock()
			if strings.Contains(logged.String(), "no longer holds") {
				t.Errorf("a cursor the journal holds was called lost:\n%s", logged.String())
			}
		})
	}
}

// An entry over 16 MiB (journalctl used to write it whole, and the reader
// gave up on it silently while journalctl ran on) costs its length and
// stops nothing: the entries after it are read by the same journalctl.
// Written by journalctl with --all, as before, such an entry is skipped
// and counted; without --all, as now, journalctl writes its message as
// null and the entry is read like any other.
func TestOversizedEntry(t *testing.T) {
	needJournal(t)
	dir := t.TempDir()
	w := newWriter(t, dir)
	before, oursBefore := batch(0, 6)
	w.write(before...)
	w.writeMessage("krb5kdc", bytes.Repeat([]byte{200}, 9<<19)) // not UTF-8: 18 MiB of "200," in JSON
	after, oursAfter := batch(10, 6)
	w.write(after...)
	c := &collect{}
	r := start(t, Options{Programs: []string{"krb5kdc", "kadmind"}, Directory: dir, FromBeginning: true}, nil, c)
	c.waitLast(t, oursAfter[len(oursAfter)-1])
	if got, want := c.n(), len(oursBefore)+1+len(oursAfter); got != want {
		t.Errorf("%d entries handed on, want %d", got, want)
	}
	if !r.stats.Running.Load() || r.stats.Exits.Load() != 0 || r.stats.ReadErrors.Load() != 0 {
		t.Errorf("running %v, exits %d, read errors %d: want one journalctl running all along",
			r.stats.Running.Load(), r.stats.Exits.Load(), r.stats.ReadErrors.Load())
	}
	r.stop()

	// The same journal as journalctl --all writes it: the big entry's
	// line is 18 MiB.
	out, err := exec.Command("journalctl", "--directory="+dir, "--output=json", "--all",
		"--output-fields="+outputFields, "SYSLOG_IDENTIFIER=krb5kdc", "SYSLOG_IDENTIFIER=kadmind").Output()
	if err != nil {
		t.Fatal(err)
	}
	c2 := &collect{}
	stats := &Stats{}
	f, err := New(Options{Programs: []string{"krb5kdc", "kadmind"}, Coalesce: -1}, "journal:test", testutil.Logger(t), nil, stats, c2.handle)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.read(iotest.HalfReader(bytes.NewReader(out))); err != nil {
		t.Fatalf("read: %v", err)
	}
	if got, want := c2.n(), len(oursBefore)+len(oursAfter); got != want || stats.Oversized.Load() != 1 || stats.Malformed.Load() != 0 {
		t.Errorf("%d entries, %d oversized, %d malformed: want %d, 1, 0", got, stats.Oversized.Load(), stats.Malformed.Load(), want)
	}
}

// Without a saved cursor and without FromBeginning, only new entries count.
func TestFollowFromEnd(t *testing.T) {
	needJournal(t)
	dir := t.TempDir()
	w := newWriter(t, dir)
	all, _ := batch(0, 9)
	w.write(all...)
	c := &collect{}
	r := start(t, Options{Programs: []string{"krb5kdc"}, Directory: dir}, &memStore{m: map[string]string{}}, c)
	testutil.Eventually(t, 30*time.Second, "journalctl to run", func() bool { return r.stats.Running.Load() })
	// journalctl --lines=0 may still be seeking to the end: wait until a
	// marker entry written now is seen, then nothing older than it may be.
	testutil.Eventually(t, 30*time.Second, "a new entry", func() bool {
		if c.n() > 0 {
			return true
		}
		w.write(record{"krb5kdc", 1, "marker"})
		time.Sleep(100 * time.Millisecond)
		return c.n() > 0
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, g := range c.got {
		if g.msg != "marker" {
			t.Fatalf("an old entry was read: %+v", g)
		}
	}
}

// A cursor the journal no longer holds (the file rotated away while we
// were stopped) is counted and logged, and reading resumes at the oldest
// entry left.
func TestCursorLost(t *testing.T) {
	needJournal(t)
	dir := t.TempDir()
	w := newWriter(t, dir)
	store := &memStore{m: map[string]string{}}
	c := &collect{}
	opts := Options{Programs: []string{"krb5kdc", "kadmind"}, Directory: dir, FromBeginning: true}
	all, ours := batch(0, 12)
	w.write(all...)
	r := start(t, opts, store, c)
	testutil.Eventually(t, 30*time.Second, "the entries", func() bool { return c.n() == len(ours) })
	r.stop()
	// The journal is vacuumed: the file goes, a new one starts.
	if err := os.Remove(w.path); err != nil {
		t.Fatal(err)
	}
	// Its entries are newer than the lost cursor's, as after a vacuum.
	w2 := *w
	w2.path = filepath.Join(dir, "remote2.journal")
	all2, ours2 := batch(100, 6)
	w2.write(all2...)
	r = start(t, opts, store, c)
	testutil.Eventually(t, 30*time.Second, "the entries of the new file", func() bool { return c.n() == len(ours)+len(ours2) })
	if r.stats.CursorLost.Load() != 1 {
		t.Errorf("cursor lost counted %d times, want 1", r.stats.CursorLost.Load())
	}
}

// A journalctl that exits at once, or a journal directory that does not
// exist: no crash, the exits are counted, and shutdown is prompt.
func TestJournalctlFailures(t *testing.T) {
	needJournal(t)
	script := filepath.Join(t.TempDir(), "journalctl")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho 'broken on purpose' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, opts := range map[string]Options{
		"exits":       {Programs: []string{"krb5kdc"}, Journalctl: script, MaxBackoff: 50 * time.Millisecond},
		"no such dir": {Programs: []string{"krb5kdc"}, Directory: filepath.Join(t.TempDir(), "nonexistent"), MaxBackoff: 50 * time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			c := &collect{}
			r := start(t, opts, nil, c)
			testutil.Eventually(t, 30*time.Second, "journalctl to be started again", func() bool { return r.stats.Exits.Load() >= 2 })
			done := make(chan struct{})
			go func() { r.stop(); close(done) }()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return after cancel")
			}
			if c.n() != 0 {
				t.Errorf("%d entries from a broken source", c.n())
			}
		})
	}
}

func TestNewRejectsBadMatches(t *testing.T) {
	for _, o := range []Options{
		{},
		{Programs: []string{"krb5kdc=1"}},
		{Units: []string{"krb5-kdc.service"}}, // no program
		{Programs: []string{"krb5kdc"}, Units: []string{"a b"}},
		{Programs: []string{"+"}},
		{Programs: []string{"krb5kdc"}, Directory: "/d", Files: []string{"/f"}},
	} {
		if _, err := New(o, "k", nil, nil, &Stats{}, func(*Entry) {}); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

func TestCursorGap(t *testing.T) {
	for _, c := range []struct {
		from, to string
		n        uint64
		ok       bool
	}{
		{"s=abc;i=a;b=x", "s=abc;i=14;b=x", 9, true},
		{"s=abc;i=a", "s=def;i=14", 0, false},
		{"s=abc;i=a", "", 0, false},
		{"garbage", "s=abc;i=1", 0, false},
	} {
		n, ok := cursorGap(c.from, c.to)
		if n != c.n || ok != c.ok {
			t.Errorf("cursorGap(%q, %q) = %d, %v", c.from, c.to, n, ok)
		}
	}
	if !strings.Contains(lostText(3, true), "3") || lostText(0, false) != "unknown" {
		t.Error("lostText")
	}
}

// The system journal read with --merge is matched to this machine in
// every group, as journalctl's default (local journals only) would be.
func TestMatchesSystemJournal(t *testing.T) {
	f, err := New(Options{Programs: []string{"krb5kdc", "a-program-name-of-20"}, UIDs: []uint32{107}, Units: []string{"krb5-kdc.service"}}, "k", nil, nil, &Stats{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.machineID = "m"
	want := []string{
		"_MACHINE_ID=m", "_COMM=krb5kdc", "_COMM=a-program-name-", "_UID=0", "_UID=107", "_SYSTEMD_UNIT=krb5-kdc.service", "+",
		"_MACHINE_ID=m", "MESSAGE_ID=" + DroppedMessageID, "_TRANSPORT=driver", "_UID=0",
		"OBJECT_COMM=krb5kdc", "OBJECT_COMM=a-program-name-", "OBJECT_UID=0", "OBJECT_UID=107", "OBJECT_SYSTEMD_UNIT=krb5-kdc.service",
	}
	if got := f.matches(); !slices.Equal(got, want) {
		t.Errorf("matches:\ngot  %q\nwant %q", got, want)
	}
}

// The reader's own check of the trust rule, on what journalctl could hand
// it: only an entry whose _COMM, _UID and _SYSTEMD_UNIT are the KDC's is
// handed on, and only journald's suppression entries about a KDC process
// count. With fromKDC always true, or the driver entry's _UID unchecked, it
// fails (seen).
func TestReadTrustsOnlyTheKDCsFields(t *testing.T) {
	const unit = `"_SYSTEMD_UNIT":"krb5-kdc.service"`
	drop := `"MESSAGE_ID":"` + DroppedMessageID + `","_TRANSPORT":"driver","N_DROPPED":"7",`
	lines := []string{
		`{"__CURSOR":"c1","SYSLOG_IDENTIFIER":"krb5kdc","_COMM":"krb5kdc","_UID":"0",` + unit + `,"MESSAGE":"root's krb5kdc"}`,
		`{"__CURSOR":"c2","SYSLOG_IDENTIFIER":"krb5kdc","_COMM":"krb5kdc","_UID":"107",` + unit + `,"MESSAGE":"the KDC user's krb5kdc"}`,
		`{"__CURSOR":"c3","SYSLOG_IDENTIFIER":"krb5kdc","_COMM":"krb5kdc","_UID":"65534",` + unit + `,"MESSAGE":"nobody's krb5kdc"}`,
		`{"__CURSOR":"c4","SYSLOG_IDENTIFIER":"krb5kdc","_COMM":"logger","_UID":"0",` + unit + `,"MESSAGE":"root's logger -t krb5kdc"}`,
		`{"__CURSOR":"c5","SYSLOG_IDENTIFIER":"krb5kdc","_COMM":"krb5kdc","_UID":"0","_SYSTEMD_UNIT":"other.service","MESSAGE":"another unit's"}`,
		`{"__CURSOR":"c6","SYSLOG_IDENTIFIER":"krb5kdc","_COMM":"krb5kdc",` + unit + `,"MESSAGE":"no uid"}`,
		`{"__CURSOR":"c7","SYSLOG_IDENTIFIER":"krb5kdc","_UID":"0",` + unit + `,"MESSAGE":"no comm"}`,
		`{"__CURSOR":"c8",` + drop + `"_UID":"0","OBJECT_COMM":"krb5kdc","OBJECT_UID":"65534","OBJECT_SYSTEMD_UNIT":"krb5-kdc.service"}`,
		`{"__CURSOR":"c9",` + drop + `"_UID":"65534","OBJECT_COMM":"krb5kdc","OBJECT_UID":"0","OBJECT_SYSTEMD_UNIT":"krb5-kdc.service"}`,
		`{"__CURSOR":"c10",` + drop + `"_UID":"0","OBJECT_COMM":"krb5kdc","OBJECT_UID":"0","OBJECT_SYSTEMD_UNIT":"other.service"}`,
		`{"__CURSOR":"c11",` + drop + `"_UID":"0","OBJECT_COMM":"krb5kdc","OBJECT_UID":"107","OBJECT_SYSTEMD_UNIT":"krb5-kdc.service"}`,
	}
	c := &collect{}
	stats := &Stats{}
	store := &memStore{m: map[string]string{}}
	f, err := New(Options{Programs: []string{"krb5kdc"}, UIDs: []uint32{107}, Units: []string{"krb5-kdc.service"}, Coalesce: -1}, "k", testutil.Logger(t), store, stats, c.handle)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.read(strings.NewReader(strings.Join(lines, "\n") + "\n")); err != nil {
		t.Fatal(err)
	}
	want := []record{{"krb5kdc", 0, "root's krb5kdc"}, {"krb5kdc", 0, "the KDC user's krb5kdc"}}
	if !slices.Equal(c.got, want) {
		t.Errorf("handed on %v, want %v", c.got, want)
	}
	if got := stats.Suppressed.Load(); got != 7 {
		t.Errorf("%d suppressed lines counted, want the 7 of the one entry about the KDC", got)
	}
	if got := store.Cursor("k"); got != "c11" {
		t.Errorf("cursor %q, want the last entry's (skipped entries are read past)", got)
	}
}

// exportEntry is one entry of ours in the journal export format, at the
// given realtime and monotonic timestamps (µs) of boot.
func exportEntry(b *bytes.Buffer, boot string, realtime, monotonic int64, msg string) {
	fmt.Fprintf(b, "__REALTIME_TIMESTAMP=%d\n__MONOTONIC_TIMESTAMP=%d\n_BOOT_ID=%s\nSYSLOG_IDENTIFIER=krb5kdc\n_COMM=krb5kdc\n_UID=0\n_PID=7\nMESSAGE=%s\n\n",
		realtime, monotonic, boot, msg)
}

// The saved cursor's file is vacuumed away, and the file left holds
// entries of the same boot whose monotonic clock overlaps the lost
// entry's: journalctl --cursor starts at one written at an earlier
// realtime (seen: it seeks by boot and monotonic time). Entries at or
// before the lost cursor's realtime were read before the stop and are not
// handed on again; the one after it is. On the old fallback the two
// earlier ones are handed on a second time (seen).
func TestCursorLostNeverRereads(t *testing.T) {
	needJournal(t)
	dir := t.TempDir()
	w := newWriter(t, dir)
	const rt = 1764556800000000
	var b bytes.Buffer
	for i := 1; i <= 3; i++ {
		exportEntry(&b, w.boot, rt+int64(i), 100*int64(i), fmt.Sprintf("AS_REQ e%d", i))
	}
	w.append(&b)
	store := &memStore{m: map[string]string{}}
	c := &collect{}
	opts := Options{Programs: []string{"krb5kdc"}, Directory: dir, FromBeginning: true}
	r := start(t, opts, store, c)
	c.waitLast(t, record{"krb5kdc", 7, "AS_REQ e3"})
	r.stop()

	w2 := *w
	w2.path = filepath.Join(dir, "remote2.journal")
	b.Reset()
	exportEntry(&b, w.boot, rt+1, 350, "AS_REQ e1 again") // at e1's time
	exportEntry(&b, w.boot, rt+3, 360, "AS_REQ e3 again") // at the cursor's
	exportEntry(&b, w.boot, rt+4, 400, "AS_REQ e4")
	w2.append(&b)
	if err := os.Remove(w.path); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("journalctl", "--directory="+dir, "--cursor="+store.Cursor("journal:test"), "--output=cat", "--lines=1").Output()
	if err != nil || strings.TrimSpace(string(out)) != "AS_REQ e1 again" {
		t.Fatalf("journalctl --cursor at the lost entry starts at %q (%v): the case is not made", out, err)
	}
	r = start(t, opts, store, c)
	c.waitLast(t, record{"krb5kdc", 7, "AS_REQ e4"})
	r.stop()
	want := []record{{"krb5kdc", 7, "AS_REQ e1"}, {"krb5kdc", 7, "AS_REQ e2"}, {"krb5kdc", 7, "AS_REQ e3"}, {"krb5kdc", 7, "AS_REQ e4"}}
	if !slices.Equal(c.got, want) {
		t.Errorf("handed on %v, want %v", c.got, want)
	}
	if r.stats.CursorLost.Load() != 1 {
		t.Errorf("cursor lost counted %d times, want 1", r.stats.CursorLost.Load())
	}
}

// A lost cursor's position covers what was written no later by the wall
// clock, and, in its boot, no later by the monotonic clock.
func TestPositionCovers(t *testing.T) {
	p := positionOf("s=abc;i=3;b=b1;m=12c;t=644dae5400003;x=9")
	if !p.set || p.boot != "b1" || p.monotonic != 300 || p.real != 0x644dae5400003 {
		t.Fatalf("position %+v", p)
	}
	for _, c := range []struct {
		real, mono uint64
		boot       string
		covered    bool
	}{
		{p.real, 999, "b2", true},
		{p.real - 1, 999, "b2", true},
		{p.real + 1, 999, "b1", false},
		{p.real + 1, 300, "b1", true},
		{p.real + 1, 299, "b2", false},
		{0, 0, "b1", false},
	} {
		j := jsonEntry{realtime: c.real, monotonic: c.mono, boot: []byte(c.boot)}
		if got := p.covers(&j); got != c.covered {
			t.Errorf("%+v: covered %v", c, got)
		}
	}
	if g := positionOf("garbage"); g.covers(&jsonEntry{realtime: 1}) {
		t.Error("a cursor without a position covers an entry")
	}
}
