package capacity

import (
	"math"
	"testing"
)

// TestEstimateWindow: the model applied to counts at two moments, as the
// bench passes them, against the arithmetic of docs/metrics.md done here
// by hand: W / own and P / cpu per request.
func TestEstimateWindow(t *testing.T) {
	svc := func(nAS, nTGS, cpuAS, cpuTGS, blockedAS, outside float64) *ServiceTotals {
		return &ServiceTotals{Requests: [3]float64{nAS, nTGS}, CPU: [3]float64{cpuAS, cpuTGS}, Blocked: [3]float64{blockedAS}, Outside: outside}
	}
	for _, tc := range []struct {
		name       string
		end        Totals
		cpus       int
		source     string
		as, tgs, m float64 // 0: none
		why        string  // of as, when none
	}{
		{"proc, AS alone", Totals{Workers: 1, CPU: 0.5, AS: 2000}, 2, SourceProc, 4000, 0, 4000, ""},
		{"proc, AS alone, disk waits", Totals{Workers: 1, CPU: 0.5, Disk: 0.5, HaveDisk: true, AS: 2000}, 2, SourceProc, 2000, 0, 2000, ""},
		{"proc, two workers on one CPU", Totals{Workers: 2, CPU: 0.5, AS: 2000}, 1, SourceProc, 4000, 0, 4000, ""},
		{"proc, two workers on two CPUs", Totals{Workers: 2, CPU: 0.5, AS: 2000}, 2, SourceProc, 8000, 0, 8000, ""},
		{"proc, a mix", Totals{Workers: 1, CPU: 0.5, AS: 1000, TGS: 1000}, 2, SourceProc, 0, 0, 4000, "a mix the proc source cannot split"},
		{"proc, too few", Totals{Workers: 1, CPU: 0.01, AS: 100}, 2, SourceProc, 0, 0, 0, "too few requests"},
		// as: 100 µs CPU + 50 µs outside, 100 µs blocked; tgs: 50 + 50 µs.
		{"kdcservice", Totals{Workers: 1, CPU: 0.25, AS: 1000, TGS: 1000, Service: svc(1000, 1000, 0.1, 0.05, 0.1, 0.1)}, 2, SourceKDCService,
			1 / 250e-6, 1 / 100e-6, 2000 / 0.35, ""},
	} {
		start := Totals{Workers: tc.end.Workers, HaveDisk: tc.end.HaveDisk}
		if tc.end.Service != nil {
			start.Service = &ServiceTotals{}
		}
		e := Estimate(start, tc.end, tc.cpus, 0)
		if e.Source != tc.source || len(e.Rows) != 3 {
			t.Errorf("%s: source %q, %d rows", tc.name, e.Source, len(e.Rows))
			continue
		}
		for i, want := range []float64{tc.as, tc.tgs, tc.m} {
			if got := e.Rows[i].Capacity; math.Abs(got-want) > 1e-6*want+1e-9 {
				t.Errorf("%s: %s %g/s, want %g/s", tc.name, e.Rows[i].Request, got, want)
			}
		}
		if tc.why != "" && e.Rows[0].Why != tc.why {
			t.Errorf("%s: as has no estimate because %q, want %q", tc.name, e.Rows[0].Why, tc.why)
		}
	}
}
