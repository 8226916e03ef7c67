package bench

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/bench/report"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// capacityRow is the report's row of source and request.
func capacityRow(t *testing.T, rep *Report, source, request string) report.CapacityRow {
	t.Helper()
	if rep.Capacity == nil {
		t.Fatal("no capacity section")
	}
	for _, r := range rep.Capacity.Rows {
		if r.Source == source && r.Request == request {
			return r
		}
	}
	t.Fatalf("no %s %s row in %+v", source, request, rep.Capacity.Rows)
	return report.CapacityRow{}
}

// TestCapacityCheck: bench's capacity check against what the KDC itself
// says, on a realm without last_success writes (no disk waits) and
// encrypted-timestamp logins.
//
// First a run of latency alone: its proc estimate of the mix is 1 / the
// KDC's CPU per request, here the KDC's CPU time read by the test from
// /proc/PID/schedstat around the run over the AS and TGS lines its log
// gained (the run is the load and a few idle milliseconds: within 8 %).
//
// Then as, tgs and latency: the measured ceilings are the as load's
// logins/s times the AS lines per login the KDC logged (within 6 %), and the tgs
// load's tickets/s; the mix's is the two at the latency load's shares;
// the ratios are the estimate over them. Against the KDC's own-time
// ceiling the estimate is held to what docs/bench.md says of the model:
// at most 20 % above, at least 0.3 of it.
func TestCapacityCheck(t *testing.T) {
	r := upRealm(t, realm.Options{NoKadmind: true, DisableLastSuccess: true})
	s := capacitySettings()
	rep, want, reqs := latencyAlone(t, r, s)
	mix := capacityRow(t, rep, "proc", "mix")
	checkMix(t, mix, want, reqs)
	if mix.MeasuredPerS != 0 || mix.Ratio != 0 {
		t.Errorf("a ceiling without the as and tgs loads: %+v", mix)
	}

	s.Tests = []string{"as", "tgs", "latency"}
	from := testutil.LogSize(t, r.KDCLog)
	rep = runSuite(t, RealmSystem(r), s)
	logins := rep.AS.Requests + rep.Latency.Logins.Requests
	perLogin := float64(testutil.LogCount(t, r.KDCLog, from, `AS_REQ `)) / float64(logins)
	as, tgs := rep.AS.Rate*perLogin, rep.TGS.Rate
	nAS, nTGS := float64(rep.Latency.Logins.Requests)*perLogin, float64(rep.Latency.Tickets.Requests)
	wantMix := (nAS + nTGS) / (nAS/as + nTGS/tgs)
	for _, c := range []struct {
		req  string
		want float64
	}{{"as", as}, {"tgs", tgs}, {"mix", wantMix}} {
		row := capacityRow(t, rep, "proc", c.req)
		// 6 %: the KDC logs again the requests a client resent when its
		// answer was late (2.08 lines a login in a run on a loaded host).
		if math.Abs(row.MeasuredPerS-c.want) > 0.06*c.want {
			t.Errorf("%s: measured %.0f/s, want %.0f/s (%.2f AS requests a login in the KDC's log)", c.req, row.MeasuredPerS, c.want, perLogin)
		}
		if row.EstimatePerS > 0 && math.Abs(row.Ratio-row.EstimatePerS/row.MeasuredPerS) > 1e-9 {
			t.Errorf("%s: ratio %g, estimate %g over measured %g", c.req, row.Ratio, row.EstimatePerS, row.MeasuredPerS)
		}
	}
	mix = capacityRow(t, rep, "proc", "mix")
	t.Logf("as %.0f/s, tgs %.0f/s, mix %.0f/s measured; mix estimate %.0f/s: %.2f of it, %.2f of the KDC's own-time ceiling %.0f/s",
		as, tgs, wantMix, mix.EstimatePerS, mix.Ratio, mix.OwnRatio, mix.OwnCeilingPerS)
	if mix.OwnRatio < 0.3 || mix.OwnRatio > 1.2 {
		t.Errorf("mix estimate %.0f/s is %.2f of the KDC's own-time ceiling %.0f/s: want 0.3 to 1.2", mix.EstimatePerS, mix.OwnRatio, mix.OwnCeilingPerS)
	}
	var md bytes.Buffer
	report.WriteMarkdown(&md, rep)
	if !strings.Contains(md.String(), "| proc | mix | ") {
		t.Errorf("report.md has no capacity row:\n%s", md.String())
	}
}

// TestCapacityCheckKDCService: with kdc_service on, the check has the
// kdcservice source too, which splits the latency load's mix by type:
// as, tgs and mix estimates, the mix within 8 % of 1 / the KDC's CPU per
// request as the kernel's schedstat and the KDC's log give it (no
// last_success writes: nothing blocks). Run under flock
// /tmp/krb5x-bpf.lock; outside CI it skips where BPF is not permitted.
func TestCapacityCheckKDCService(t *testing.T) {
	r := upRealm(t, realm.Options{NoKadmind: true, DisableLastSuccess: true})
	s := capacitySettings()
	s.KDCService = true
	rep, want, reqs := latencyAlone(t, r, s)
	for _, w := range rep.Warnings {
		if strings.HasPrefix(w, "kdc_service: cannot load") {
			if !testutil.InCI() && (strings.Contains(w, "permitted") || strings.Contains(w, "permission")) {
				t.Skip(w)
			}
			t.Fatal(w)
		}
	}
	checkMix(t, capacityRow(t, rep, "kdcservice", "mix"), want, reqs)
	for _, req := range []string{"as", "tgs"} {
		row := capacityRow(t, rep, "kdcservice", req)
		t.Logf("kdcservice %s: %.0f requests, %.0f µs CPU, %.0f µs own: %.0f/s", req, row.Requests, row.CPUUS, row.OwnUS, row.EstimatePerS)
		if row.EstimatePerS <= 0 || row.OwnUS < row.CPUUS {
			t.Errorf("kdcservice %s: %+v", req, row)
		}
	}
}

// capacitySettings: a latency load of 2 s at 100 logins/s, each with 2
// tickets, encrypted timestamp: 800 requests, above the estimate's
// minimum.
func capacitySettings() Settings {
	s := small("latency")
	s.Preauth = "encrypted_timestamp"
	s.Duration = 2 * time.Second
	s.LoginRate = 100
	return s
}

// latencyAlone runs s (latency alone) and returns its report, 1 / the
// KDC's CPU time per request over the run (schedstat) and the AS
// and TGS requests its log gained.
func latencyAlone(t *testing.T, r *realm.Realm, s Settings) (*Report, float64, int) {
	t.Helper()
	pid := r.KDCPids()[0]
	from := testutil.LogSize(t, r.KDCLog)
	cpu0, _, err := testutil.Schedstat(pid)
	if err != nil {
		t.Fatal(err)
	}
	rep := runSuite(t, RealmSystem(r), s)
	cpu1, _, err := testutil.Schedstat(pid)
	if err != nil {
		t.Fatal(err)
	}
	reqs := testutil.LogCount(t, r.KDCLog, from, `(AS|TGS)_REQ `)
	want := float64(reqs) / (cpu1 - cpu0).Seconds()
	t.Logf("latency alone: %d requests logged, KDC CPU %v: 1 / CPU per request %.0f/s", reqs, cpu1-cpu0, want)
	return rep, want, reqs
}

// checkMix holds a mix row to the KDC's own CPU per request (want) and
// the requests it logged.
func checkMix(t *testing.T, mix report.CapacityRow, want float64, reqs int) {
	t.Helper()
	t.Logf("%s mix estimate %.0f/s from %.0f requests (%s)", mix.Source, mix.EstimatePerS, mix.Requests, mix.Why)
	if math.Abs(mix.Requests-float64(reqs)) > 0.02*float64(reqs) {
		t.Errorf("%s: the estimate counted %.0f requests, the KDC logged %d", mix.Source, mix.Requests, reqs)
	}
	if mix.EstimatePerS < 0.92*want || mix.EstimatePerS > 1.08*want {
		t.Errorf("%s: mix estimate %.0f/s, want %.0f/s ±8 %%", mix.Source, mix.EstimatePerS, want)
	}
}
