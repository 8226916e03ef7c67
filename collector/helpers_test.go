package collector

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"golang.org/x/sys/unix"

	"github.com/prometheus/common/expfmt"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// fixtureDir is the /proc capture of a krb5kdc -w 2 and kadmind (see
// testdata/README.md).
const fixtureDir = "testdata/fixture"

// Values the golden tests give the principal database file.
const (
	fixtureDBSize = 16384
)

var fixtureDBTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fixtureConfig writes the fixture's kdc.conf and krb5.conf into a temp
// dir (their realm directory placeholder pointing there, with a principal
// file of known size and mtime) and returns a Config reading procRoot.
func fixtureConfig(t testing.TB, procRoot string) Config {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"kdc.conf", "krb5.conf"} {
		b, err := os.ReadFile(filepath.Join(fixtureDir, name))
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.ReplaceAll(b, []byte("@REALMDIR@"), []byte(dir))
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db := filepath.Join(dir, "principal")
	if err := os.WriteFile(db, make([]byte, fixtureDBSize), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(db, fixtureDBTime, fixtureDBTime); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.ProcFS = procRoot
	// Opt-in, but the fixture has the connections to check.
	cfg.TCPConnections = true
	cfg.KDCConfPath = filepath.Join(dir, "kdc.conf")
	cfg.Krb5ConfPath = filepath.Join(dir, "krb5.conf")
	cfg.DumpFile = filepath.Join(dir, "replica_datatrans")
	cfg.Identity.SystemdDir = noSystemd
	return cfg
}

// noSystemd is an Identity.SystemdDir that does not exist: the fixture's
// processes have no cgroup files, so on a systemd host they would not be
// in a unit (identity.go).
const noSystemd = fixtureDir + "/no-systemd"

func newTestCollector(t testing.TB, cfg Config) (*KDCCollector, *prometheus.Registry) {
	t.Helper()
	return newTestCollectorLogging(t, cfg, log.NewNopLogger())
}

// newTestCollectorLogging is newTestCollector with the collectors
// logging to logger.
func newTestCollectorLogging(t testing.TB, cfg Config, logger log.Logger) (*KDCCollector, *prometheus.Registry) {
	t.Helper()
	c, err := New(logger, cfg)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	return c, reg
}

// withoutDuration drops the scrape durations, the one thing that varies.
func withoutDuration(g prometheus.Gatherer) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := g.Gather()
		out := mfs[:0]
		for _, mf := range mfs {
			if mf.GetName() != "krb5_exporter_collector_scrape_duration_seconds" {
				out = append(out, mf)
			}
		}
		return out, err
	})
}

// exposition renders what the gatherer returns in the text format.
func exposition(t testing.TB, g prometheus.Gatherer) string {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// scrape and gather are the shared test helpers' (internal/testutil).
type scrape = testutil.Scrape

func gather(t testing.TB, g prometheus.Gatherer) *scrape {
	t.Helper()
	return testutil.Gather(t, g)
}

// copyTree copies a fixture tree, symlinks as symlinks.
func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// processCPU is the CPU time of this process (user and system, all
// threads) in nanoseconds: on a shared machine wall time also counts the
// waits for a CPU.
func processCPU() int64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// reaper returns a function that kills and reaps the raw-forked child
// pid, once however often it is called: the test calls it where the
// child must be gone and defers it, so that no child outlives the test.
func reaper(pid int) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			syscall.Kill(pid, syscall.SIGKILL)
			var ws syscall.WaitStatus
			syscall.Wait4(pid, &ws, 0, nil)
		})
	}
}
