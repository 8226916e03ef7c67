package collector

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/web"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// fixtureTree65 turns a copy of the fixture into the tree of a krb5kdc
// -w 64: 62 more clones of a worker under the same supervisor.
func fixtureTree65(b testing.TB) string {
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

// BenchmarkScrapeFixtureTree65 is one full scrape (all collectors, through
// a registry's Gather) of a copied /proc tree shaped like krb5kdc -w 64
// plus kadmind: ordinary files on the temp file system, not procfs, and no
// sock_diag (the tree is not this machine's, so sockets come from the
// copied net/tcp). It measures the collectors' own work per process
// (parsing, grouping, worker slots, series), not the kernel's: for that
// see BenchmarkScrapeRealKDC and testdata/scrapecost.
func BenchmarkScrapeFixtureTree65(b *testing.B) {
	for _, mode := range []string{"by-name", "pid-file"} {
		b.Run(mode, func(b *testing.B) {
			cfg := fixtureConfig(b, fixtureTree65(b))
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
			if w, p := s.Value("krb5_kdc_workers"), s.Value("krb5_process_processes", "program", "krb5kdc"); w != 64 || p != 65 {
				b.Fatalf("fixture has %v workers in %v processes, want 64 in 65", w, p)
			}
			if v := s.Value("krb5_kdc_workers_configured"); v != 64 {
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

// BenchmarkScrapeRealKDC is one full scrape of a real krb5kdc -w N and
// kadmind through the real /proc and sock_diag, for N = 2 and 64; by name,
// every process of the machine is looked at (other tests' KDCs running
// meanwhile are counted too). ns/op is wall time, which on a busy machine
// includes waits for a CPU; cpu-ns/op is this process's CPU time (user and
// system, so the kernel's procfs and connection-table work too) per scrape.
func BenchmarkScrapeRealKDC(b *testing.B) {
	for _, workers := range []int{2, 64} {
		b.Run("w"+strconv.Itoa(workers), func(b *testing.B) {
			// Returns once every worker runs: each op scrapes all N.
			r := realmtest.Realm(b, realm.Options{Users: 5, Services: 2, Workers: workers})
			for _, mode := range []string{"pid-files", "by-name", "pid-files-http"} {
				b.Run(mode, func(b *testing.B) {
					// -http: the whole reply as Prometheus asks for it
					// (text, gzip), as the exporter's handler gives it.
					reg, h, req := scrapeSetup(b, r, mode != "by-name")
					b.ReportAllocs()
					cpu0 := processCPU()
					for b.Loop() {
						if mode == "pid-files-http" {
							w := httptest.NewRecorder()
							h.ServeHTTP(w, req)
							if w.Code != 200 || w.Header().Get("Content-Encoding") != "gzip" {
								b.Fatalf("reply %d, %q", w.Code, w.Header().Get("Content-Encoding"))
							}
						} else if _, err := reg.Gather(); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
				})
			}
		})
	}
}

// scrapeSetup registers the collectors watching r's daemons (through their
// pid files, or found by name) and returns the registry, the exporter's
// /metrics handler over it and a request as Prometheus sends it (gzip).
func scrapeSetup(b *testing.B, r *realm.Realm, pidFiles bool) (*prometheus.Registry, http.Handler, *http.Request) {
	b.Helper()
	cfg := DefaultConfig()
	if pidFiles {
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
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	return reg, web.MetricsHandler(reg, promhttp.HandlerOpts{}), req
}

// BenchmarkScrapeRealKDCPaced is BenchmarkScrapeRealKDC/wN/pid-files-http
// with 30 ms between scrapes (outside the timer), as an exporter is
// scraped: the CPU caches and the kernel's are cold again at each scrape,
// which costs more than back-to-back scrapes (testdata/scrapecost measures
// the same from outside).
func BenchmarkScrapeRealKDCPaced(b *testing.B) {
	for _, workers := range []int{64, 2} {
		b.Run("w"+strconv.Itoa(workers), func(b *testing.B) { benchScrapePaced(b, workers) })
	}
}

func benchScrapePaced(b *testing.B, workers int) {
	r := realmtest.Realm(b, realm.Options{Users: 5, Services: 2, Workers: workers})
	_, h, req := scrapeSetup(b, r, true)
	var cpu int64
	for b.Loop() {
		b.StopTimer()
		time.Sleep(30 * time.Millisecond)
		b.StartTimer()
		cpu0 := processCPU()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		cpu += processCPU() - cpu0
		if w.Code != 200 {
			b.Fatalf("reply %d", w.Code)
		}
	}
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
}
