package bench

import (
	"github.com/krb5-exporter/krb5-exporter/bench/report"
	"github.com/krb5-exporter/krb5-exporter/capacity"
	"github.com/krb5-exporter/krb5-exporter/internal/kdcbpf"
)

// capWindow is what the latency load's window read of the KDC, kept for
// the capacity check at the end of the run, when the pre-authentication
// the logins used (and so their AS requests) is known.
type capWindow struct {
	a, b          Sample
	svc           *[2]kdcbpf.Snapshot // nil without Settings.KDCService
	serving, cpus int
}

// keepCapWindow keeps the latency load ol's window w.
func (r *run) keepCapWindow(ol *OpenLoop, w *window) {
	if len(w.marks) < 2 || r.sys.KDCPids == nil {
		return
	}
	serving, set := kdcCPUs(r.sampler.proc, pidsOf(r.sampler))
	cw := &capWindow{a: w.marks[0], b: w.marks[len(w.marks)-1], serving: serving, cpus: set.Count()}
	if w.kdc != nil && w.kdcOK[0] && w.kdcOK[1] {
		s := w.kdcSnap
		cw.svc = &s
	}
	if r.capWindows == nil {
		r.capWindows = map[*OpenLoop]*capWindow{}
	}
	r.capWindows[ol] = cw
}

// capacityCheck applies the daemon's model (package capacity) to the
// latency load the report shows and sets it beside the ceilings the as
// and tgs loads measured; nil without a latency load of this KDC's, or
// for a shard (the KDC's CPU is then the other shards' requests' too).
func (r *run) capacityCheck() *report.Capacity {
	ol := r.rep.Latency
	cw := r.capWindows[ol]
	if ol == nil || cw == nil || r.fleet.shards > 1 {
		return nil
	}
	preauth := r.rep.System.Preauth
	as := float64(ol.Logins.Requests) * capacity.ASPerLogin(ol.Logins, preauth)
	tgs := float64(ol.Tickets.Requests)
	wall := (cw.b.At - cw.a.At).Seconds()
	start := capacity.Totals{Workers: cw.serving, CPU: cw.a.KDCCPU.Seconds()}
	end := capacity.Totals{Workers: cw.serving, CPU: cw.b.KDCCPU.Seconds(), AS: as, TGS: tgs}
	if u := ol.CPU; u.KDCStateSamples > 0 {
		// The sampled share of its cores' time the KDC waited for its
		// disk (the daemon reads delay accounting's total instead).
		end.Disk = u.KDCDiskWaitPct / 100 * float64(u.KDCCores) * wall
		start.HaveDisk, end.HaveDisk = true, true
	}
	ests := []capacity.Estimated{capacity.Estimate(start, end, cw.cpus, 0)}
	if cw.svc != nil {
		s0, s1 := serviceTotals(&cw.svc[0]), serviceTotals(&cw.svc[1])
		start.Service, end.Service = &s0, &s1
		ests = append(ests, capacity.Estimate(start, end, cw.cpus, 0))
	}
	c := &report.Capacity{Workers: cw.serving, CPUs: cw.cpus}
	if wall > 0 {
		c.LoadPerS = (as + tgs) / wall
	}
	// The measured ceilings in KDC requests per second: as, tgs, and
	// the mix at the latency load's shares.
	var meas, own [3]float64
	if l := r.rep.AS; l != nil {
		meas[0] = l.Rate * capacity.ASPerLogin(l, preauth)
		own[0] = ownCeiling(meas[0], l.CPU)
	}
	if l := r.rep.TGS; l != nil {
		meas[1], own[1] = l.Rate, ownCeiling(l.Rate, l.CPU)
	}
	meas[2], own[2] = mixCeiling(as, tgs, meas[0], meas[1]), mixCeiling(as, tgs, own[0], own[1])
	for _, e := range ests {
		for i, row := range e.Rows {
			cr := report.CapacityRow{Source: e.Source, Request: row.Request, Requests: row.Requests,
				CPUUS: row.CPU * 1e6, OwnUS: row.Own * 1e6, EstimatePerS: row.Capacity, Why: row.Why,
				MeasuredPerS: meas[i], OwnCeilingPerS: own[i]}
			if cr.EstimatePerS > 0 && meas[i] > 0 {
				cr.Ratio = cr.EstimatePerS / meas[i]
			}
			if cr.EstimatePerS > 0 && own[i] > 0 {
				cr.OwnRatio = cr.EstimatePerS / own[i]
			}
			c.Rows = append(c.Rows, cr)
		}
	}
	return c
}

// ownCeiling is rate over the share of its cores the KDC spent on its
// own work during the load (on CPU, waiting for its disk): what it would
// have answered with its cores to itself; 0 when unknown.
func ownCeiling(rate float64, u CPUUse) float64 {
	share := min(1, (u.KDCCoresBusyPct+u.KDCDiskWaitPct)/100)
	if rate <= 0 || share <= 0 || u.KDCCores == 0 {
		return 0
	}
	return rate / share
}

// mixCeiling is the ceiling of a mix of as AS and tgs TGS requests from
// each type's ceiling: each request takes 1/ceiling of the KDC's time;
// 0 unless both are known.
func mixCeiling(as, tgs, cAS, cTGS float64) float64 {
	if as+tgs <= 0 || cAS <= 0 && as > 0 || cTGS <= 0 && tgs > 0 {
		return 0
	}
	var t float64
	if as > 0 {
		t += as / cAS
	}
	if tgs > 0 {
		t += tgs / cTGS
	}
	return (as + tgs) / t
}

// serviceTotals are the kdcservice collector's counts of s, in seconds.
func serviceTotals(s *kdcbpf.Snapshot) capacity.ServiceTotals {
	var t capacity.ServiceTotals
	for q := range kdcbpf.NumRequests {
		for tr := range kdcbpf.NumTransports {
			h := &s.Service[q][tr]
			t.Requests[q] += float64(h.Count)
			t.CPU[q] += float64(h.CPU) / 1e9
			t.Blocked[q] += float64(h.Blocked) / 1e9
		}
	}
	for _, w := range s.Workers {
		t.Outside += float64(w.Outside) / 1e9
	}
	return t
}
