package prober

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// lineLog keeps the daemon's log lines for the test to count.
type lineLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *lineLog) Log(kv ...any) error {
	var b strings.Builder
	log.NewLogfmtLogger(&b).Log(kv...)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, b.String())
	return nil
}

func (l *lineLog) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// A keytab that becomes readable by everyone while the daemon runs (a
// chmod: no new content) is said once in the log and shown by the gauge;
// so is its repair (issue 10 item 11).
func TestKeytabTurnsWorldReadable(t *testing.T) {
	r := upRealm(t, realm.Options{Users: -1, Services: 1, Fillers: -1, NoKadmind: true})
	kt := filepath.Join(t.TempDir(), "probe.keytab")
	if err := os.WriteFile(kt, testutil.MustRead(t, r.ProbeKeytab), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := probeConfig(r)
	cfg.Probes = cfg.Probes[:1]
	mod := cfg.Modules["default"]
	mod.Keytab = kt
	cfg.Modules["default"] = mod
	logs := &lineLog{}
	m := NewManager(logs, prometheus.NewRegistry())
	t.Cleanup(m.Stop)
	if err := m.ApplyConfig(cfg); err != nil {
		t.Fatal(err)
	}
	pm := m.metrics
	successes := func() float64 { return counter(pm.total, "kdc-udp", ExchangeAS, krb5.ClassSuccess) }
	testutil.Eventually(t, 20*time.Second, "a first login", func() bool { return successes() >= 1 })
	if gauge(pm.worldReadable, "kdc-udp") != 0 {
		t.Fatal("0600 keytab flagged")
	}

	const became, repaired = "became readable by every local user", "no longer readable by every local user"
	if err := os.Chmod(kt, 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "the chmod to be noticed", func() bool {
		return gauge(pm.worldReadable, "kdc-udp") == 1 && logs.count(became) == 1
	})
	// Two more probes: still one line.
	n := successes()
	testutil.Eventually(t, 20*time.Second, "two more probes", func() bool { return successes() >= n+2 })
	if c := logs.count(became); c != 1 {
		t.Errorf("%d lines say the keytab became readable, want 1", c)
	}
	if err := os.Chmod(kt, 0o600); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "the repair to be noticed", func() bool {
		return gauge(pm.worldReadable, "kdc-udp") == 0 && logs.count(repaired) == 1
	})
	if n := logs.count(kt); n != 0 {
		t.Errorf("%d log lines name the keytab", n)
	}
}
