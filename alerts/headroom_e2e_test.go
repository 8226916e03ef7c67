package alerts

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestHeadroomEndToEnd runs capacity.rules.yml (the headroom alerts'
// for: 5s) in a real Prometheus scraping a real krb5-exporter with
// --collector.kdcservice watching a harness KDC that writes last_success.
// The demo's steady load (3 logins a second, 2 tickets each) uses a few
// % of the KDC's estimated capacity: KDCHeadroomLow stays silent. Then
// the KDC's disk is made slow (strace holds each fsync 250 ms, as a
// saturated disk would) under 8 more logins a second: the KDC is blocked
// nearly all the time, its estimate falls to about 16 requests a second,
// and as the 5-minute windows (the estimate's, the rules' rate5m) fill
// with the slow disk the load passes half of it (0.29 after 90 s, 0.49
// after 150 s) and KDCHeadroomLow fires, with its real threshold (after
// 157 s in one run): a test of about 3 minutes. The kdcservice collector's BPF program is loaded under
// /tmp/krb5x-bpf.lock, which the test takes.
func TestHeadroomEndToEnd(t *testing.T) {
	promBin := needPrometheus(t)
	testutil.RequireProgram(t, "strace")
	lockBPF(t)
	began := time.Now()
	phase := func(what string) { t.Logf("%.1fs: %s", time.Since(began).Seconds(), what) }
	e := newE2E(t, 7*time.Minute)
	ctx := e.ctx
	r := realmtest.Realm(t, realm.Options{Users: 6, Services: 4, Fillers: -1, NoKadmind: true})
	x := e.exporter(logConfig(r), "--collector.kdcservice", "--collector.process.krb5kdc-pidfile", r.KDCPidFile,
		"--collector.kdcconf.path", r.KDCConf, "--collector.kdcconf.krb5-config", r.Krb5Conf)
	text := string(testutil.MustRead(t, "capacity.rules.yml"))
	for _, a := range []string{"KDCHeadroomLow", "KDCRealmNoFailoverHeadroom", "KDCCapacityFalling"} {
		text = testutil.ShortenFor(text, a, "for", "5s")
	}
	rules := filepath.Join(e.tmp, "capacity.rules.yml")
	writeFile(t, rules, text)
	prom, _ := startPrometheus(t, ctx, promBin, e.tmp, []string{rules}, scrapeConfig("", r.Realm, x))
	phase("realm, exporter and Prometheus up")
	requireTracing(t, ctx, prom, x)

	// The demo's steady load.
	e.load(r, "--duration", "6m")
	waitQuery(t, ctx, prom, `instance:krb5_kdc_capacity_utilization:ratio5m`)
	steady := time.Now()
	testutil.Eventually(t, 30*time.Second, "the headroom rules evaluated for 10 s of the steady load", func() bool {
		return lastEvaluation(t, ctx, prom, "krb5-headroom").After(steady.Add(10 * time.Second))
	})
	for _, a := range []string{"KDCHeadroomLow", "KDCRealmNoFailoverHeadroom", "KDCCapacityFalling"} {
		if s := alertState(t, ctx, prom, a); s != "" {
			t.Errorf("%s %s under the demo's steady load", a, s)
		}
	}
	phase("steady load evaluated: quiet")

	// A slow disk under a heavier load.
	delayFsyncs(t, e, r, 250*time.Millisecond)
	e.load(r, "--duration", "6m", "--rate", "8", "--tickets", "0", "--users", "6",
		"--wrong-password-every", "0", "--unknown-user-every", "0", "--weak-enctype-every", "0")
	show := func() {
		for _, e := range []string{`krb5_kdc_capacity_requests_per_second`, `krb5_kdc_capacity_window_requests`, `instance:krb5_kdc_capacity_utilization:ratio5m`,
			`instance:krb5_kdc_requests:rate5m`, `sum by (state) (rate(krb5_kdc_request_service_split_seconds_total[1m]))`} {
			for _, r := range vector(t, ctx, prom, e) {
				t.Logf("%s %v = %v", e, r.Metric, r.Value)
			}
		}
	}
	slow := time.Now()
	testutil.Eventually(t, 240*time.Second, "KDCHeadroomLow firing with the disk slow", func() bool {
		if alertState(t, ctx, prom, "KDCHeadroomLow") == "firing" {
			return true
		}
		if time.Since(slow) > 235*time.Second && !t.Failed() {
			show()
		}
		return false
	})
	phase("KDCHeadroomLow firing")
	if s := alertState(t, ctx, prom, "KDCRealmNoFailoverHeadroom"); s != "" {
		t.Errorf("KDCRealmNoFailoverHeadroom %s for a realm of one KDC", s)
	}
	if b := x.log.String(); strings.Contains(b, "level=error") {
		t.Logf("exporter log: %s", b)
	}
}
