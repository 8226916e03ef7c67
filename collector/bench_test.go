package collector

import (
	"bytes"
	"context"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/realm"
)

// fixture64 turns a copy of the fixture into krb5kdc -w 64: 62 more clones
// of a worker under the same supervisor.
func fixture64(b *testing.B) string {
	root := editableFixture(b)
	for i := 0; i < 62; i++ {
		cloneProc(b, root, fxWorker0, 21000+i, fxSupervisor, 0)
	}
	path := filepath.Join(root, strconv.Itoa(fxSupervisor), "cmdline")
	cmd, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	cmd = bytes.Replace(cmd, []byte("-w\x002\x00"), []byte("-w\x0064\x00"), 1)
	if err := os.WriteFile(path, cmd, 0o644); err != nil {
		b.Fatal(err)
	}
	return root
}

// BenchmarkScrape64Workers is one full scrape (all collectors, through a
// registry's Gather) of a KDC with 64 worker processes plus kadmind.
func BenchmarkScrape64Workers(b *testing.B) {
	for _, mode := range []string{"by-name", "pid-file"} {
		b.Run(mode, func(b *testing.B) {
			cfg := fixtureConfig(b, fixture64(b))
			if mode == "pid-file" {
				cfg.KDCPidFile = writePidFile(b, fxSupervisor)
			}
			c, err := New(log.NewNopLogger(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(c)
			s := gather(b, reg)
			if w, p := s.value("krb5_kdc_workers"), s.value("krb5_process_processes", "program", "krb5kdc"); w != 64 || p != 65 {
				b.Fatalf("fixture has %v workers in %v processes, want 64 in 65", w, p)
			}
			if v := s.value("krb5_kdc_workers_configured"); v != 64 {
				b.Fatalf("workers_configured = %v", v)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := reg.Gather(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkScrapeRealKDC is one full scrape of a real krb5kdc -w 2 and
// kadmind through the real /proc; by name, every process of the machine is
// looked at (other tests' KDCs running meanwhile are counted too).
func BenchmarkScrapeRealKDC(b *testing.B) {
	testutil.RequireMIT(b)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := realm.Up(ctx, realm.Options{Dir: b.TempDir(), Users: 5, Services: 2, Fillers: -1, Workers: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Down()
	for _, mode := range []string{"pid-files", "by-name"} {
		b.Run(mode, func(b *testing.B) {
			cfg := DefaultConfig()
			if mode == "pid-files" {
				cfg.KDCPidFile, cfg.KadmindPidFile = r.KDCPidFile, r.KadmindPidFile
				cfg.KpropdPidFile = filepath.Join(r.Dir, "kpropd.pid")
			}
			cfg.KDCConfPath, cfg.Krb5ConfPath = r.KDCConf, r.Krb5Conf
			c, err := New(log.NewNopLogger(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(c)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := reg.Gather(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
