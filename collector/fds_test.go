package collector

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
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
