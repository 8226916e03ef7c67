package prober

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"

	"github.com/go-kit/log"
	"github.com/go-logfmt/logfmt"
	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// probeConfig is a configuration probing the realm's KDC with its probe
// principal over UDP and TCP, every second.
func probeConfig(r *realm.Realm) *config.Config {
	mod := config.ProbeModule{
		Realm: r.Realm, Client: r.ProbePrincipal, Keytab: r.ProbeKeytab,
		Service: r.Service(1), Timeout: 2 * time.Second, AllowedKDCs: []string{r.KDCAddr},
	}
	tcp := mod
	tcp.Transport = "tcp"
	return &config.Config{
		Modules: map[string]config.ProbeModule{"default": mod, "tcp": tcp},
		Probes: []config.ProbeTarget{
			{Name: "kdc-udp", Address: r.KDCAddr, Module: "default", Interval: time.Second},
			{Name: "kdc-tcp", Address: r.KDCAddr, Module: "tcp", Interval: time.Second},
		},
	}
}

func gauge(v *prometheus.GaugeVec, labels ...string) float64 {
	return promtest.ToFloat64(v.WithLabelValues(labels...))
}

func counter(v *prometheus.CounterVec, labels ...string) float64 {
	return promtest.ToFloat64(v.WithLabelValues(labels...))
}

func histogramCount(t *testing.T, v *prometheus.HistogramVec, labels ...string) uint64 {
	t.Helper()
	var m dto.Metric
	if err := v.WithLabelValues(labels...).(prometheus.Histogram).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

func TestManagerProbesAndRecovers(t *testing.T) {
	r := upRealm(t, realm.Options{})
	reg := prometheus.NewPedanticRegistry()
	var logs testutil.LockedBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the manager's log:\n%s", logs.String())
		}
	})
	m := NewManager(log.NewLogfmtLogger(&logs), reg)
	t.Cleanup(m.Stop)
	cfg := probeConfig(r)
	if err := m.ApplyConfig(cfg); err != nil {
		t.Fatal(err)
	}
	pm := m.metrics
	up := func(target string) func() bool {
		return func() bool {
			return gauge(pm.success, target, ExchangeAS) == 1 && gauge(pm.success, target, ExchangeTGS) == 1
		}
	}
	testutil.Eventually(t, 20*time.Second, "the first probes to succeed", func() bool { return up("kdc-udp")() && up("kdc-tcp")() })

	for _, tr := range []string{"udp", "tcp"} {
		target := "kdc-" + tr
		if n := histogramCount(t, pm.duration, target, ExchangeAS, tr); n == 0 {
			t.Errorf("%s: no AS duration observed", target)
		}
		if n := histogramCount(t, pm.duration, target, ExchangeTGS, tr); n == 0 {
			t.Errorf("%s: no TGS duration observed", target)
		}
		if histogramCount(t, pm.phase, target, krb5.PhasePreauthRequired) == 0 || histogramCount(t, pm.phase, target, krb5.PhaseSPAKEChallenge) == 0 ||
			histogramCount(t, pm.phase, target, krb5.PhaseASRep) == 0 {
			t.Errorf("%s: AS phases not observed", target)
		}
		// The harness KDC offers SPAKE: the probes take it, as kinit.
		if gauge(pm.method, target, krb5.MethodSPAKE) != 1 || gauge(pm.method, target, krb5.MethodEncTimestamp) != 0 {
			t.Errorf("%s: preauth method spake %v, encrypted_timestamp %v", target,
				gauge(pm.method, target, krb5.MethodSPAKE), gauge(pm.method, target, krb5.MethodEncTimestamp))
		}
		if counter(pm.total, target, ExchangeAS, krb5.ClassSuccess) < 1 || gauge(pm.lastSuccess, target, ExchangeTGS) < float64(time.Now().Add(-time.Minute).Unix()) {
			t.Errorf("%s: success not counted", target)
		}
		if off := gauge(pm.clockOffset, target); off < -2 || off > 2 { // see TestLoginAndServiceTicket
			t.Errorf("%s: clock offset %v on the same host", target, off)
		}
	}
	expected := `
# HELP krb5_probe_etype Encryption type number of the last successful exchange, per part as the KDC logs them: reply (encrypted part of the reply), ticket (the ticket), session (the new session key). 20 = aes256-cts-hmac-sha384-192, 19 = aes128-cts-hmac-sha256-128, 18 = aes256-cts-hmac-sha1-96, 17 = aes128-cts-hmac-sha1-96.
# TYPE krb5_probe_etype gauge
krb5_probe_etype{exchange="as",part="reply",target="kdc-tcp"} 20
krb5_probe_etype{exchange="as",part="reply",target="kdc-udp"} 20
krb5_probe_etype{exchange="as",part="session",target="kdc-tcp"} 20
krb5_probe_etype{exchange="as",part="session",target="kdc-udp"} 20
krb5_probe_etype{exchange="as",part="ticket",target="kdc-tcp"} 20
krb5_probe_etype{exchange="as",part="ticket",target="kdc-udp"} 20
krb5_probe_etype{exchange="tgs",part="reply",target="kdc-tcp"} 20
krb5_probe_etype{exchange="tgs",part="reply",target="kdc-udp"} 20
krb5_probe_etype{exchange="tgs",part="session",target="kdc-tcp"} 20
krb5_probe_etype{exchange="tgs",part="session",target="kdc-udp"} 20
krb5_probe_etype{exchange="tgs",part="ticket",target="kdc-tcp"} 20
krb5_probe_etype{exchange="tgs",part="ticket",target="kdc-udp"} 20
# HELP krb5_probe_keytab_world_readable 1 when the target's keytab or password file is readable by every local user (chmod o-r it).
# TYPE krb5_probe_keytab_world_readable gauge
krb5_probe_keytab_world_readable{target="kdc-tcp"} 0
krb5_probe_keytab_world_readable{target="kdc-udp"} 0
`
	if err := promtest.GatherAndCompare(reg, strings.NewReader(expected), "krb5_probe_etype", "krb5_probe_keytab_world_readable"); err != nil {
		t.Error(err)
	}
	if problems, err := promtest.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("metric lint: %v %v", problems, err)
	}

	// The KDC stops: the next probes fail as connection_refused (ICMP port
	// unreachable over UDP, a reset over TCP) and the exporter keeps probing.
	refused0 := counter(pm.total, "kdc-udp", ExchangeAS, krb5.ClassConnectionRefused)
	refusedBefore := map[string]float64{}
	for _, target := range []string{"kdc-udp", "kdc-tcp"} {
		for _, ex := range []string{ExchangeAS, ExchangeTGS} {
			refusedBefore[target+" "+ex] = counter(pm.total, target, ex, krb5.ClassConnectionRefused)
		}
	}
	if err := r.StopKDC(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "probes to notice the KDC is down", func() bool {
		return gauge(pm.success, "kdc-udp", ExchangeAS) == 0 && gauge(pm.success, "kdc-tcp", ExchangeAS) == 0 &&
			counter(pm.total, "kdc-udp", ExchangeAS, krb5.ClassConnectionRefused) > refused0 &&
			counter(pm.total, "kdc-tcp", ExchangeAS, krb5.ClassConnectionRefused) > 0 &&
			gauge(pm.success, "kdc-udp", ExchangeTGS) == 0
	})
	// The TGT from before is still valid, so TGS was tried and refused too.
	if counter(pm.total, "kdc-udp", ExchangeTGS, krb5.ClassConnectionRefused) == 0 {
		t.Error("TGS not counted as connection_refused while the KDC was down")
	}

	// A second failed probe of each, so that a repeat would be logged.
	testutil.Eventually(t, 20*time.Second, "two failed probes of each target and exchange", func() bool {
		for _, target := range []string{"kdc-udp", "kdc-tcp"} {
			for _, ex := range []string{ExchangeAS, ExchangeTGS} {
				if counter(pm.total, target, ex, krb5.ClassConnectionRefused) < refusedBefore[target+" "+ex]+2 {
					return false
				}
			}
		}
		return true
	})

	if err := r.StartKDC(testutil.Context(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "probes to recover after the KDC restarted", func() bool { return up("kdc-udp")() && up("kdc-tcp")() })

	// The outage is logged as it changed, not once per probe: per target
	// and exchange a failure line when the class changed (the KDC down:
	// connection_refused at least), and one recovery line naming the last.
	testutil.Eventually(t, 10*time.Second, "the recoveries to be logged", func() bool {
		return strings.Count(logs.String(), `msg="probe recovered"`) == 4
	})
	for _, target := range []string{"kdc-udp", "kdc-tcp"} {
		for _, ex := range []string{ExchangeAS, ExchangeTGS} {
			lines := stateLines(t, logs.String(), target, ex)
			var classes []string
			for i, l := range lines[:len(lines)-1] {
				if l["msg"] != "probe failed" || (i > 0 && l["result"] == lines[i-1]["result"]) {
					t.Errorf("%s %s: line %d of %v is not a changed failure", target, ex, i, lines)
				}
				classes = append(classes, l["result"])
			}
			rec := lines[len(lines)-1]
			if len(classes) == 0 || !slices.Contains(classes, krb5.ClassConnectionRefused) || rec["msg"] != "probe recovered" || rec["after"] != classes[len(classes)-1] {
				t.Errorf("%s %s: state lines %v, want changed failures (connection_refused among them) and one recovery after the last", target, ex, lines)
			}
		}
	}
}

// stateLines returns the probe failed and probe recovered lines of one
// target's exchange, in order, as key-value maps.
func stateLines(t *testing.T, logs, target, ex string) []map[string]string {
	t.Helper()
	var out []map[string]string
	d := logfmt.NewDecoder(strings.NewReader(logs))
	for d.ScanRecord() {
		kv := map[string]string{}
		for d.ScanKeyval() {
			kv[string(d.Key())] = string(d.Value())
		}
		if (kv["msg"] == "probe failed" || kv["msg"] == "probe recovered") && kv["probe"] == target && kv["exchange"] == ex {
			out = append(out, kv)
		}
	}
	if err := d.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatalf("%s %s: no state lines in the log", target, ex)
	}
	return out
}

func TestManagerReload(t *testing.T) {
	r := upRealm(t, realm.Options{})
	reg := prometheus.NewRegistry()
	m := NewManager(testutil.Logger(t), reg)
	defer m.Stop()
	cfg := probeConfig(r)
	if err := m.ApplyConfig(cfg); err != nil {
		t.Fatal(err)
	}
	pm := m.metrics
	testutil.Eventually(t, 20*time.Second, "first probes", func() bool {
		return counter(pm.total, "kdc-udp", ExchangeAS, krb5.ClassSuccess) >= 1 && counter(pm.total, "kdc-tcp", ExchangeAS, krb5.ClassSuccess) >= 1
	})
	udpLoop := m.loops["kdc-udp"]

	// Drop kdc-tcp; kdc-udp is unchanged and keeps its loop and counters;
	// a new target whose keytab does not exist yet runs anyway and says
	// result="keytab" until the file appears.
	cfg2 := probeConfig(r)
	cfg2.Probes = cfg2.Probes[:1]
	bad := cfg2.Modules["default"]
	late := filepath.Join(t.TempDir(), "late.keytab")
	bad.Keytab = late
	cfg2.Modules["bad"] = bad
	cfg2.Probes = append(cfg2.Probes, config.ProbeTarget{Name: "late", Address: r.KDCAddr, Module: "bad", Interval: time.Second})
	if err := m.ApplyConfig(cfg2); err != nil {
		t.Fatalf("reload with a missing keytab: %v", err)
	}
	if m.loops["kdc-udp"] != udpLoop {
		t.Error("an unchanged target was restarted")
	}
	if _, ok := m.loops["kdc-tcp"]; ok {
		t.Error("a removed target still runs")
	}
	if _, ok := m.loops["late"]; !ok {
		t.Fatal("the target with a missing keytab does not run")
	}
	testutil.Eventually(t, 20*time.Second, `result="keytab" for the missing keytab`, func() bool {
		return counter(pm.total, "late", ExchangeAS, krb5.ClassKeytab) >= 1
	})
	if gauge(pm.success, "late", ExchangeAS) != 0 {
		t.Error("probe_success not 0 without keys")
	}
	if n := promtest.CollectAndCount(pm.total); n == 0 {
		t.Fatal("no series left")
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "target" && l.GetValue() == "kdc-tcp" {
					t.Errorf("%s still has a series for %s", mf.GetName(), l.GetValue())
				}
			}
		}
	}
	if err := os.WriteFile(late, testutil.MustRead(t, r.ProbeKeytab), 0o600); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "the late keytab to be loaded", func() bool {
		return counter(pm.total, "late", ExchangeAS, krb5.ClassSuccess) >= 1 && gauge(pm.success, "late", ExchangeAS) == 1
	})

	// A changed module restarts the target with the new settings; its
	// keytab here is readable by everyone: without allow_readable_keys it
	// does not load (the configuration check's refusal, which the daemon
	// leaves to the probes), not even on a later probe.
	open := filepath.Join(t.TempDir(), "open.keytab")
	if err := os.WriteFile(open, testutil.MustRead(t, r.ProbeKeytab), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg3 := probeConfig(r)
	cfg3.Probes = cfg3.Probes[:1]
	mod := cfg3.Modules["default"]
	mod.PreauthUpfront = true
	mod.Keytab = open
	cfg3.Modules["default"] = mod
	if err := m.ApplyConfig(cfg3); err != nil {
		t.Fatal(err)
	}
	if m.loops["kdc-udp"] == udpLoop {
		t.Error("a changed target was not restarted")
	}
	testutil.Eventually(t, 20*time.Second, `result="keytab" for a keytab others can read`, func() bool {
		return counter(pm.total, "kdc-udp", ExchangeAS, krb5.ClassKeytab) >= 2
	})
	if gauge(pm.success, "kdc-udp", ExchangeAS) != 0 {
		t.Error("a keytab others can read was used")
	}
	// With allow_readable_keys it loads, which is said once and shown.
	mod.AllowReadableKeys = true
	cfg3.Modules["default"] = mod
	if err := m.ApplyConfig(cfg3); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "a probe with pre-authentication up front", func() bool {
		return counter(pm.total, "kdc-udp", ExchangeAS, krb5.ClassSuccess) >= 1
	})
	if gauge(pm.worldReadable, "kdc-udp") != 1 {
		t.Error("world-readable keytab not flagged")
	}

	// Loops stopped by the reloads are gone (their goroutines end just
	// after their done channels close): one goroutine per target.
	testutil.Eventually(t, 10*time.Second, "one probe loop goroutine per target", func() bool { return probeLoops() == len(m.loops) })
	m.Stop()
	if err := m.ApplyConfig(cfg); err == nil {
		t.Error("ApplyConfig after Stop succeeded")
	}
	// Stop waits for the loops; a loop's goroutine ends just after it
	// closed its done channel, so its last frame may still be on a stack
	// when Stop returns: wait for that, bounded.
	testutil.Eventually(t, 10*time.Second, "no probe loop goroutine after Stop", func() bool { return probeLoops() == 0 })
}

// A dead KDC probed by the manager: the loop keeps running, each probe is
// bounded by the module's timeout, and Stop does not wait for a timeout.
func TestManagerStopIsPrompt(t *testing.T) {
	hole := testutil.BlackHole(t)
	kt := filepath.Join(t.TempDir(), "x.keytab")
	testutil.WriteKeytab(t, kt, "probe@PERF.TEST", "correct-horse-battery-staple")
	cfg := &config.Config{
		Modules: map[string]config.ProbeModule{"default": {Realm: "PERF.TEST", Client: "probe", Keytab: kt, Timeout: time.Hour}},
		Probes:  []config.ProbeTarget{{Name: "hole", Address: hole, Module: "default", Interval: time.Second}},
	}
	m := NewManager(testutil.Logger(t), prometheus.NewRegistry())
	if err := m.ApplyConfig(cfg); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the probe is now waiting for a reply
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done := make(chan struct{})
	go func() { m.Stop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Stop waited for an hour-long probe timeout")
	}
}

// probeLoops counts the goroutines running a probe loop (Manager.run).
func probeLoops() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "prober.(*Manager).run(")
		}
		buf = make([]byte, 2*len(buf))
	}
}
