package alerts

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestTopTalkersRealmWide runs two harness KDCs, an exporter beside
// each (top_talkers.window 5s) and one Prometheus scraping both. Right
// after a window starts, one host (127.0.0.7) logs in as user 1 to both
// KDCs, 3 times to the first and 5 to the second, and another
// (127.0.0.8) only to the first; once the window is over, the overview
// dashboard's "Who is loading the KDC" query (topk of the sum by name
// over both) gives each address its logins at both KDCs together, a
// second (a login one request, whatever its lines in the logs).
func TestTopTalkersRealmWide(t *testing.T) {
	promBin := needPrometheus(t)
	t.Parallel()
	e := newE2E(t, 2*time.Minute)
	ctx := e.ctx
	var kdcs []*realm.Realm
	var exporters []exporter
	for range 2 {
		r := realmtest.Realm(t, realm.Options{Users: 2, Services: 1, Fillers: -1, NoKadmind: true, DisableLastSuccess: true})
		kdcs, exporters = append(kdcs, r), append(exporters, e.exporter(logConfig(r)+"top_talkers:\n  window: 5s\n"))
	}
	prom, _ := startPrometheus(t, ctx, promBin, e.tmp, nil, scrapeConfig("", "", exporters...))
	waitQuery(t, ctx, prom, `count(krb5_kdc_top_window_seconds) == 2`)

	logins := func(r *realm.Realm, from string, n int) {
		t.Helper()
		p, _ := krb5.ParsePrincipal(r.User(1), r.Realm)
		creds, err := krb5.NewKeytabCredentials(r.UserKeytab, p)
		if err != nil {
			t.Fatal(err)
		}
		c, err := krb5.NewClient(krb5.Options{KDC: r.KDCAddr, Client: p, Credentials: creds, LocalAddr: netip.MustParseAddr(from)})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for range n {
			if _, err := c.Login(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Just after a window's start, so that the logins fall in one window
	// of each exporter.
	sleep(ctx, time.Until(time.Now().Truncate(5*time.Second).Add(5*time.Second+100*time.Millisecond)))
	began := time.Now()
	logins(kdcs[0], "127.0.0.7", 3)
	logins(kdcs[1], "127.0.0.7", 5)
	logins(kdcs[0], "127.0.0.8", 2)
	if d := time.Since(began); d > 3*time.Second {
		t.Skipf("the logins took %s: they may span two windows", d)
	}
	// The truth: the logins made, a login one request whatever its lines
	// in the KDCs' logs (SPAKE: 3).
	want := map[string]float64{"127.0.0.7": 8, "127.0.0.8": 2}
	for _, r := range kdcs {
		if n := strings.Count(string(testutil.MustRead(t, r.KDCLog)), " 127.0.0.8: "); r == kdcs[0] && n <= 2 {
			t.Fatalf("the log has %d lines of 127.0.0.8's 2 logins, want their round trips too", n)
		}
	}
	var insts []string
	for _, x := range exporters {
		insts = append(insts, x.addr)
	}
	vars := dashboardVars{job: "krb5", instances: insts}
	expr := dashboardQueries(t, map[string]dashboardVars{"krb5-kdc-overview.json": vars, "krb5-bench.json": vars, "krb5-probes.json": vars})[`krb5-kdc-overview.json "Who is loading the KDC" query 1`]
	if expr == "" {
		t.Fatal("the overview dashboard has no \"Who is loading the KDC\" query")
	}
	var got map[string]float64
	defer func() {
		if t.Failed() {
			t.Logf("realm-wide requests by address %v, the logins made %v", got, want)
		}
	}()
	testutil.Eventually(t, 20*time.Second, "the realm-wide top talkers of the logins' window", func() bool {
		got = map[string]float64{}
		for _, r := range vector(t, ctx, prom, expr) {
			if r.Metric["by"] == "address" {
				got[r.Metric["name"]] = r.Value * 5 // requests a second over the 5 s window
			}
		}
		return got["127.0.0.7"] == want["127.0.0.7"] && got["127.0.0.8"] == want["127.0.0.8"]
	})
	t.Logf("realm-wide requests by address: %v (logins: %v)", got, want)
}
