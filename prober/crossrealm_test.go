package prober

import (
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// crossRealmConfig probes a's KDC for b's service through the trust
// every second; dead is listed first among b's KDCs, as a KDC of b that is
// down, so every probe also shows the move to the next one.
func crossRealmConfig(a, b *realm.Realm, dead string) *config.Config {
	mod := config.ProbeModule{
		Realm: a.Realm, Client: a.ProbePrincipal, Keytab: a.ProbeKeytab, Service: b.Service(1),
		Timeout: 2 * time.Second, RealmKDCs: map[string][]string{b.Realm: {dead, b.KDCAddr}},
		AllowedKDCs: []string{a.KDCAddr, b.KDCAddr, dead},
	}
	return &config.Config{
		Modules: map[string]config.ProbeModule{"xrealm": mod},
		Probes:  []config.ProbeTarget{{Name: "trust", Address: a.KDCAddr, Module: "xrealm", Interval: time.Second}},
	}
}

// TestManagerCrossRealm: the continuous probe walks the trust between
// two real KDCs (b's KDC log is the witness), and a rekey of krbtgt/B@A
// in a alone shows as trust_key_mismatch at remote_tgs while the login
// and the referral still succeed.
func TestManagerCrossRealm(t *testing.T) {
	a, b := realmtest.Trusted(t, realm.Options{})
	reg := prometheus.NewPedanticRegistry()
	var logs testutil.LockedBuffer
	m := NewManager(log.NewLogfmtLogger(&logs), reg)
	t.Cleanup(m.Stop)
	if err := m.ApplyConfig(crossRealmConfig(a, b, realmtest.DeadAddr(t))); err != nil {
		t.Fatal(err)
	}
	pm := m.metrics
	testutil.Eventually(t, 20*time.Second, "the trust's probe to succeed", func() bool {
		return gauge(pm.success, "trust", ExchangeRemoteTGS) == 1
	})
	for _, ex := range []string{ExchangeAS, ExchangeReferral, ExchangeRemoteTGS} {
		if gauge(pm.success, "trust", ex) != 1 || histogramCount(t, pm.duration, "trust", ex, "udp") == 0 {
			t.Errorf("%s: success %v, %d durations", ex, gauge(pm.success, "trust", ex), histogramCount(t, pm.duration, "trust", ex, "udp"))
		}
	}
	if n := counter(pm.total, "trust", ExchangeTGS, krb5.ClassSuccess); n != 0 {
		t.Errorf("a cross-realm module ran %v local TGS exchanges", n)
	}
	if v := gauge(pm.info, "trust", a.Realm, "udp", b.Realm); v != 1 {
		t.Errorf("krb5_probe_target_info{module_realm=%q,transport=\"udp\",service_realm=%q} = %v", a.Realm, b.Realm, v)
	}
	issued := regexp.MustCompile(`TGS_REQ .*: ISSUE: .* ` + regexp.QuoteMeta(a.ProbePrincipal+" for "+b.Service(1)))
	if log, err := os.ReadFile(b.KDCLog); err != nil || !issued.Match(log) {
		t.Errorf("%s's KDC log shows no ticket for the probe (%v):\n%s", b.Realm, err, log)
	}

	realmtest.Kadmin(t, a, "cpw -randkey krbtgt/"+b.Realm+"@"+a.Realm)
	testutil.Eventually(t, 20*time.Second, "the rekey on one side to be seen", func() bool {
		return counter(pm.total, "trust", ExchangeRemoteTGS, krb5.ClassTrustKeyMismatch) > 0
	})
	if gauge(pm.success, "trust", ExchangeRemoteTGS) != 0 || gauge(pm.success, "trust", ExchangeAS) != 1 || gauge(pm.success, "trust", ExchangeReferral) != 1 {
		t.Errorf("after the rekey: as %v, referral %v, remote_tgs %v; want 1, 1, 0", gauge(pm.success, "trust", ExchangeAS),
			gauge(pm.success, "trust", ExchangeReferral), gauge(pm.success, "trust", ExchangeRemoteTGS))
	}
	if !strings.Contains(logs.String(), "result=trust_key_mismatch") {
		t.Errorf("no log line for the broken trust:\n%s", logs.String())
	}
}

// TestProbeHandlerCrossRealm: /probe walks the trust, and refuses a module
// whose realm_kdcs hold a KDC that allowed_kdcs does not allow.
func TestProbeHandlerCrossRealm(t *testing.T) {
	a, b := realmtest.Trusted(t, realm.Options{})
	cfg := crossRealmConfig(a, b, b.KDCAddr)
	srv := probeServer(t, cfg)
	code, body := get(t, probeURL(srv, "target", a.KDCAddr, "module", "xrealm"), nil)
	for _, want := range []string{"probe_success 1", `probe_krb5_exchange_success{exchange="referral"} 1`,
		`probe_krb5_exchange_success{exchange="remote_tgs"} 1`, `probe_krb5_result{exchange="remote_tgs",result="success"} 1`} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("/probe: %d, want %q in:\n%s", code, want, body)
		}
	}
	mod := cfg.Modules["xrealm"]
	mod.AllowedKDCs = []string{a.KDCAddr}
	cfg.Modules["xrealm"] = mod
	code, body = get(t, probeURL(srv, "target", a.KDCAddr, "module", "xrealm"), nil)
	if code != http.StatusForbidden || !strings.Contains(body, b.KDCAddr) {
		t.Errorf("/probe with %s not allowed: %d %s", b.KDCAddr, code, body)
	}
}
