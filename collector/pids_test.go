package collector

import (
	"os"
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
	l := newPidLister(dir)
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
// and its comm file, kept open, follows an exec (the new program's name,
// as an independent read of the file shows it); once reaped it is no
// longer listed, its comm fails as gone and the sweep closes the file.
func TestPidListerLive(t *testing.T) {
	if !isProcfs("/proc") {
		t.Skip("no procfs")
	}
	// sh waits for a line on its stdin, then becomes sleep.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	pid, err := syscall.ForkExec("/bin/sh", []string{"sh", "-c", "read x; exec sleep 60"},
		&syscall.ProcAttr{Files: []uintptr{r.Fd(), 2, 2}})
	if err != nil {
		t.Fatal(err)
	}
	reaped := false
	reap := func() {
		syscall.Kill(pid, syscall.SIGKILL)
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, 0, nil)
		reaped = true
	}
	defer func() {
		if !reaped {
			reap()
		}
	}()
	l := newPidLister("/proc")
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
	if listed, comm, err := scan(); !listed || err != nil || comm+"\n" != independent() {
		t.Fatalf("child %d: listed %v, comm %q (%v), the file says %q", pid, listed, comm, err, independent())
	}
	kept := l.comms[pid]
	if kept == nil {
		t.Fatal("comm not kept open")
	}
	if _, err := w.Write([]byte("go\n")); err != nil {
		t.Fatal(err)
	}
	// The exec, as an independent read of the file shows it.
	testutil.Eventually(t, 30*time.Second, "the child's exec of sleep", func() bool { return independent() == "sleep\n" })
	if listed, comm, err := scan(); !listed || err != nil || comm != "sleep" {
		t.Errorf("after exec: listed %v, comm %q (%v), want sleep", listed, comm, err)
	}
	if l.comms[pid] != kept {
		t.Error("comm file opened again, not kept")
	}
	reap()
	listed, comm, err := scan()
	if listed || !gone(err) {
		t.Errorf("reaped child: listed %v, comm %q, err %v; want unlisted and gone", listed, comm, err)
	}
	if _, ok := l.comms[pid]; ok {
		t.Error("reaped child's comm still open")
	}
}

// TestPidListerBound: beyond its bound the lister still reads every comm,
// opening the extra files for each read, and keeps no more than the bound.
func TestPidListerBound(t *testing.T) {
	l := newPidLister(fixtureDir + "/proc")
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
