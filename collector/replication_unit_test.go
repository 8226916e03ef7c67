package collector

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/internal/ulog"
)

// lockedBuffer collects log lines from the collector.
type lockedBuffer struct{ testutil.LockedBuffer }

func (l *lockedBuffer) lines() []string {
	s := strings.TrimSpace(l.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// TestReplicationUnusableLog: a missing, short, foreign, unreadable or
// unstable update log is a metric and one log line per change, never a
// failed scrape or a crash; a real header reads back as kproplog printed
// it (testdata/ulog).
func TestReplicationUnusableLog(t *testing.T) {
	dir := t.TempDir()
	ulogPath := filepath.Join(dir, "principal.ulog")
	conf := "[realms]\n\tPERF.TEST = {\n\t\tiprop_enable = true\n\t\tiprop_logfile = " + ulogPath + "\n\t}\n"
	if err := os.WriteFile(filepath.Join(dir, "kdc.conf"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.ProcFS = filepath.Join(fixtureDir, "proc")
	cfg.Identity.SystemdDir = noSystemd
	cfg.Process, cfg.Network, cfg.KDCConf = false, false, false
	cfg.KDCConfPath, cfg.Krb5ConfPath = filepath.Join(dir, "kdc.conf"), filepath.Join(dir, "none.conf")
	cfg.DumpFile = filepath.Join(dir, "replica_datatrans")
	var logs lockedBuffer
	_, reg := newTestCollectorLogging(t, cfg, log.NewLogfmtLogger(&logs))
	real, err := os.ReadFile("testdata/ulog/primary.ulog-header")
	if err != nil {
		t.Fatal(err)
	}
	unstable := append([]byte(nil), real...)
	unstable[36] = 2 // kdb_state = KDB_UNSTABLE

	steps := []struct {
		name   string
		setup  func()
		reason string // "" for a usable log
		state  string
	}{
		{"missing", func() {}, "missing", ""},
		{"missing again", func() {}, "missing", ""},
		{"short", func() { write(t, ulogPath, real[:12]) }, "short", ""},
		{"bad magic", func() { write(t, ulogPath, make([]byte, 4096)) }, "bad_magic", ""},
		{"real", func() { write(t, ulogPath, real) }, "", "stable"},
		{"unstable", func() { write(t, ulogPath, unstable) }, "", "unstable"},
		{"a directory", func() {
			os.Remove(ulogPath)
			if err := os.Mkdir(ulogPath, 0o700); err != nil {
				t.Fatal(err)
			}
		}, "unreadable", ""},
		{"a FIFO (opening it must not hang the scrape)", func() {
			os.Remove(ulogPath)
			if err := syscall.Mkfifo(ulogPath, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "unreadable", ""},
	}
	wantLines := 0
	prev := "none"
	for _, st := range steps {
		st.setup()
		s := gather(t, reg)
		if v := s.Value("krb5_exporter_collector_scrape_success", "collector", "replication"); v != 1 {
			t.Errorf("%s: scrape failed", st.name)
		}
		if v := s.Value("krb5_iprop_ulog_up", "realm", "PERF.TEST"); v != boolFloat(st.reason == "") {
			t.Errorf("%s: ulog_up = %v", st.name, v)
		}
		for _, r := range ulogErrorReasons {
			if v := s.Value("krb5_iprop_ulog_error", "realm", "PERF.TEST", "reason", r); v != boolFloat(r == st.reason) {
				t.Errorf("%s: ulog_error{reason=%q} = %v", st.name, r, v)
			}
		}
		if st.reason != prev && (st.reason != "" || prev != "none") {
			wantLines++
		}
		prev = st.reason
		if got := logs.lines(); len(got) != wantLines {
			t.Errorf("%s: %d log lines, want %d: %q", st.name, len(got), wantLines, got)
		}
		if st.reason != "" {
			if n := s.Count("krb5_iprop_ulog_last_serial"); n != 0 {
				t.Errorf("%s: serial reported for an unusable log", st.name)
			}
			continue
		}
		if v := s.Value("krb5_iprop_ulog_state", "realm", "PERF.TEST", "state", st.state); v != 1 {
			t.Errorf("%s: state %s = %v", st.name, st.state, v)
		}
		// As kproplog printed for this header (testdata/ulog/primary.kproplog-h.txt).
		for metric, want := range map[string]float64{
			"krb5_iprop_ulog_version": 1, "krb5_iprop_ulog_block_size_bytes": 2048, "krb5_iprop_ulog_entries": 5,
			"krb5_iprop_ulog_first_serial": 1, "krb5_iprop_ulog_last_serial": 5,
			"krb5_iprop_ulog_first_update_time_seconds": 1796092277.694997,
			"krb5_iprop_ulog_last_update_time_seconds":  1796092589.110517,
		} {
			if got := s.Value(metric, "realm", "PERF.TEST"); got != want {
				t.Errorf("%s: %s = %v, want %v", st.name, metric, got, want)
			}
		}
	}
	for _, l := range logs.lines() {
		if !strings.Contains(l, ulogPath) {
			t.Errorf("log line without the path: %s", l)
		}
	}

	// Markers: one per replica host, strays in the directory ignored (a
	// name that is no host name is never a label value).
	for _, name := range []string{"replica_datatrans.kdc2.example.com.last_prop", "replica_datatrans.10.0.0.3.last_prop",
		"replica_datatrans.\xff\xfe.last_prop", "replica_datatrans.a b.last_prop", "replica_datatrans..last_prop",
		"other.kdc4.last_prop", "replica_datatrans.dump_ok"} {
		write(t, filepath.Join(dir, name), []byte{0})
	}
	s := gather(t, reg)
	if n := s.Count("krb5_kprop_last_success_time_seconds"); n != 2 {
		t.Errorf("%d replicas, want kdc2.example.com and 10.0.0.3", n)
	}
	for _, r := range []string{"kdc2.example.com", "10.0.0.3"} {
		fi, _ := os.Stat(filepath.Join(dir, "replica_datatrans."+r+".last_prop"))
		if v := s.Value("krb5_kprop_last_success_time_seconds", "replica", r); v != float64(fi.ModTime().UnixNano())/1e9 {
			t.Errorf("%s: %v, mtime %v", r, v, fi.ModTime())
		}
	}
	if _, ok := s.Find("krb5_kprop_dump_time_seconds"); !ok {
		t.Error("no dump time")
	}
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkReplicationScrape: reading a real update log's header, one
// gather of the replication collector (the header, a dump marker and a
// last_prop file, plus the shared process scan and profile check) side by
// side with what it replaces, running kproplog -h on the same log.
//
//	go test ./collector -run '^$' -bench Replication -benchtime 200x
func BenchmarkReplicationScrape(b *testing.B) {
	dir := b.TempDir()
	ulogPath := filepath.Join(dir, "principal.ulog")
	real, err := os.ReadFile("testdata/ulog/primary.ulog-header")
	if err != nil {
		b.Fatal(err)
	}
	// A full-size log: the header, then 1000 slots of 2048 bytes.
	write(&testing.T{}, ulogPath, append(real, make([]byte, 1000*2048)...))
	kdcConf := filepath.Join(dir, "kdc.conf")
	conf := "[realms]\n\tPERF.TEST = {\n\t\tdatabase_name = " + filepath.Join(dir, "principal") +
		"\n\t\tiprop_enable = true\n\t\tiprop_logfile = " + ulogPath + "\n\t}\n"
	if err := os.WriteFile(kdcConf, []byte(conf), 0o600); err != nil {
		b.Fatal(err)
	}
	krb5Conf := filepath.Join(dir, "krb5.conf")
	if err := os.WriteFile(krb5Conf, []byte("[libdefaults]\n\tdefault_realm = PERF.TEST\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	dump := filepath.Join(dir, "replica_datatrans")
	for _, f := range []string{dump + ".dump_ok", dump + ".kdc2.last_prop"} {
		if err := os.WriteFile(f, []byte{0}, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("header", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ulog.ReadFile(ulogPath); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("collector", func(b *testing.B) {
		cfg := DefaultConfig()
		cfg.ProcFS = filepath.Join(fixtureDir, "proc")
		cfg.Identity.SystemdDir = noSystemd
		cfg.Process, cfg.Network, cfg.KDCConf = false, false, false
		cfg.KDCConfPath, cfg.Krb5ConfPath, cfg.DumpFile = kdcConf, krb5Conf, dump
		c, err := New(nil, cfg)
		if err != nil {
			b.Fatal(err)
		}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := reg.Gather(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("kproplog", func(b *testing.B) {
		bin, err := exec.LookPath("kproplog")
		if err != nil {
			if bin, err = exec.LookPath("/usr/sbin/kproplog"); err != nil {
				b.Skip("kproplog not installed")
			}
		}
		for b.Loop() {
			cmd := exec.Command(bin, "-h")
			cmd.Env = []string{"KRB5_KDC_PROFILE=" + kdcConf, "KRB5_CONFIG=" + krb5Conf}
			if out, err := cmd.CombinedOutput(); err != nil {
				b.Fatalf("%v: %s", err, out)
			}
		}
	})
}

// TestMarkerListFollowsDirectory: the kept listing of the .last_prop files
// against the directory listed afresh by the test, as files come and go,
// also when the directory's mtime is set back to what it was (its ctime
// still moves) and while its mtime is recent (kept only once it is old).
func TestMarkerListFollowsDirectory(t *testing.T) {
	dir := t.TempDir()
	re := regexp.MustCompile(`^dump\.([a-z0-9.]+)\.last_prop$`)
	want := func() []string {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range entries {
			if m := re.FindStringSubmatch(e.Name()); m != nil {
				out = append(out, m[1])
			}
		}
		return out
	}
	var l markerList
	check := func(step string) {
		t.Helper()
		names, ok := l.list(dir, "dump")
		if !ok {
			t.Fatalf("%s: directory not listed", step)
		}
		var got []string
		for _, m := range names {
			got = append(got, m.replica)
		}
		if w := want(); !slices.Equal(got, w) {
			t.Errorf("%s: replicas %q, the directory holds %q", step, got, w)
		}
	}
	old := time.Now().Add(-time.Hour)
	age := func() {
		if err := os.Chtimes(dir, old, old); err != nil {
			t.Fatal(err)
		}
	}
	write(t, filepath.Join(dir, "dump.kdc2.last_prop"), []byte{0})
	write(t, filepath.Join(dir, "dump.dump_ok"), []byte{0})
	age()
	check("one replica")
	if !l.ok {
		t.Fatal("a listing of a directory unchanged for an hour is not kept")
	}
	write(t, filepath.Join(dir, "dump.kdc3.last_prop"), []byte{0})
	check("a second replica")
	if l.ok {
		t.Error("the listing of a directory changed just now is kept")
	}
	age()
	check("aged")
	// Removed, and the mtime set back to the hour-old one: only the ctime
	// tells.
	if err := os.Remove(filepath.Join(dir, "dump.kdc2.last_prop")); err != nil {
		t.Fatal(err)
	}
	age()
	check("removed, mtime restored")
	write(t, filepath.Join(dir, "dump.kdc4.last_prop"), []byte{0})
	age()
	check("added, mtime restored")
}
