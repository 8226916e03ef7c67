package collector

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"

	"github.com/krb5-exporter/krb5-exporter/internal/kdcproc"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// TestFileCacheExitedProcess: a /proc file kept open reads the process it
// was opened for; once that process has exited and been reaped, the read
// fails as "gone" (never stale content), and the file is closed.
func TestFileCacheExitedProcess(t *testing.T) {
	// A raw fork and exec: os/exec would hold a pidfd, which changes the
	// number of open files counted below.
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	pid, err := syscall.ForkExec(sleep, []string{"sleep", "60"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	reap := reaper(pid)
	defer reap()
	path := "/proc/" + strconv.Itoa(pid) + "/stat"
	c := newFileCache()
	openFDs := func() int {
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(entries)
	}
	fds0 := openFDs()
	for i := 0; i < 3; i++ { // the second and third reads use the open file
		b, err := c.readSingle(path)
		if err != nil {
			t.Fatal(err)
		}
		st, err := parseStat(b)
		if err != nil || st.Comm != "sleep" {
			t.Fatalf("read %d: %+v, %v", i, st, err)
		}
		c.sweep()
	}
	if n := openFDs(); n != fds0+1 || len(c.files) != 1 {
		t.Errorf("%d files cached, %d more fds open; want the one file kept open", len(c.files), n-fds0)
	}
	reap()
	b, err := c.readSingle(path)
	if !gone(err) {
		t.Fatalf("exited process: read %q, %v; want a not-exist or ESRCH error", b, err)
	}
	if len(c.files) != 0 || openFDs() != fds0 {
		t.Errorf("after the exit: %d files cached, %d fds open (%d before)", len(c.files), openFDs(), fds0)
	}
}

// TestFileCacheSweep: a file not read in a scrape is closed at its end.
func TestFileCacheSweep(t *testing.T) {
	dir := t.TempDir()
	a, b := dir+"/a", dir+"/b"
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := newFileCache()
	c.readSingle(a)
	c.readSingle(b)
	c.sweep()
	c.readSingle(a)
	c.sweep()
	if _, ok := c.files[b]; ok || len(c.files) != 1 {
		t.Errorf("cached after a scrape without b: %v", c.files)
	}
	// Content larger than the buffer grows it and comes back whole.
	big := make([]byte, 10000)
	for i := range big {
		big[i] = byte('a' + i%26)
	}
	if err := os.WriteFile(a, big, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := c.readSingle(a)
	if err != nil || string(got) != string(big) {
		t.Errorf("read %d bytes (%v), want the %d written", len(got), err, len(big))
	}
}

// TestReadSysctl: readSysctl reads with a 64-byte buffer first; a file of
// that size or more is read again whole, and a real sysctl reads as
// os.ReadFile reads it, again after it is rewritten.
func TestReadSysctl(t *testing.T) {
	dir := t.TempDir()
	c := newFileCache()
	for _, n := range []int{0, 2, 63, 64, 65, 5000} {
		want := make([]byte, n)
		for i := range want {
			want[i] = byte('a' + i%26)
		}
		path := filepath.Join(dir, strconv.Itoa(n))
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		for range 2 { // opened, then through the kept descriptor
			if got, err := c.readSysctl(path); err != nil || string(got) != string(want) {
				t.Errorf("%d bytes: read %d (%v)", n, len(got), err)
			}
		}
		if err := os.WriteFile(path, want[:n/2], 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := c.readSysctl(path); err != nil || string(got) != string(want[:n/2]) {
			t.Errorf("%d bytes rewritten to %d: read %d (%v)", n, n/2, len(got), err)
		}
	}
	for _, path := range []string{"/proc/sys/kernel/task_delayacct", "/proc/sys/net/ipv4/ip_local_port_range", "/proc/sys/kernel/ostype"} {
		want, err := os.ReadFile(path)
		if err != nil {
			t.Skipf("%s: %v", path, err)
		}
		if got, err := c.readSysctl(path); err != nil || string(got) != string(want) {
			t.Errorf("%s: read %q (%v), want %q", path, got, err, want)
		}
	}
}

func TestParseStat(t *testing.T) {
	// comm with a space and a parenthesis; fields 3..24 and 42 (proc(5)).
	line := "4242 (kdc (x) y) S 17 4242 4242 0 -1 4194560 100 0 0 0 31 12 5 -3 20 0 1 0 987654 31944704 2553 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 73 0 0\n"
	st, err := parseStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := procStat{Comm: "kdc (x) y", State: "S", PPID: 17, UTime: 31, STime: 12, CUTime: 5, CSTime: -3,
		NumThreads: 1, Starttime: 987654, VSize: 31944704, RSS: 2553, BlkioTicks: 73, HaveBlkio: true}
	if st != want {
		t.Errorf("parsed %+v\nwant   %+v", st, want)
	}
	// A kernel whose stat ends at field 24 has no disk waits to give.
	short := "4242 (kdc) S 17 4242 4242 0 -1 4194560 100 0 0 0 31 12 5 -3 20 0 1 0 987654 31944704 2553\n"
	if st, err := parseStat([]byte(short)); err != nil || st.HaveBlkio || st.RSS != 2553 {
		t.Errorf("stat ending at field 24: %+v, %v", st, err)
	}
	// This process's own files against procfs's parsers.
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		t.Fatal(err)
	}
	self, err := fs.Self()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	ps, err := self.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if st, err := parseStat(b); err != nil || !st.HaveBlkio || st.BlkioTicks != ps.DelayAcctBlkIOTicks {
		t.Errorf("/proc/self/stat: blkio ticks %d (%v, %v), procfs %d", st.BlkioTicks, st.HaveBlkio, err, ps.DelayAcctBlkIOTicks)
	}
	// run_delay of a thread that does not run meanwhile (this one is
	// running, so its own line changes between two reads).
	if sched, err := os.ReadFile("/proc/1/schedstat"); err == nil {
		p1, _ := fs.Proc(1)
		ss, err := p1.Schedstat()
		got, ok := schedRunDelay(sched)
		if err != nil || !ok || got > ss.WaitingNanoseconds || got+1e9 < ss.WaitingNanoseconds {
			t.Errorf("/proc/1/schedstat %q: run delay %d (%v), procfs %d (%v)", sched, got, ok, ss.WaitingNanoseconds, err)
		}
	}
	for _, bad := range []string{"", "12", "12 x 3"} {
		if _, ok := schedRunDelay([]byte(bad)); ok {
			t.Errorf("schedstat %q parsed", bad)
		}
	}
	if v, ok := schedRunDelay([]byte("31457 2718281828 9\n")); !ok || v != 2718281828 {
		t.Errorf("schedstat: run delay %d, %v", v, ok)
	}
	for _, bad := range []string{"", "4242 kdc S 1", "4242 (kdc) S 17 4242", "4242 (kdc) S x 4242 4242 0 -1 4194560 100 0 0 0 31 12 5 -3 20 0 1 0 987654 31944704 2553"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("%q parsed without error", bad)
		}
	}
}

// TestParseUDPLinesLikeProcfs: the socket tables parsed here give what
// procfs gives for the same files: this machine's own (with a bound IPv4
// and IPv6 socket of this test in them) and the fixture's.
func TestParseUDPLinesLikeProcfs(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
		c, err := net.ListenPacket("udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	for _, dir := range []string{"/proc/self", fixtureDir + "/proc/" + strconv.Itoa(fxWorker0)} {
		// Both parse one copy: other processes open and close sockets.
		snap := t.TempDir()
		if err := os.Mkdir(snap+"/net", 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"udp", "udp6"} {
			b, err := os.ReadFile(dir + "/net/" + name)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(snap+"/net/"+name, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		pfs, err := procfs.NewFS(snap)
		if err != nil {
			t.Fatal(err)
		}
		for name, read := range map[string]func() (procfs.NetUDP, error){"udp": pfs.NetUDP, "udp6": pfs.NetUDP6} {
			want, err := read()
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(snap + "/net/" + name)
			if err != nil {
				t.Fatal(err)
			}
			var got []udpLine
			if err := parseUDPLines(b, func(l udpLine) { got = append(got, l) }); err != nil {
				t.Fatalf("%s/net/%s: %v", dir, name, err)
			}
			if len(got) != len(want) {
				t.Fatalf("%s/net/%s: %d lines, procfs %d", dir, name, len(got), len(want))
			}
			for i, w := range want {
				g := got[i]
				if !g.ip.Equal(w.LocalAddr) || g.ip.String() != w.LocalAddr.String() || g.port != w.LocalPort ||
					g.st != w.St || g.rxQueue != w.RxQueue || g.inode != w.Inode || w.Drops == nil || g.drops != *w.Drops {
					t.Errorf("%s/net/%s line %d: %+v, procfs %+v", dir, name, i, g, *w)
				}
			}
			if dir == "/proc/self" && len(got) == 0 {
				t.Errorf("no socket in /proc/self/net/%s although this test holds one", name)
			}
		}
	}
}

// TestCountFDsKeptOpen: the fd count read through the descriptor kept
// between scrapes follows the process's files as they open and close (the
// kernel counts at each fstat, nothing is cached at open); checked against
// a listing of /proc/self/fd, and the descriptor is kept, not reopened.
func TestCountFDsKeptOpen(t *testing.T) {
	if !isProcfs("/proc") {
		if testutil.InCI() {
			t.Fatal("no procfs in CI")
		}
		t.Skip("no procfs")
	}
	c := newFileCache()
	buf := make([]byte, 8192)
	dir := "/proc/self/fd"
	check := func(step string) {
		t.Helper()
		n, err := countFDs(c, dir, buf, true)
		if err != nil {
			t.Fatal(err)
		}
		// The listing opens one more (the directory itself), which is
		// closed again before countFDs runs above or after.
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		if want := len(entries) - 1; n != want {
			t.Errorf("%s: countFDs = %d, the listing shows %d others", step, n, want)
		}
	}
	check("before")
	cf := c.files[dir]
	if cf == nil {
		t.Fatal("fd/ not kept open")
	}
	var opened []*os.File
	for i := 0; i < 5; i++ {
		f, err := os.Open(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		opened = append(opened, f)
	}
	check("after opening 5")
	for _, f := range opened {
		f.Close()
	}
	check("after closing them")
	if c.files[dir] != cf {
		t.Error("fd/ opened again, not kept")
	}
}

// TestReadPidFileKeptOpen: a pid file read through a kept descriptor shows
// a rewrite in place, a replacement by rename (another inode) and a
// removal, as reading it afresh would.
func TestReadPidFileKeptOpen(t *testing.T) {
	files := newFileCache()
	path := filepath.Join(t.TempDir(), "kdc.pid")
	want := func(what string, pid int) {
		t.Helper()
		got, err := readPidFile(files, path, kdcproc.DefaultRule())
		if err != nil || got != pid {
			t.Errorf("%s: %d, %v; want %d", what, got, err, pid)
		}
	}
	if err := os.WriteFile(path, []byte("123\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want("first read", 123)
	if files.files[path] == nil {
		t.Fatal("pid file not kept open")
	}
	files.sweep()
	// Rewritten in place, longer then shorter (truncated).
	for _, pid := range []int{4567, 89} {
		if err := os.WriteFile(path, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		want("rewritten", pid)
	}
	// Replaced: a new file renamed over it; the old one stays open here.
	replaceThenRemove(t, files, path, 777, want)
	if err := os.WriteFile(path, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if pid, err := readPidFile(files, path, kdcproc.DefaultRule()); err == nil {
		t.Errorf("no pid: got %d", pid)
	}
}

// TestReadPidFileSettled: a pid file whose stat is unchanged is not read
// again once its mtime and ctime were settledAge old at the last read,
// and is read again before. What the kept descriptor reads is swapped
// underneath (dup2 of another file with another pid onto it), which
// leaves the path's stat as it was: the content a rewrite within the same
// timestamp would show. A real rewrite of the same size is seen.
func TestReadPidFileSettled(t *testing.T) {
	files := newFileCache()
	dir := t.TempDir()
	path := filepath.Join(dir, "kdc.pid")
	want := func(what string, pid int) {
		t.Helper()
		got, err := readPidFile(files, path, kdcproc.DefaultRule())
		if err != nil || got != pid {
			t.Errorf("%s: %d, %v; want %d", what, got, err, pid)
		}
	}
	// swap makes the kept descriptor read the file other, or one holding
	// pid.
	swap := func(pid int, other string) {
		t.Helper()
		if other == "" {
			other = filepath.Join(dir, "other"+strconv.Itoa(pid))
			if err := os.WriteFile(other, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		f, err := os.Open(other)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cf := files.files[path]
		if cf == nil {
			t.Fatal("pid file not kept open")
		}
		if err := unix.Dup2(int(f.Fd()), cf.fd); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, []byte("1234\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want("first read", 1234)
	// Written just now: the same stat does not mean the same content.
	swap(5678, "")
	want("fresh file, same stat, new content", 5678)
	want("fresh file read again", 5678)

	// Three seconds later the stat is settled: the next read is the
	// last one until the stat changes.
	files.now = func() time.Time { return time.Now().Add(3 * time.Second) }
	want("read once settled", 5678)
	swap(999, "")
	for i := 0; i < 3; i++ {
		files.sweep()
		want("settled, stat unchanged: not read", 5678)
	}
	if files.files[path] == nil {
		t.Fatal("settled pid file closed by the sweep")
	}
	swap(0, path) // the pid file itself again
	// A rewrite, same size: mtime and ctime move.
	if err := os.WriteFile(path, []byte("4321\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want("rewritten, same size", 4321)
	if err := os.WriteFile(path, []byte("42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	want("rewritten, shorter", 42)
	// Replaced by another file: another inode.
	replaceThenRemove(t, files, path, 77, want)
}

// replaceThenRemove renames a new pid file holding pid over path, which
// want must then read, and removes it, which readPidFile must report as
// not existing.
func replaceThenRemove(t *testing.T, files *fileCache, path string, pid int, want func(string, int)) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	want("replaced", pid)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := readPidFile(files, path, kdcproc.DefaultRule()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("removed: %v, want not exist", err)
	}
}
