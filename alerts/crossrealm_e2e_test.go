package alerts

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestCrossRealmAlertEndToEnd runs Krb5CrossRealmTrustBroken (for: 2s) in a
// real Prometheus scraping a real exporter that probes a real trust and the
// trusted realm's own logins: silent while the trust works; firing, with
// both realms named, after krbtgt/B@A is rekeyed in A alone; and silent
// again once B's KDC is stopped too (B's own login fails: not a trust
// problem any more).
func TestCrossRealmAlertEndToEnd(t *testing.T) {
	promBin := needPrometheus(t)
	t.Parallel()
	e := newE2E(t, 2*time.Minute)
	ctx := e.ctx
	a, b := realmtest.Trusted(t, realm.Options{Users: 1, Services: 1})

	x := e.exporter(fmt.Sprintf(`modules:
  b:
    realm: %[5]s
    client: %[6]s
    keytab: %[7]s
    timeout: 2s
  trust:
    realm: %[1]s
    client: %[2]s
    keytab: %[3]s
    service: %[4]s
    realm_kdcs: {%[5]s: ["%[8]s"]}
    timeout: 2s
probes:
  - {name: b-login, address: "%[8]s", module: b, interval: 1s}
  - {name: a-to-b, address: "%[9]s", module: trust, interval: 1s}
`, a.Realm, a.ProbePrincipal, a.ProbeKeytab, b.Service(1), b.Realm, b.ProbePrincipal, b.ProbeKeytab, b.KDCAddr, a.KDCAddr),
		"--no-collector.process", "--no-collector.network", "--no-collector.kdcconf", "--no-collector.replication")

	copies := ruleCopies(t, filepath.Join(e.tmp, "rules"), func(r rule) string {
		if r.Alert == "Krb5CrossRealmTrustBroken" {
			return "2s"
		}
		return ""
	})
	prom, _ := startPrometheus(t, ctx, promBin, e.tmp, copies, scrapeConfig("", a.Realm, x))

	waitQuery(t, ctx, prom, `krb5_probe_success{target="a-to-b",exchange="remote_tgs"} == 1`)
	waitQuery(t, ctx, prom, `krb5_probe_success{target="b-login",exchange="as"} == 1`)
	sleep(ctx, 4*time.Second) // past the shortened for:
	if s := alertState(t, ctx, prom, "Krb5CrossRealmTrustBroken"); s != "" {
		t.Fatalf("Krb5CrossRealmTrustBroken %s while the trust works", s)
	}

	realmtest.Kadmin(t, a, "cpw -randkey krbtgt/"+b.Realm+"@"+a.Realm)
	waitFiring(t, ctx, prom, "Krb5CrossRealmTrustBroken")
	q := fmt.Sprintf(`ALERTS{alertname="Krb5CrossRealmTrustBroken",alertstate="firing",target="a-to-b",module_realm=%q,service_realm=%q}`, a.Realm, b.Realm)
	if n, err := instantQuery(ctx, prom, q); err != nil || n != 1 {
		t.Errorf("%s: %d series, %v", q, n, err)
	}

	if err := b.StopKDC(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(45 * time.Second)
	for alertState(t, ctx, prom, "Krb5CrossRealmTrustBroken") != "" {
		if time.Now().After(deadline) {
			t.Fatalf("Krb5CrossRealmTrustBroken still %s 45s after %s's KDC stopped", alertState(t, ctx, prom, "Krb5CrossRealmTrustBroken"), b.Realm)
		}
		sleep(ctx, 200*time.Millisecond)
	}
}
