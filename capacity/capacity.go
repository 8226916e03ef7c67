// Package capacity estimates, live, how many requests per second a KDC
// could answer at the current mix (krb5_kdc_capacity_requests_per_second),
// from the series the daemon already exports: it wraps the daemon's
// gatherer, reads each scrape's per-worker CPU and disk waits (the process
// collector), requests per worker (the log collector) and, where it runs,
// the kdcservice collector's service-time split, keeps a sliding window of
// those totals and adds its estimate to the same scrape. Nothing is
// measured twice, and it costs nothing between scrapes.
//
// The model (docs/metrics.md, "Capacity"): each krb5kdc process answering
// requests serves one at a time, so W of them answer at most W / s
// requests a second, s the time a request keeps its process (on CPU plus
// blocked: its own time, not the waits for a CPU that load causes); and
// at most P / c, c the CPU time a request costs and P the CPUs the KDC
// may use (no more than W: each process is single-threaded).
package capacity

import (
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// Names of the series read and exported.
const (
	MetricCapacity       = "krb5_kdc_capacity_requests_per_second"
	MetricWindowRequests = "krb5_kdc_capacity_window_requests"

	mProcessCPU  = "krb5_process_cpu_seconds_total"
	mProcessDisk = "krb5_process_disk_wait_seconds_total"
	mWorkers     = "krb5_kdc_workers"
	mRequests    = "krb5_kdc_requests_total"
	mSplit       = "krb5_kdc_request_service_split_seconds_total"
	mService     = "krb5_kdc_request_service_seconds"
	mOutside     = "krb5_kdc_worker_outside_service_cpu_seconds_total"
	mTracingUp   = "krb5_kdc_service_tracing_up"
)

// Sources of an estimate (the source label).
const (
	SourceKDCService = "kdcservice" // the eBPF service-time split
	SourceProc       = "proc"       // per-worker CPU and disk waits from /proc
)

// Defaults of Config.
const (
	DefaultWindow      = 5 * time.Minute
	DefaultMinRequests = 200
	// maxSamples bounds the window's memory whatever the scrape rate (a
	// scrape faster than window/maxSamples replaces the newest sample).
	maxSamples = 64
	// pureShare: a window in which one request type is at least this
	// share of the requests gives that type the mix's cost (the /proc
	// source cannot split a mix that does not vary).
	pureShare = 0.98
	// minDecorrelation: the /proc source splits the cost by type by least
	// squares over the window's intervals only when the types' counts
	// vary apart enough (1 - r², r their correlation, at least this).
	minDecorrelation = 0.1
)

// Config of an Estimator.
type Config struct {
	// Window is how far back the estimate looks (DefaultWindow when 0).
	Window time.Duration
	// MinRequests: no estimate for a type (or the mix) from fewer
	// requests in the window (DefaultMinRequests when 0).
	MinRequests int
	// CPUs returns how many CPUs the KDC's processes may run on together
	// (their affinity); 0 when unknown, then one per process.
	CPUs func() int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Bench, when set, adds the latest bench run's measured ceilings.
	Bench *Bench
}

// Gatherer wraps a gatherer: each Gather adds the estimate to its result.
type Gatherer struct {
	inner prometheus.Gatherer
	cfg   Config

	mu      sync.Mutex
	samples []sample
	status  Status
}

// New wraps g.
func New(g prometheus.Gatherer, cfg Config) *Gatherer {
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.MinRequests <= 0 {
		cfg.MinRequests = DefaultMinRequests
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Gatherer{inner: g, cfg: cfg}
}

// Request types of the estimate; mix is all of them at their current
// shares.
const (
	reqAS = iota
	reqTGS
	reqOther // the kdcservice collector's other (neither AS nor TGS)
	numReq
)

var reqNames = [numReq]string{"as", "tgs", "other"}

// sample is one scrape's totals.
type sample struct {
	at time.Time
	// From /proc (all krb5kdc processes) and the log.
	workers           int // serving processes: 1 for a KDC without -w
	cpu, disk         float64
	haveCPU, haveDisk bool
	reqs              [2]float64 // as, tgs
	// From the kdcservice collector (tracing up).
	traced             bool
	svcN, svcCPU, svcB [numReq]float64
	outside            float64
}

func (g *Gatherer) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := g.inner.Gather()
	s := extract(mfs, g.cfg.Now())
	g.mu.Lock()
	g.add(s)
	est := estimate(g.samples, g.cfg)
	g.mu.Unlock()
	cpus := 0
	if est.ok() && g.cfg.CPUs != nil {
		cpus = g.cfg.CPUs()
	}
	mfs = append(mfs, est.families(cpus)...)
	var bench map[string]float64
	var benchAt time.Time
	if g.cfg.Bench != nil {
		fams := g.cfg.Bench.families()
		bench, benchAt = benchValues(fams)
		mfs = append(mfs, fams...)
	}
	g.mu.Lock()
	g.setStatus(&est, cpus, bench, benchAt)
	g.mu.Unlock()
	slices.SortFunc(mfs, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	return mfs, err
}

// add keeps s and drops what the window no longer needs: the samples
// before the newest one at least a window older than s.
func (g *Gatherer) add(s sample) {
	if n := len(g.samples); n > 0 && s.at.Sub(g.samples[n-1].at) < g.cfg.Window/maxSamples {
		if n > 1 {
			g.samples[n-1] = s // too close to the previous: replace it
			return
		}
	}
	g.samples = append(g.samples, s)
	cut := 0
	for i := range g.samples {
		if s.at.Sub(g.samples[i].at) >= g.cfg.Window {
			cut = i
		}
	}
	g.samples = g.samples[cut:]
	if len(g.samples) > maxSamples {
		g.samples = g.samples[len(g.samples)-maxSamples:]
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return m.GetUntyped().GetValue()
}

func reqIndex(name string) int {
	for i, n := range reqNames {
		if n == name {
			return i
		}
	}
	return -1
}

// extract reads one scrape's totals.
func extract(mfs []*dto.MetricFamily, at time.Time) sample {
	s := sample{at: at, workers: 1}
	var split [numReq][2]float64
	haveSplit := false
	for _, mf := range mfs {
		switch mf.GetName() {
		case mProcessCPU:
			for _, m := range mf.GetMetric() {
				if label(m, "program") == "krb5kdc" {
					s.cpu += value(m)
					s.haveCPU = true
				}
			}
		case mProcessDisk:
			for _, m := range mf.GetMetric() {
				if label(m, "program") == "krb5kdc" {
					s.disk += value(m)
					s.haveDisk = true
				}
			}
		case mWorkers:
			for _, m := range mf.GetMetric() {
				s.workers = max(int(value(m)), 1)
			}
		case mRequests:
			for _, m := range mf.GetMetric() {
				if r := reqIndex(label(m, "request")); r == reqAS || r == reqTGS {
					s.reqs[r] += value(m)
				}
			}
		case mTracingUp:
			for _, m := range mf.GetMetric() {
				s.traced = value(m) == 1
			}
		case mSplit:
			for _, m := range mf.GetMetric() {
				r := reqIndex(label(m, "request"))
				if r < 0 {
					continue
				}
				haveSplit = true
				switch label(m, "state") {
				case "cpu":
					split[r][0] += value(m)
				case "blocked":
					split[r][1] += value(m)
				}
			}
		case mService:
			for _, m := range mf.GetMetric() {
				if r := reqIndex(label(m, "request")); r >= 0 {
					s.svcN[r] += value(m)
				}
			}
		case mOutside:
			for _, m := range mf.GetMetric() {
				s.outside += value(m)
			}
		}
	}
	s.traced = s.traced && haveSplit
	for r := range numReq {
		s.svcCPU[r], s.svcB[r] = split[r][0], split[r][1]
	}
	return s
}

// increase is a counter's increase from a to b, a reset (b below a: a
// replaced process's counter under the same label) counting b.
func increase(a, b float64) float64 {
	if b < a {
		return b
	}
	return b - a
}

// cost is what the window says a request of one type costs.
type cost struct {
	n         float64 // requests in the window
	cpu, own  float64 // seconds a request: on CPU; on CPU + blocked
	published bool
}

// result is one estimate.
type result struct {
	source  string
	workers int
	costs   [numReq + 1]cost // by type, then the mix
	minReq  int
}

const mixIdx = numReq

func (r *result) ok() bool { return r.source != "" }

// estimate computes from the window's samples.
func estimate(ss []sample, cfg Config) result {
	if len(ss) < 2 {
		return result{}
	}
	first, last := ss[0], ss[len(ss)-1]
	res := result{workers: last.workers, minReq: cfg.MinRequests}
	if !last.haveCPU {
		return result{} // no KDC running
	}
	if first.traced && last.traced {
		res.source = SourceKDCService
		res.fromService(ss)
	} else {
		res.source = SourceProc
		res.fromProc(ss)
	}
	return res
}

// fromService takes each type's cost from the service split, plus an
// equal share each of the CPU the workers spent outside service (their
// event loop, the receive and send calls, logging the request).
func (r *result) fromService(ss []sample) {
	var n, cpu, blocked [numReq]float64
	var outside float64
	for i := 1; i < len(ss); i++ {
		a, b := &ss[i-1], &ss[i]
		for q := range numReq {
			n[q] += increase(a.svcN[q], b.svcN[q])
			cpu[q] += increase(a.svcCPU[q], b.svcCPU[q])
			blocked[q] += increase(a.svcB[q], b.svcB[q])
		}
		outside += increase(a.outside, b.outside)
	}
	var total, tcpu, town float64
	for q := range numReq {
		total += n[q]
	}
	if total == 0 {
		return
	}
	o := outside / total
	for q := range numReq {
		c := cost{n: n[q]}
		if n[q] > 0 {
			c.cpu = cpu[q]/n[q] + o
			c.own = c.cpu + blocked[q]/n[q]
			c.published = n[q] >= float64(r.minReq)
		}
		r.costs[q] = c
		tcpu += cpu[q] + o*n[q]
		town += cpu[q] + o*n[q] + blocked[q]
	}
	r.costs[mixIdx] = cost{n: total, cpu: tcpu / total, own: town / total, published: total >= float64(r.minReq)}
}

// fromProc takes the mix's cost from the workers' CPU and disk waits per
// request the log counted; a type's cost when the mix is (almost) that
// type alone, or by least squares over the window's intervals when the
// mix varied.
func (r *result) fromProc(ss []sample) {
	type iv struct{ as, tgs, cpu, own float64 }
	var ivs []iv
	var tot iv
	for i := 1; i < len(ss); i++ {
		a, b := &ss[i-1], &ss[i]
		if !a.haveCPU || !b.haveCPU {
			continue
		}
		d := iv{as: increase(a.reqs[reqAS], b.reqs[reqAS]), tgs: increase(a.reqs[reqTGS], b.reqs[reqTGS]), cpu: increase(a.cpu, b.cpu)}
		d.own = d.cpu
		if a.haveDisk && b.haveDisk {
			d.own += increase(a.disk, b.disk)
		}
		ivs = append(ivs, d)
		tot.as += d.as
		tot.tgs += d.tgs
		tot.cpu += d.cpu
		tot.own += d.own
	}
	n := tot.as + tot.tgs
	if n == 0 {
		return
	}
	minN := float64(r.minReq)
	r.costs[mixIdx] = cost{n: n, cpu: tot.cpu / n, own: tot.own / n, published: n >= minN}
	r.costs[reqAS].n, r.costs[reqTGS].n = tot.as, tot.tgs
	for q, nq := range []float64{tot.as, tot.tgs} {
		if nq >= pureShare*n {
			r.costs[q] = r.costs[mixIdx]
			r.costs[q].published = nq >= minN
			return
		}
	}
	// Least squares without intercept: cost = a·as + b·tgs per interval.
	var saa, stt, sat, sac, stc, sao, sto float64
	for _, d := range ivs {
		saa += d.as * d.as
		stt += d.tgs * d.tgs
		sat += d.as * d.tgs
		sac += d.as * d.cpu
		stc += d.tgs * d.cpu
		sao += d.as * d.own
		sto += d.tgs * d.own
	}
	det := saa*stt - sat*sat
	if saa == 0 || stt == 0 || det/(saa*stt) < minDecorrelation {
		return
	}
	cAS, cTGS := (sac*stt-stc*sat)/det, (stc*saa-sac*sat)/det
	oAS, oTGS := (sao*stt-sto*sat)/det, (sto*saa-sao*sat)/det
	if cAS <= 0 || cTGS <= 0 || oAS < cAS || oTGS < cTGS {
		return
	}
	r.costs[reqAS] = cost{n: tot.as, cpu: cAS, own: oAS, published: tot.as >= minN}
	r.costs[reqTGS] = cost{n: tot.tgs, cpu: cTGS, own: oTGS, published: tot.tgs >= minN}
}

// rate is the model: W processes each serving one request at a time
// (W / own), at most P CPUs' worth of CPU (P / cpu), P at most W.
func rate(c cost, workers, cpus int) float64 {
	p := workers
	if cpus > 0 && cpus < p {
		p = cpus
	}
	if c.own <= 0 || c.cpu <= 0 {
		return 0
	}
	return math.Min(float64(workers)/c.own, float64(p)/c.cpu)
}

const (
	helpCapacity = "Requests per second the KDC could answer, estimated from the last window's time per request: its serving processes each answering one request at a time, bounded by the CPUs they may use; request as, tgs, or mix (the window's shares); source kdcservice or proc."
	helpWindow   = "Requests in the window the capacity estimate stands on; no estimate is published from fewer than the minimum."
)

// Describe sends the descriptors of the estimate's series (for the
// documentation's test: the series are made at gather time).
func Describe(ch chan<- *prometheus.Desc) {
	ch <- prometheus.NewDesc(MetricCapacity, helpCapacity, []string{"request", "source"}, nil)
	ch <- prometheus.NewDesc(MetricWindowRequests, helpWindow, []string{"request", "source"}, nil)
}

// families renders the estimate; nothing before there is one.
func (r *result) families(cpus int) []*dto.MetricFamily {
	if !r.ok() {
		return nil
	}
	capF := family(MetricCapacity, helpCapacity)
	winF := family(MetricWindowRequests, helpWindow)
	names := []string{"as", "tgs", "mix"}
	for i, q := range []int{reqAS, reqTGS, mixIdx} {
		c := r.costs[q]
		winF.Metric = append(winF.Metric, gaugeMetric(c.n, "request", names[i], "source", r.source))
		if c.published {
			if v := rate(c, r.workers, cpus); v > 0 {
				capF.Metric = append(capF.Metric, gaugeMetric(v, "request", names[i], "source", r.source))
			}
		}
	}
	out := []*dto.MetricFamily{winF}
	if len(capF.Metric) > 0 {
		out = append(out, capF)
	}
	return out
}

func family(name, help string) *dto.MetricFamily {
	return &dto.MetricFamily{Name: proto.String(name), Help: proto.String(help), Type: dto.MetricType_GAUGE.Enum()}
}

// gaugeMetric is one gauge sample with labels given as name, value pairs
// in name order.
func gaugeMetric(v float64, labels ...string) *dto.Metric {
	m := &dto.Metric{Gauge: &dto.Gauge{Value: proto.Float64(v)}}
	for i := 0; i+1 < len(labels); i += 2 {
		m.Label = append(m.Label, &dto.LabelPair{Name: proto.String(labels[i]), Value: proto.String(labels[i+1])})
	}
	return m
}
