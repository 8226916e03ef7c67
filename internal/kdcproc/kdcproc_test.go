package kdcproc

import (
	"context"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

func TestAssign(t *testing.T) {
	w, err := NewWorkers("/proc", nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := ID{10, 1}, ID{11, 1}, ID{12, 1}
	if got := w.Assign([]ID{a, b, c}); !slices.Equal(got, []int{0, 1, 2}) {
		t.Errorf("first = %v", got)
	}
	// b dies, d replaces it: d takes index 1.
	d := ID{20, 5}
	if got := w.Assign([]ID{a, c, d}); !slices.Equal(got, []int{0, 2, 1}) {
		t.Errorf("after replacement = %v", got)
	}
	// A line of b read after it exited still belongs to index 1.
	if i, ok := w.Index(11); !ok || i != 1 {
		t.Errorf("Index(gone worker) = %d, %v; want 1, true", i, ok)
	}
	// A pid reused by a newer process is a new worker.
	a2 := ID{10, 9}
	if got := w.Assign([]ID{a2, c, d}); !slices.Equal(got, []int{0, 2, 1}) {
		t.Errorf("pid reuse = %v", got)
	}
	if w.occupant[0] != a2 {
		t.Errorf("index 0 holds %v, want %v", w.occupant[0], a2)
	}
	// All gone: no index left.
	w.Assign(nil)
	if len(w.occupant) != 0 {
		t.Errorf("indexes after all workers are gone: %v", w.occupant)
	}
}

// A real krb5kdc -w 3: Find tells the supervisor from the workers, Index
// gives each worker a distinct index below 3 on its first line and none to
// the supervisor or a stranger; after a restart the new workers take the
// same indexes, and a late line of an old worker keeps its old index.
func TestRealKDC(t *testing.T) {
	r := realmtest.Realm(t, realm.Options{Workers: 3, NoKadmind: true})
	fs, err := procfs.NewFS("/proc")
	if err != nil {
		t.Fatal(err)
	}
	procs, err := Find("/proc", r.KDCPidFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	pids := r.KDCPids() // the harness's own view: supervisor first
	if len(procs) != 4 {
		t.Fatalf("Find = %v, want the supervisor and 3 workers %v", procs, pids)
	}
	for _, p := range procs {
		if p.Supervisor != (p.PID == pids[0]) {
			t.Errorf("%+v: supervisor flag wrong (supervisor is %d)", p, pids[0])
		}
	}
	// Of, from the harness's pid list, finds the same processes and the
	// same supervisor as Find's walk of /proc; a pid that cannot exist
	// (above the largest pid_max) is left out.
	of := Of(fs, append(slices.Clone(pids), 1<<22+1))
	byPID := func(a, b Proc) int { return a.PID - b.PID }
	found := slices.Clone(procs)
	slices.SortFunc(of, byPID)
	slices.SortFunc(found, byPID)
	if len(of) != len(found) {
		t.Fatalf("Of = %+v, Find = %+v", of, found)
	}
	for i := range of {
		if of[i].ID != found[i].ID || of[i].PPID != found[i].PPID || of[i].Supervisor != found[i].Supervisor {
			t.Errorf("Of: %+v, Find: %+v", of[i], found[i])
		}
	}
	ansOf, ansFind := Answering(of), Answering(found)
	if len(ansOf) != 3 || !slices.Equal(ansOf, ansFind) {
		t.Errorf("Answering(Of) = %v, Answering(Find) = %v; want the 3 workers", ansOf, ansFind)
	}
	w, err := NewWorkers("/proc", nil)
	if err != nil {
		t.Fatal(err)
	}
	old := map[int]int{}
	for _, pid := range pids[1:] {
		i, ok := w.Index(pid)
		if !ok || i < 0 || i > 2 {
			t.Fatalf("Index(worker %d) = %d, %v", pid, i, ok)
		}
		old[pid] = i
	}
	if len(old) != 3 || !distinct(old) {
		t.Fatalf("worker indexes %v not distinct", old)
	}
	for _, pid := range []int{pids[0], os.Getpid()} {
		if i, ok := w.Index(pid); ok {
			t.Errorf("Index(%d, no worker) = %d, true", pid, i)
		}
	}
	// The collector's view agrees with the indexes the log lines got.
	ans := Answering(procs)
	got := w.Assign(ans)
	for k, id := range ans {
		if got[k] != old[id.PID] {
			t.Errorf("Assign gave %d index %d, Index gave %d", id.PID, got[k], old[id.PID])
		}
	}

	// MIT 1.20 does not replace a dead worker: the supervisor stops the
	// others and exits. Kill one, wait for the KDC to go, start it again.
	if err := syscall.Kill(pids[2], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "the KDC to exit after a worker died", func() bool { return len(r.KDCPids()) == 0 })
	if log := string(testutil.MustRead(t, r.KDCLog)); !strings.Contains(log, "exited with status") {
		t.Errorf("no 'worker exited' line in the KDC log:\n%s", log)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.StartKDC(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "3 new workers", func() bool { return len(r.KDCPids()) == 4 })
	renewed := map[int]int{}
	for _, pid := range r.KDCPids()[1:] {
		i, ok := w.Index(pid)
		if !ok || i < 0 || i > 2 {
			t.Fatalf("Index(new worker %d) = %d, %v: want an index below 3 (reused)", pid, i, ok)
		}
		renewed[pid] = i
	}
	if !distinct(renewed) {
		t.Errorf("new worker indexes %v not distinct", renewed)
	}
	for pid, i := range old {
		if j, ok := w.Index(pid); !ok || j != i {
			t.Errorf("late line of exited worker %d: Index = %d, %v; want %d", pid, j, ok, i)
		}
	}
}

func distinct(m map[int]int) bool {
	seen := map[int]bool{}
	for _, v := range m {
		if seen[v] {
			return false
		}
		seen[v] = true
	}
	return true
}

// One keeps the oldest KDC's main process and its own workers, and counts
// the others.
func TestOne(t *testing.T) {
	procs := []Proc{
		{ID: ID{PID: 10, Start: 1}, PPID: 1, Supervisor: true},
		{ID: ID{PID: 20, Start: 2}, PPID: 1, Supervisor: true},
		{ID: ID{PID: 11, Start: 3}, PPID: 10},
		{ID: ID{PID: 21, Start: 4}, PPID: 20},
		{ID: ID{PID: 12, Start: 5}, PPID: 10},
		{ID: ID{PID: 30, Start: 6}, PPID: 1, Supervisor: true},
	}
	kdc, others := One(procs)
	var pids []int
	for _, p := range kdc {
		pids = append(pids, p.PID)
	}
	if !slices.Equal(pids, []int{10, 11, 12}) || others != 2 {
		t.Errorf("One: %v and %d others, want [10 11 12] and 2", pids, others)
	}
	if kdc, others := One(nil); len(kdc) != 0 || others != 0 {
		t.Errorf("One(nil): %v, %d", kdc, others)
	}
}
