package capacity

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// kdc is a fake KDC's totals as its collectors would export them.
type kdc struct {
	workers          float64
	cpu, disk        float64 // seconds, all krb5kdc processes
	as, tgs          float64 // log lines
	traced           bool
	svc, scpu, sblk  [numReq]float64
	outside          float64
	noDisk, noKDCCPU bool
}

// serve adds n requests of type q, each costing cpu seconds on CPU and
// blk blocked (a disk wait), to both sources.
func (k *kdc) serve(q int, n, cpu, blk float64) {
	k.cpu += n * cpu
	k.disk += n * blk
	switch q {
	case reqAS:
		k.as += n
	case reqTGS:
		k.tgs += n
	}
	k.svc[q] += n
	k.scpu[q] += n * cpu
	k.sblk[q] += n * blk
}

func (k *kdc) Gather() ([]*dto.MetricFamily, error) {
	reg := prometheus.NewRegistry()
	add := func(name string, labels []string, v float64, lv ...string) {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: "h"}, labels)
		reg.MustRegister(c)
		c.WithLabelValues(lv...).Add(v)
	}
	if !k.noKDCCPU {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: mProcessCPU, Help: "h"}, []string{"program", "mode"})
		reg.MustRegister(c)
		c.WithLabelValues("krb5kdc", "user").Add(k.cpu * 0.7)
		c.WithLabelValues("krb5kdc", "system").Add(k.cpu * 0.3)
		c.WithLabelValues("kadmind", "user").Add(1000) // not the KDC's
	}
	if !k.noDisk {
		add(mProcessDisk, []string{"program"}, k.disk, "krb5kdc")
	}
	w := prometheus.NewGauge(prometheus.GaugeOpts{Name: mWorkers, Help: "h"})
	w.Set(k.workers)
	reg.MustRegister(w)
	r := prometheus.NewCounterVec(prometheus.CounterOpts{Name: mRequests, Help: "h"}, []string{"request", "status"})
	reg.MustRegister(r)
	r.WithLabelValues("as", "ISSUE").Add(k.as / 2)
	r.WithLabelValues("as", "NEEDED_PREAUTH").Add(k.as / 2)
	r.WithLabelValues("tgs", "ISSUE").Add(k.tgs)
	if k.traced {
		up := prometheus.NewGauge(prometheus.GaugeOpts{Name: mTracingUp, Help: "h"})
		up.Set(1)
		reg.MustRegister(up)
		split := prometheus.NewCounterVec(prometheus.CounterOpts{Name: mSplit, Help: "h"}, []string{"request", "state"})
		hist := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: mService, Help: "h"}, []string{"request", "transport"})
		reg.MustRegister(split, hist)
		for q := range numReq {
			split.WithLabelValues(reqNames[q], "cpu").Add(k.scpu[q])
			split.WithLabelValues(reqNames[q], "blocked").Add(k.sblk[q])
			split.WithLabelValues(reqNames[q], "runqueue").Add(k.svc[q] * 0.01) // not the KDC's own
			for range int(k.svc[q]) {
				hist.WithLabelValues(reqNames[q], "udp").Observe(0.001)
			}
		}
		add(mOutside, []string{"worker"}, k.outside, "0")
	}
	return reg.Gather()
}

// clock is a settable Config.Now.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newFake(workers float64, cpus int) (*kdc, *clock, *Gatherer) {
	k := &kdc{workers: workers}
	c := &clock{t: time.Unix(1e9, 0)}
	g := New(k, Config{Now: c.now, CPUs: func() int { return cpus }, MinRequests: 200})
	return k, c, g
}

func capacityOf(t *testing.T, g prometheus.Gatherer, request string) (float64, string, bool) {
	t.Helper()
	s := testutil.Gather(t, g)
	mf := s.MFs[MetricCapacity]
	for _, m := range mf.GetMetric() {
		if label(m, "request") == request {
			return m.GetGauge().GetValue(), label(m, "source"), true
		}
	}
	return 0, "", false
}

func near(t *testing.T, what string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-6*want {
		t.Errorf("%s = %g, want %g", what, got, want)
	}
}

// TestProcSource: the capacity of a KDC from its CPU and disk waits per
// request: absent below the minimum of requests, then W / (cpu + disk)
// bounded by P / cpu, the figures computed here from what was served.
func TestProcSource(t *testing.T) {
	k, c, g := newFake(0, 2) // a single-process KDC: one worker
	testutil.Gather(t, g)
	k.serve(reqAS, 150, 0.0005, 0)
	c.t = c.t.Add(30 * time.Second)
	if v, _, ok := capacityOf(t, g, "mix"); ok {
		t.Fatalf("an estimate (%g) from 150 requests, below the minimum of 200", v)
	}
	k.serve(reqAS, 100, 0.0005, 0)
	c.t = c.t.Add(30 * time.Second)
	v, src, ok := capacityOf(t, g, "as")
	if !ok || src != SourceProc {
		t.Fatalf("no estimate from the proc source after 250 requests (%v %q)", ok, src)
	}
	near(t, "as capacity", v, 1/0.0005)
	mix, _, _ := capacityOf(t, g, "mix")
	near(t, "mix capacity", mix, 1/0.0005)
	if _, _, ok := capacityOf(t, g, "tgs"); ok {
		t.Error("a tgs estimate without a tgs request")
	}

	// Disk-bound: 2 workers, 0.2 ms CPU and 0.8 ms disk each: 2 / 1 ms.
	k, c, g = newFake(2, 2)
	testutil.Gather(t, g)
	k.serve(reqAS, 1000, 0.0002, 0.0008)
	c.t = c.t.Add(time.Minute)
	v, _, _ = capacityOf(t, g, "as")
	near(t, "disk-bound capacity", v, 2/0.001)

	// CPU-bound: 4 workers on 1 CPU, 0.5 ms CPU and 0.1 ms disk: 1 / 0.5 ms.
	k, c, g = newFake(4, 1)
	testutil.Gather(t, g)
	k.serve(reqTGS, 1000, 0.0005, 0.0001)
	c.t = c.t.Add(time.Minute)
	v, _, _ = capacityOf(t, g, "tgs")
	near(t, "CPU-bound capacity", v, 1/0.0005)
	// The affinity unknown (0): one CPU per worker, 4 / 0.6 ms.
	g.cfg.CPUs = func() int { return 0 }
	v, _, _ = capacityOf(t, g, "tgs")
	near(t, "capacity with unknown affinity", v, 4/0.0006)
}

// TestProcSourceSplitsVaryingMix: a window whose mix varied gives each
// type its own cost by least squares; a mix that does not vary gives none.
func TestProcSourceSplitsVaryingMix(t *testing.T) {
	k, c, g := newFake(0, 1)
	testutil.Gather(t, g)
	for i := range 6 {
		k.serve(reqAS, float64(100+80*i), 0.0004, 0.0001)
		k.serve(reqTGS, float64(500-80*i), 0.0001, 0)
		c.t = c.t.Add(30 * time.Second)
		testutil.Gather(t, g)
	}
	as, _, okAS := capacityOf(t, g, "as")
	tgs, _, okTGS := capacityOf(t, g, "tgs")
	if !okAS || !okTGS {
		t.Fatalf("no per-type estimate from a varying mix (as %v, tgs %v)", okAS, okTGS)
	}
	near(t, "as", as, 1/0.0005)
	near(t, "tgs", tgs, 1/0.0001)

	k, c, g = newFake(0, 1)
	testutil.Gather(t, g)
	for range 6 {
		k.serve(reqAS, 100, 0.0004, 0)
		k.serve(reqTGS, 300, 0.0001, 0)
		c.t = c.t.Add(30 * time.Second)
		testutil.Gather(t, g)
	}
	if _, _, ok := capacityOf(t, g, "as"); ok {
		t.Error("a per-type estimate from a mix that never varied")
	}
	mix, _, _ := capacityOf(t, g, "mix")
	near(t, "mix", mix, 400/(100*0.0004+300*0.0001))
	if why := g.Status().Rows[0].Why; why != "a mix the proc source cannot split" {
		t.Errorf("status of as: %q", why)
	}
}

// TestServiceSource: with the kdcservice collector up, each type's cost
// is its on-CPU and blocked time in service plus an equal share of the
// CPU outside service; runqueue waits are not the KDC's own.
func TestServiceSource(t *testing.T) {
	k, c, g := newFake(2, 2)
	k.traced = true
	testutil.Gather(t, g)
	k.serve(reqAS, 300, 0.0003, 0.0007)
	k.serve(reqTGS, 300, 0.0001, 0)
	k.outside += 600 * 0.0001
	c.t = c.t.Add(time.Minute)
	as, src, _ := capacityOf(t, g, "as")
	if src != SourceKDCService {
		t.Fatalf("source %q with tracing up, want %q", src, SourceKDCService)
	}
	near(t, "as", as, 2/(0.0003+0.0001+0.0007)) // W / own: 1818 < P / cpu: 5000
	tgs, _, _ := capacityOf(t, g, "tgs")
	near(t, "tgs", tgs, 2/(0.0001+0.0001))
	mix, _, _ := capacityOf(t, g, "mix")
	near(t, "mix", mix, 2/((0.0011+0.0002)/2))
	// The landing page's view of the same: 600 requests in the minute.
	st := g.Status()
	if st.Source != SourceKDCService || st.Window != time.Minute || len(st.Rows) != 3 {
		t.Fatalf("status %+v", st)
	}
	m := st.Rows[2]
	near(t, "status mix capacity", m.Capacity, mix)
	near(t, "status mix rate", m.Rate, 10)
	near(t, "status mix utilization", m.Utilization(), 10/mix)
}

// TestWindowSlides: the KDC gets slower (each request blocked 4 ms more);
// once a window has passed the estimate is the slow KDC's alone.
func TestWindowSlides(t *testing.T) {
	k, c, g := newFake(0, 1)
	testutil.Gather(t, g)
	for range 10 {
		k.serve(reqAS, 300, 0.001, 0)
		c.t = c.t.Add(30 * time.Second)
		testutil.Gather(t, g)
	}
	fast, _, _ := capacityOf(t, g, "as")
	near(t, "fast", fast, 1000)
	for range 11 {
		k.serve(reqAS, 300, 0.001, 0.004)
		c.t = c.t.Add(30 * time.Second)
		testutil.Gather(t, g)
	}
	slow, _, _ := capacityOf(t, g, "as")
	near(t, "slow", slow, 200)
	if n := len(g.samples); n > 12 {
		t.Errorf("%d samples kept for a 5 min window scraped every 30 s", n)
	}
}

// TestNoKDC: without a running KDC there is no estimate, and a restart
// (its counters reset) does not make a negative cost.
func TestNoKDC(t *testing.T) {
	k, c, g := newFake(0, 1)
	k.noKDCCPU = true
	testutil.Gather(t, g)
	c.t = c.t.Add(time.Minute)
	if s := testutil.Gather(t, g); s.MFs[MetricCapacity] != nil || s.MFs[MetricWindowRequests] != nil {
		t.Error("an estimate without a KDC")
	}
	k.noKDCCPU = false
	k.serve(reqAS, 1000, 0.001, 0)
	c.t = c.t.Add(time.Minute)
	testutil.Gather(t, g)
	*k = kdc{}                    // restarted: every counter from 0
	k.serve(reqAS, 400, 0.002, 0) // below the old totals: a reset
	c.t = c.t.Add(time.Minute)
	v, _, ok := capacityOf(t, g, "as")
	if !ok {
		t.Fatal("no estimate after a restart")
	}
	near(t, "capacity over a restart", v, 1/0.002) // the interval without a KDC counts nothing
}
