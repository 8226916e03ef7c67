package alerts

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestClientStormEndToEnd runs talkers.rules.yml (for: 5s) in a real
// Prometheus scraping a real krb5-exporter (top_talkers.window 5s) that
// follows a harness KDC's log. The demo's steady load (krb5-exporter
// realm load: 3 logins a second with 2 tickets each, all from one host:
// 9 requests a second, under the alert's 20)
// leaves KDCClientStorm silent through evaluations of two windows of
// it; then the demo's storm (30 logins a second as one principal from
// 127.0.0.5: 30 requests, 60 or 90 log lines) fires it, for that address
// and that principal.
func TestClientStormEndToEnd(t *testing.T) {
	promBin := needPrometheus(t)
	t.Parallel()
	began := time.Now()
	phase := func(what string) { t.Logf("%.1fs: %s", time.Since(began).Seconds(), what) }
	e := newE2E(t, 2*time.Minute)
	ctx := e.ctx
	r := realmtest.Realm(t, realm.Options{Users: 6, Services: 4, Fillers: -1, NoKadmind: true, DisableLastSuccess: true})
	x := e.exporter(logConfig(r) + "top_talkers:\n  window: 5s\n")
	rules := filepath.Join(e.tmp, "talkers.rules.yml")
	writeFile(t, rules, testutil.ShortenFor(string(testutil.MustRead(t, "talkers.rules.yml")), "KDCClientStorm", "for", "5s"))
	prom, _ := startPrometheus(t, ctx, promBin, e.tmp, []string{rules}, scrapeConfig("", "", x))
	phase("realm, exporter and Prometheus up")

	// The demo's steady load, as scripts/demo.sh starts it.
	e.load(r, "--duration", "1m")
	waitQuery(t, ctx, prom, `sum(krb5_kdc_top_window_requests) > 0`)
	steady := time.Now()
	testutil.Eventually(t, 30*time.Second, "the talkers rules evaluated over two windows of the steady load", func() bool {
		return lastEvaluation(t, ctx, prom, "krb5-talkers").After(steady.Add(11 * time.Second))
	})
	if s := alertState(t, ctx, prom, "KDCClientStorm"); s != "" {
		t.Errorf("KDCClientStorm %s under the demo's steady load", s)
	}
	if n, err := instantQuery(ctx, prom, `krb5_kdc_top_requests{by="address",name="127.0.0.1"} / on () group_left () krb5_kdc_top_window_seconds > 3`); err != nil || n == 0 {
		t.Errorf("the steady load's host is not in the top talkers (%d, %v)", n, err)
	}
	phase("steady load evaluated")

	// DEMO_FAULT=storm's client.
	e.load(r, "--duration", "1m", "--source", "127.0.0.5", "--rate", "30", "--users", "1", "--tickets", "0",
		"--wrong-password-every", "0", "--unknown-user-every", "0", "--weak-enctype-every", "0")
	want := map[string]bool{"address 127.0.0.5": false, "client " + r.User(1): false}
	testutil.Eventually(t, 60*time.Second, "KDCClientStorm firing for the storm's address and principal", func() bool {
		for _, a := range firingAlerts(t, ctx, prom, "KDCClientStorm") {
			k := a["by"] + " " + a["name"]
			if _, ok := want[k]; !ok {
				t.Errorf("KDCClientStorm fires for %s", k)
			}
			want[k] = true
		}
		return want["address 127.0.0.5"] && want["client "+r.User(1)]
	})
	phase("KDCClientStorm firing")
}

// firingAlerts returns the labels of the firing alerts named name.
func firingAlerts(t *testing.T, ctx context.Context, prom, name string) []map[string]string {
	t.Helper()
	var out []map[string]string
	for _, a := range promAlerts(t, ctx, prom) {
		if a.Labels["alertname"] == name && a.State == "firing" {
			out = append(out, a.Labels)
		}
	}
	return out
}
