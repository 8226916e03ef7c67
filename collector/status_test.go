package collector

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
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

// A collector that fails on every scrape is one line until its error
// changes, and one when it recovers; Status names it while it fails. The
// errors are the kdcconf collector's own, of a real kdc.conf path.
func TestCollectorFailureLoggedOnChange(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "kdc.conf")
	if err := os.Mkdir(conf, 0o755); err != nil { // a directory: not a regular file
		t.Fatal(err)
	}
	var logs testutil.LockedBuffer
	c, reg := newTestCollectorLogging(t, Config{ProcFS: "/proc", KDCConf: true, KDCConfPath: conf, Krb5ConfPath: filepath.Join(dir, "krb5.conf")}, log.NewLogfmtLogger(&logs))
	scrape := func(n int) {
		for range n {
			if _, err := reg.Gather(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The collector's state lines; the kdc.conf reader says its own.
	lines := func() (l []string) {
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, `msg="collector `) {
				l = append(l, line)
			}
		}
		return l
	}
	scrape(3)
	if l := lines(); len(l) != 1 || !strings.Contains(l[0], `msg="collector failed; logged again only when the error changes" name=kdcconf`) || !strings.Contains(l[0], "not a regular file") {
		t.Fatalf("three failed scrapes logged %q, want one line", l)
	}
	if st := c.Status(0); len(st.Failing) != 1 || st.Failing[0].Name != "kdcconf" {
		t.Errorf("Status while failing: %+v", st.Failing)
	}
	if err := os.Remove(conf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("[realms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	scrape(2)
	if l := lines(); len(l) != 2 || !strings.Contains(l[1], "name=kdcconf") || strings.Contains(l[1], "not a regular file") {
		t.Fatalf("a changed error logged %q, want a second line with the new error", l)
	}
	if err := os.WriteFile(conf, []byte("[realms]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	scrape(2)
	if l := lines(); len(l) != 3 || l[2] != `level=info msg="collector recovered" name=kdcconf` {
		t.Fatalf("the recovery logged %q, want one line \"collector recovered\"", l)
	}
	if st := c.Status(0); len(st.Failing) != 0 {
		t.Errorf("Status after the recovery: %+v", st.Failing)
	}
}
