package prober

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/probestatus"
	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// Status shows each continuous target's last probes, newest first, with
// the probe's own debug log: the KDC's real answer for a working target,
// the failure's class for a KDC that is not there.
func TestStatusOfRealProbes(t *testing.T) {
	r := upRealm(t, realm.Options{Users: 1, Services: 1, Fillers: -1})
	m := NewManager(testutil.Logger(t), prometheus.NewRegistry())
	t.Cleanup(m.Stop)
	cfg := probeConfig(r)
	cfg.Probes = append(cfg.Probes[:1], config.ProbeTarget{Name: "dead", Address: realmtest.DeadAddr(t), Module: "default", Interval: time.Second})
	if err := m.ApplyConfig(cfg); err != nil {
		t.Fatal(err)
	}
	var st []TargetStatus
	testutil.Eventually(t, 30*time.Second, "two probes of each target", func() bool {
		st = m.Status()
		return len(st) == 2 && len(st[0].Recent) >= 2 && len(st[1].Recent) >= 2
	})
	dead, ok := st[0], st[1]
	if dead.Name != "dead" || ok.Name != "kdc-udp" {
		t.Fatalf("targets not sorted by name: %q, %q", dead.Name, ok.Name)
	}
	if !ok.Recent[1].Start.Before(ok.Recent[0].Start) {
		t.Errorf("not newest first: %v then %v", ok.Recent[0].Start, ok.Recent[1].Start)
	}
	last := ok.Recent[0]
	if !last.Success || last.AS != "success" || last.TGS != "success" || last.Duration <= 0 {
		t.Errorf("working target: %+v", last)
	}
	// Each exchange's own time is within the probe's, and the two fit in it.
	if last.Login <= 0 || last.Ticket <= 0 || last.Login+last.Ticket > last.Duration {
		t.Errorf("working target: login %v and ticket %v against the probe's %v", last.Login, last.Ticket, last.Duration)
	}
	if !ok.FailingSince.IsZero() {
		t.Errorf("working target failing since %v", ok.FailingSince)
	}
	// The dead target has failed since its first probe: the oldest it has.
	if first := dead.Recent[len(dead.Recent)-1].Start; !dead.FailingSince.Equal(first) {
		t.Errorf("dead target failing since %v, its first probe started %v", dead.FailingSince, first)
	}
	for _, want := range []string{"msg=probing", `msg="TGT issued"`, `msg="service ticket issued"`, "service=" + r.Service(1)} {
		if !strings.Contains(last.Log, want) {
			t.Errorf("working target's log lacks %q:\n%s", want, last.Log)
		}
	}
	d := dead.Recent[0]
	if d.Success || d.AS == "success" || d.TGS != ClassNoTGT || d.Err == "" || !strings.Contains(d.Log, `msg="login failed"`) {
		t.Errorf("dead target: %+v", d)
	}
}

// FailingSince is the first failure after the last success, however many
// failures followed: older than what the history still holds.
func TestHistoryFailingSince(t *testing.T) {
	var h history
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }
	h.add(ProbeRecord{Start: at(0), Success: true})
	if !h.failingSince().IsZero() {
		t.Errorf("after a success: failing since %v", h.failingSince())
	}
	for i := 1; i <= 3*HistoryProbes; i++ {
		h.add(ProbeRecord{Start: at(i)})
	}
	if got := h.failingSince(); !got.Equal(at(1)) {
		t.Errorf("failing since %v, the first failure was %v", got, at(1))
	}
	h.add(ProbeRecord{Start: at(100), Success: true})
	h.add(ProbeRecord{Start: at(101)})
	if got := h.failingSince(); !got.Equal(at(101)) {
		t.Errorf("after a success and a failure: since %v, want %v", got, at(101))
	}
}

// The leaf package's success class is the engine's.
func TestClassSuccessIsTheEngines(t *testing.T) {
	if probestatus.ClassSuccess != krb5.ClassSuccess {
		t.Errorf("probestatus.ClassSuccess %q, krb5.ClassSuccess %q", probestatus.ClassSuccess, krb5.ClassSuccess)
	}
}

// The history keeps the last HistoryProbes records, each log cut at
// MaxProbeLogBytes, whatever the probes write.
func TestHistoryBounded(t *testing.T) {
	var h history
	for i := range 3 * HistoryProbes {
		h.add(ProbeRecord{Duration: time.Duration(i)})
	}
	got := h.recent()
	if len(got) != HistoryProbes || got[0].Duration != 3*HistoryProbes-1 || got[HistoryProbes-1].Duration != 2*HistoryProbes {
		t.Errorf("after %d records: %d kept, newest %v, oldest %v", 3*HistoryProbes, len(got), got[0].Duration, got[len(got)-1].Duration)
	}
	var l probeLog
	logger := newProbeLogger(&l)
	for range 1000 {
		logger.Log("msg", strings.Repeat("x", 100))
	}
	s := l.take()
	if len(s) > MaxProbeLogBytes+64 || !strings.HasSuffix(s, "bytes]") {
		t.Errorf("log of %d bytes, want at most %d and the cut said", len(s), MaxProbeLogBytes)
	}
	if l.take() != "" {
		t.Error("take does not empty the log")
	}
}
