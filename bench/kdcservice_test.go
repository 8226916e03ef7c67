package bench

import (
	"bytes"
	"strings"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/bench/report"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// TestKDCServiceBesideLatency: with kdc_service on, the as, tgs and
// latency loads' reports carry the KDC's own account of their requests,
// timed in the kernel: a tgs ticket is one TGS request, so the KDC counted
// the tickets the generator sent (within what was in flight at the
// window's edges); a login is two or three AS requests; the KDC's median
// service time is below the clients' median round trip; and report.md
// shows it beside the latency. Outside CI it skips where BPF is not
// permitted.
func TestKDCServiceBesideLatency(t *testing.T) {
	r := upRealm(t, realm.Options{NoKadmind: true, DisableLastSuccess: true})
	set := small("as", "tgs", "latency")
	set.KDCService = true
	rep := runSuite(t, RealmSystem(r), set)
	for _, w := range rep.Warnings {
		if strings.HasPrefix(w, "kdc_service: cannot load") {
			if !testutil.InCI() && (strings.Contains(w, "permitted") || strings.Contains(w, "permission")) {
				t.Skip(w)
			}
			t.Fatal(w)
		}
	}
	inflight := set.BatchInflight
	check := func(name string, l *report.Load, lo, hi int) {
		t.Helper()
		k := l.KDCService
		if k == nil {
			t.Fatalf("%s: no kdc_service in the report", name)
		}
		t.Logf("%s: %d client requests (p50 %.3f ms); the KDC timed %d, p50 ≤ %.3f ms, avg %.3f ms, cpu %.0f %% runqueue %.0f %% blocked %.0f %% stolen %.0f %%, socket queue %.3f ms",
			name, l.Requests, l.Latency.P50MS, k.Requests, k.P50MS, k.AvgMS, k.CPUPct, k.RunqueuePct, k.BlockedPct, k.StolenPct, k.QueueAvgMS)
		if k.Requests < lo || k.Requests > hi {
			t.Errorf("%s: the KDC timed %d requests, want %d..%d for %d client requests", name, k.Requests, lo, hi, l.Requests)
		}
		if k.P50MS > 1.1*l.Latency.P50MS {
			t.Errorf("%s: the KDC's median service time ≤ %.3f ms above the clients' median round trip %.3f ms", name, k.P50MS, l.Latency.P50MS)
		}
		if s := k.CPUPct + k.RunqueuePct + k.BlockedPct + k.StolenPct; s < 99.9 || s > 100.1 {
			t.Errorf("%s: the split adds up to %.2f %%", name, s)
		}
	}
	check("tgs", rep.TGS, rep.TGS.Requests-inflight, rep.TGS.Requests+inflight)
	check("as", rep.AS, 2*rep.AS.Requests-3*inflight, 3*rep.AS.Requests+3*inflight)
	// The open loop's tickets: after the tgs load the KDC still answers
	// what that load left queued in its socket (about 45 requests here,
	// 5.6 ms deep) when the latency load's window opens: 100 against 56 in
	// one run, where the latency load alone gave 56 against 56 and its
	// logins 84 AS requests against 84 AS_REQ lines, 3 per login. So a
	// lower bound and the tail of a backlog at most.
	check("latency tickets", rep.Latency.Tickets, rep.Latency.Tickets.Requests-inflight, 2*rep.Latency.Tickets.Requests+inflight)
	var md bytes.Buffer
	report.WriteMarkdown(&md, rep)
	for _, s := range []string{"The KDC's own service time of the as requests", "The KDC's own service time of the tgs requests", "The KDC's own service time of the service tickets"} {
		if !strings.Contains(md.String(), s) {
			t.Errorf("report.md lacks %q", s)
		}
	}
}
