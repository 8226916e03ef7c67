package bench

import (
	"github.com/krb5-exporter/krb5-exporter/bench/report"
	"github.com/krb5-exporter/krb5-exporter/internal/kdcbpf"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// kdcTracer is the kdcservice collector's BPF program timing the KDC's
// requests during the loads (Settings.KDCService): a window takes its
// counts at the load's first and last request, and the load's report
// gets the difference beside the clients' latency.
type kdcTracer struct {
	tr   *kdcbpf.Tracer
	pids func() []int
}

// startKDCTracer loads the program for the run, or says in a warning why
// it cannot (the run goes on without).
func (r *run) startKDCTracer() {
	if !r.set.KDCService {
		return
	}
	if r.sys.KDCPids == nil {
		r.warn("kdc_service: the KDC is not on this host (no pids): its requests are not timed")
		return
	}
	tr, err := kdcbpf.Load()
	if err != nil {
		r.warn("kdc_service: cannot load the BPF program (%v): the KDC's requests are not timed", err)
		return
	}
	if kdcbpf.TaxesHost(tr.Hooks) {
		r.warn("kdc_service: the system call hooks %s chose (%s) slow every system call on the host, the KDC's and the generator's, while the program runs (docs/bench.md)", kdcbpf.HooksEnv, tr.Hooks)
	}
	r.kdc = &kdcTracer{tr: tr, pids: r.sys.KDCPids}
}

func (r *run) stopKDCTracer() {
	if r.kdc != nil {
		r.kdc.tr.Close()
		r.kdc = nil
	}
}

// mark takes the program's counts (watching the KDC's current processes
// first); false when it could not.
func (k *kdcTracer) mark(s *kdcbpf.Snapshot) bool {
	return k.tr.Watch(k.pids()) == nil && k.tr.Read(s) == nil
}

// kdcService is the KDC's account of the requests of kind over t between
// the window's first and last marks; nil without the program.
func (w *window) kdcService(kind string, t krb5.Transport) *report.KDCService {
	if w.kdc == nil || !w.kdcOK[0] || !w.kdcOK[1] {
		return nil
	}
	req, tr := kdcbpf.RequestAS, kdcbpf.TransportUDP
	if kind == kindTGS {
		req = kdcbpf.RequestTGS
	}
	if t == krb5.TCP {
		tr = kdcbpf.TransportTCP
	}
	a, b := &w.kdcSnap[0].Service[req][tr], &w.kdcSnap[1].Service[req][tr]
	var h kdcbpf.Hist
	h.Count, h.Sum = b.Count-a.Count, b.Sum-a.Sum
	h.CPU, h.Runqueue, h.Blocked, h.Stolen = b.CPU-a.CPU, b.Runqueue-a.Runqueue, b.Blocked-a.Blocked, b.Stolen-a.Stolen
	for i := range h.Buckets {
		h.Buckets[i] = b.Buckets[i] - a.Buckets[i]
	}
	out := &report.KDCService{Requests: int(h.Count)}
	if h.Count == 0 {
		return out
	}
	out.AvgMS = float64(h.Sum) / float64(h.Count) / 1e6
	out.P50MS, out.P95MS, out.P99MS = quantileMS(&h, 0.5), quantileMS(&h, 0.95), quantileMS(&h, 0.99)
	if h.Sum > 0 {
		out.CPUPct = 100 * float64(h.CPU) / float64(h.Sum)
		out.RunqueuePct = 100 * float64(h.Runqueue) / float64(h.Sum)
		out.BlockedPct = 100 * float64(h.Blocked) / float64(h.Sum)
		out.StolenPct = 100 * float64(h.Stolen) / float64(h.Sum)
	}
	if tr == kdcbpf.TransportUDP {
		qa, qb := &w.kdcSnap[0].Queue[tr], &w.kdcSnap[1].Queue[tr]
		if n := qb.Count - qa.Count; n > 0 {
			out.QueueAvgMS = float64(qb.Sum-qa.Sum) / float64(n) / 1e6
		}
	}
	return out
}

// quantileMS is the upper bound of the bucket holding quantile q, in ms.
func quantileMS(h *kdcbpf.Hist, q float64) float64 {
	var n uint64
	for b, c := range h.Buckets {
		n += c
		if float64(n) >= q*float64(h.Count) {
			return kdcbpf.UpperBound(b) * 1e3
		}
	}
	return kdcbpf.UpperBound(kdcbpf.NumBuckets-1) * 1e3
}
