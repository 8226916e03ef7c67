package collector

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// Status describes the KDC the realm harness started (supervisor and
// worker pids as the harness knows them) and the collector that failed,
// collecting once when no scrape has, and not again while the last is
// recent.
func TestStatusOfRealKDC(t *testing.T) {
	t.Parallel()
	r := upRealm(t, 2, false)
	cfg := realmConfig(r)
	cfg.KDCConfPath = r.Dir // a directory: the collectors reading kdc.conf fail
	c, _ := newTestCollector(t, cfg)
	st := c.Status(time.Hour)
	if st.At.IsZero() {
		t.Fatal("no collection ran for the first Status")
	}
	pids := r.KDCPids()
	var kdc, kadmind *ProgramStatus
	for i := range st.Programs {
		switch st.Programs[i].Name {
		case "krb5kdc":
			kdc = &st.Programs[i]
		case "kadmind":
			kadmind = &st.Programs[i]
		}
	}
	if kdc == nil || !kdc.Running || kdc.PID != pids[0] || !slices.Equal(kdc.Workers, pids[1:]) {
		t.Errorf("krb5kdc: %+v, want pid %d and workers %v", kdc, pids[0], pids[1:])
	}
	if kadmind == nil || kadmind.Running {
		t.Errorf("kadmind (not started): %+v", kadmind)
	}
	// kdcconf and replication both read kdc.conf.
	if len(st.Failing) != 2 || st.Failing[0].Name != "kdcconf" || st.Failing[1].Name != "replication" || !strings.Contains(st.Failing[0].Err, "not a regular file") {
		t.Errorf("failing collectors: %+v, want kdcconf's and replication's errors", st.Failing)
	}
	if again := c.Status(time.Hour); !again.At.Equal(st.At) {
		t.Errorf("a second Status within maxAge collected again (%v, then %v)", st.At, again.At)
	}
}
