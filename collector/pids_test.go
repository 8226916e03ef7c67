package collector

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// TestPidListerFixture: on a copied tree the listing is every numeric
// entry, as os.ReadDir shows them, again on a second listing.
func TestPidListerFixture(t *testing.T) {
	dir := fixtureDir + "/proc"
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var want []int
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			want = append(want, n)
		}
	}
	l := newPidLister(dir, foundByName(nil))
	for i := 0; i < 2; i++ {
		got, err := l.list()
		if err != nil {
			t.Fatal(err)
		}
		got = slices.Clone(got)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("listing %d: %v, want %v", i, got, want)
		}
	}
	if c, err := l.comm(fxSupervisor); err != nil || string(c) != "krb5kdc" {
		t.Errorf("comm of the supervisor = %q, %v", c, err)
	}
}

// TestPidListerLive: in the real /proc, a child shows up in the listing
// and its comm follows each exec, as an independent read of the file shows
// it. Only the comm of a program the lister keeps stays open: not while
// the child is sh, kept once it execs a program of that name (and read
// through the same descriptor after), dropped once it execs another. Once
// reaped it is no longer listed and its comm fails as gone.
func TestPidListerLive(t *testing.T) {
	if !isProcfs("/proc") {
		if testutil.InCI() {
			t.Fatal("no procfs in CI")
		}
		t.Skip("no procfs")
	}
	// A copy of sh under a name of its own: the kept program.
	kept := "kxpidtest"
	bin := filepath.Join(t.TempDir(), kept)
	sh, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, sh, 0o755); err != nil {
		t.Fatal(err)
	}
	// sh waits for a line on its stdin, becomes the copy, which waits for
	// another and becomes sleep.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	pid, err := syscall.ForkExec("/bin/sh", []string{"sh", "-c", "read x; exec " + bin + ` -c "read y; exec sleep 60"`},
		&syscall.ProcAttr{Files: []uintptr{r.Fd(), 2, 2}})
	if err != nil {
		t.Fatal(err)
	}
	reap := reaper(pid)
	defer reap()
	l := newPidLister("/proc", func(c []byte) bool { return string(c) == kept })
	scan := func() (listed bool, comm string, err error) {
		t.Helper()
		pids, err := l.list()
		if err != nil {
			t.Fatal(err)
		}
		listed = slices.Contains(pids, pid)
		c, err := l.comm(pid)
		l.sweep()
		return listed, string(c), err
	}
	independent := func() string {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
		return string(b)
	}
	step := func(what, want string, keep bool) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, what, func() bool { return independent() == want+"\n" })
		if listed, comm, err := scan(); !listed || err != nil || comm != want {
			t.Fatalf("%s: listed %v, comm %q (%v), want %s", what, listed, comm, err, want)
		}
		if cf := l.comms[pid]; (cf != nil) != keep {
			t.Fatalf("%s: comm kept open %v, want %v", what, cf != nil, keep)
		}
	}
	step("the child as sh", "sh", false)
	w.Write([]byte("go\n"))
	step("the child's exec of "+kept, kept, true)
	cf := l.comms[pid]
	step(kept+" again", kept, true)
	if l.comms[pid] != cf {
		t.Error("comm file opened again, not kept")
	}
	w.Write([]byte("go\n"))
	step("the child's exec of sleep", "sleep", false)
	reap()
	listed, comm, err := scan()
	if listed || !gone(err) {
		t.Errorf("reaped child: listed %v, comm %q, err %v; want unlisted and gone", listed, comm, err)
	}
	if len(l.comms) != 0 {
		t.Errorf("comm files kept: %v", l.comms)
	}
}

// TestPidListerBound: beyond its bound the lister still reads every comm,
// opening the extra files for each read, and keeps no more than the bound.
func TestPidListerBound(t *testing.T) {
	l := newPidLister(fixtureDir+"/proc", func([]byte) bool { return true })
	l.maxKept = 2
	pids, err := l.list()
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range slices.Clone(pids) {
		want, err := os.ReadFile(fixtureDir + "/proc/" + strconv.Itoa(pid) + "/comm")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := l.comm(pid); err != nil || string(got)+"\n" != string(want) {
			t.Errorf("comm of %d = %q, %v; the file says %q", pid, got, err, want)
		}
	}
	if len(pids) <= 2 || len(l.comms) != 2 {
		t.Errorf("%d comm files kept of %d processes, want 2", len(l.comms), len(pids))
	}
	if n := keptFileLimit(1 << 40); n <= 0 || n >= 1<<40 {
		t.Errorf("keptFileLimit ignores the open-file limit: %d", n)
	}
}
