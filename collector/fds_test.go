package collector

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestIntegrationFDsFollowWatched: with 1,000 other processes on the host,
// a scrape that finds the daemons by name (a full scan of /proc) holds no
// file of theirs open: the collector's descriptors stay within 64 plus 8
// per watched process, and the KDC's series are still right (its process
// and worker counts, and its open files counted from the processes' own
// fd directories). Not parallel: it counts this process's descriptors.
// Keeping every process's comm open, it held more than 1,000.
func TestIntegrationFDsFollowWatched(t *testing.T) {
	r := upRealm(t, 2, false)
	pids := r.KDCPids()
	if len(pids) != 3 {
		t.Fatalf("KDC pids %v, want supervisor and 2 workers", pids)
	}
	idle := testutil.IdleProcesses(t, 1000)
	kids, err := os.ReadFile("/proc/" + strconv.Itoa(idle.Pid) + "/task/" + strconv.Itoa(idle.Pid) + "/children")
	if err != nil || len(strings.Fields(string(kids))) != 1000 {
		t.Fatalf("idle processes: %d children (%v)", len(strings.Fields(string(kids))), err)
	}
	// krb5kdc through its pid file, the others by name: the full scan.
	cfg := realmConfig(r)
	cfg.KadmindPidFile, cfg.KpropdPidFile = "", ""
	before := testutil.OpenFDs(t)
	_, reg := newTestCollector(t, cfg)
	var s *scrape
	for i := 0; i < 3; i++ {
		s = gather(t, reg)
	}
	held := testutil.OpenFDs(t) - before
	watched := 0
	for _, p := range programNames {
		watched += int(s.Value("krb5_process_processes", "program", p))
	}
	if bound := 64 + 8*watched; held > bound {
		t.Errorf("the collector holds %d files open with %d watched processes (1,000 others): more than %d", held, watched, bound)
	}
	t.Logf("%d files held, %d watched processes", held, watched)
	if v := s.Value("krb5_process_processes", "program", "krb5kdc"); v != 3 {
		t.Errorf("krb5kdc processes = %v, want 3", v)
	}
	if v := s.Value("krb5_kdc_workers"); v != 2 {
		t.Errorf("workers = %v, want 2", v)
	}
	fds := 0
	for _, pid := range pids {
		entries, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
		if err != nil {
			t.Fatal(err)
		}
		fds += len(entries)
	}
	if v := s.Value("krb5_process_open_fds", "program", "krb5kdc"); v != float64(fds) {
		t.Errorf("krb5kdc open fds = %v, its fd directories hold %d", v, fds)
	}
}

// TestIntegrationOtherRealmsNotHeld: with pid files for krb5kdc and kadmind
// (kpropd found by name), the collector opens the files of the pid-file
// processes and their children only. Another realm's krb5kdc (a supervisor
// and a worker) and kadmind start and stop again and again beside the
// watched realm: while they run, no file under their /proc/PID is open
// (read from this process's fd links), and once they are gone the open
// files are back to the figure before the first came. 50 cycles without
// the race detector (scripts/test-alone.sh), 5 under make test's race run.
// Then the watched krb5kdc is restarted: the exited one's files are closed
// at the next scrape.
// Not parallel: it counts this process's descriptors. Finding every
// krb5kdc and kadmind by name as soon as one program had no pid file, it
// held 3 files of each process of the other realm and more after each
// cycle.
func TestIntegrationOtherRealmsNotHeld(t *testing.T) {
	r := upRealm(t, 0, true)
	other := realmtest.Realm(t, realm.Options{Realm: "OTHER.TEST", Domain: "other.test", Users: -1, Services: -1, Workers: 1})
	cfg := realmConfig(r)
	cfg.KpropdPidFile = ""
	stopOther := func() {
		t.Helper()
		if err := other.StopKDC(); err != nil {
			t.Fatal(err)
		}
		if err := other.StopKadmind(); err != nil {
			t.Fatal(err)
		}
	}
	stopOther()
	_, reg := newTestCollector(t, cfg)
	for i := 0; i < 3; i++ {
		gather(t, reg)
	}
	start := procFDs(t)
	cycles := 50
	if testutil.Race {
		cycles = 5
	}
	ctx := testutil.Context(t, 5*time.Minute)
	var seen []int // every process of the other realm
	for i := 0; i < cycles; i++ {
		if err := other.StartKDC(ctx); err != nil {
			t.Fatal(err)
		}
		if err := other.StartKadmind(ctx); err != nil {
			t.Fatal(err)
		}
		s := gather(t, reg)
		if v := s.Value("krb5_process_processes", "program", "krb5kdc"); v != 1 {
			t.Fatalf("cycle %d: krb5kdc processes = %v, want the watched realm's 1", i, v)
		}
		others := append(other.KDCPids(), other.KadmindPid())
		if len(others) != 3 {
			t.Fatalf("cycle %d: other realm's processes %v, want krb5kdc, its worker and kadmind", i, others)
		}
		if held := heldProcs(t, others); len(held) > 0 {
			t.Fatalf("cycle %d: files of the other realm's processes %v held open: %v", i, others, held)
		}
		seen = append(seen, others...)
		stopOther()
		gather(t, reg)
	}
	// None of the exited processes' files is held, and no more /proc files
	// than before (fewer is an earlier test's collector let go meanwhile:
	// under the race run 26 after against 29 before).
	if held := heldProcs(t, seen); len(held) > 0 {
		t.Errorf("files of the other realms' exited processes held open: %v", held)
	}
	if n := procFDs(t); n > start {
		t.Errorf("%d /proc files open after %d other realms came and went, %d before", n, cycles, start)
	}
	t.Logf("%d /proc files open before and after %d cycles", start, cycles)
	// The watched KDC replaced: the files of the exited one are closed at
	// the next scrape.
	exited := r.KDCPids()
	if err := r.StopKDC(); err != nil {
		t.Fatal(err)
	}
	if err := r.StartKDC(ctx); err != nil {
		t.Fatal(err)
	}
	gather(t, reg)
	if held := heldProcs(t, exited); len(held) > 0 {
		t.Errorf("files of the exited watched krb5kdc %v still open after a scrape: %v", exited, held)
	}
}

// procFDs counts the files under /proc this process holds open: the
// collector's. The harness's own descriptors (the realms' port lock files,
// pipes of exited daemons not yet reaped) come and go with the machine's
// load, and once made the count 64 after against 61 before.
// kpropd has no pid file here and is found by name, so the kpropd of
// another package's replica test running beside this one (make test's race
// run) is watched and counted too: its files are left out.
func procFDs(t *testing.T) int {
	t.Helper()
	n := 0
	for pid, files := range heldProcs(t, nil) {
		if comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm"); err == nil && strings.TrimSpace(string(comm)) == "kpropd" {
			continue
		}
		n += len(files)
	}
	return n
}

// heldProcs returns the /proc/PID files of pids (nil: of every process)
// this process holds open, from its fd links (an earlier test's collector
// may still hold its own realm's).
func heldProcs(t *testing.T, pids []int) map[int][]string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	held := map[int][]string{}
	for _, e := range entries {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // the directory's own descriptor, closed by now
		}
		rest, ok := strings.CutPrefix(target, "/proc/")
		if !ok {
			continue
		}
		num, file, _ := strings.Cut(rest, "/")
		if pid, err := strconv.Atoi(num); err == nil && (pids == nil || slices.Contains(pids, pid)) {
			held[pid] = append(held[pid], file)
		}
	}
	return held
}
