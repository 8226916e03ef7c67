// Package top is `krb5-exporter top`: a live per-process view of a stock
// MIT KDC, the kstat of a KDC that was never patched for it. It gathers the
// daemon's own collectors run in process (the log collector, read from the
// logs' end: requests by worker and kadmind operations; the network
// collector: UDP drops, TCP listen overflows), its own Source (CPU, RSS and
// pid of each krb5kdc process under the worker index of internal/kdcproc)
// and the probe series of a running daemon (Daemon), and turns two gathers
// an interval apart into rates: AS and TGS requests per second by outcome,
// error share, CPU as a share of one core, RSS; and, where the daemon runs
// the opt-in kdcservice collector, the KDC's own time per request (p95,
// mean, its split into CPU, waiting for a CPU and blocked; per worker) and
// the requests' wait in the socket.
package top

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/krb5-exporter/krb5-exporter/collector"
	"github.com/krb5-exporter/krb5-exporter/internal/probestatus"
	"github.com/krb5-exporter/krb5-exporter/kdclog"
)

// Row is one KDC process (or the sum of them).
type Row struct {
	// Name is the worker index of internal/kdcproc (a single-process KDC
	// is worker 0), "supervisor", or for requests only "unknown" (a pid
	// that was no running KDC process) and "other" (see docs/metrics.md).
	Name string
	PID  int // 0 when not known
	// Requests per second answered by this process: AS and TGS issued
	// (OK), refused or failed (Err), pre-authentication steps (Step:
	// NEEDED_PREAUTH, MORE_PREAUTH_DATA_REQUIRED, which a login passes
	// through and which are not errors).
	ASOK, ASErr, ASStep    float64
	TGSOK, TGSErr, TGSStep float64
	CPU                    float64 // share of one core, 1 = 100 %
	RSS                    float64 // bytes, NaN when not known
	Gone                   bool    // had series before, none now
	// ServiceSeconds and ServiceRequests per second: the KDC's own time
	// serving requests and the requests served, from the daemon's
	// kdcservice collector (Snapshot.HasService).
	ServiceSeconds, ServiceRequests float64
}

// ServiceMean is the mean service time per request in seconds, NaN when
// the row served none.
func (r *Row) ServiceMean() float64 {
	if r.ServiceRequests <= 0 {
		return math.NaN()
	}
	return r.ServiceSeconds / r.ServiceRequests
}

// Requests is every request per second of the row.
func (r *Row) Requests() float64 {
	return r.ASOK + r.ASErr + r.ASStep + r.TGSOK + r.TGSErr + r.TGSStep
}

// ErrorRatio is the share of final answers that were errors (steps of a
// login excluded), NaN when there were none.
func (r *Row) ErrorRatio() float64 {
	final := r.ASOK + r.ASErr + r.TGSOK + r.TGSErr
	if final == 0 {
		return math.NaN()
	}
	return (r.ASErr + r.TGSErr) / final
}

// Probe is the latest result of one probe of a running daemon.
type Probe struct {
	Target, Exchange string
	OK               bool
	// Latency is the duration of the latest successful exchange(s): the
	// mean of those that completed since the previous refresh, else the
	// last one seen; 0 before top has seen one.
	Latency time.Duration
	// Reason is the failure's class (connection_refused, timeout, a
	// KDC_ERR_ name): the result counted most since the previous refresh,
	// else the one counted most so far; "" while it succeeds.
	Reason string
	failed float64 // the reason's count
}

// Snapshot is one refresh of the view.
type Snapshot struct {
	At       time.Time
	Interval time.Duration // since the previous gather; 0 for the first
	Rows     []Row
	Total    Row
	// KadminOps and KadminErr are kadmind operations per second.
	KadminOps, KadminErr   float64
	UDPDrops, TCPOverflows float64 // per second
	Probes                 []Probe
	// Daemon is the daemon whose probes are shown ("" when none is read),
	// DaemonErr why it could not be read.
	Daemon    string
	DaemonErr error
	// HasKadmin and HasNetwork say whether those series were gathered at
	// all (top's own sources have neither), so no 0 is shown for unknown.
	HasKadmin, HasNetwork bool
	// Offenders are the daemon's attack signals' offenders of the current
	// window (krb5_kdc_attack_offender_score), by signal, best first.
	Offenders []Offender
	// From the daemon's opt-in kdcservice collector (--collector.kdcservice):
	// HasService when it has per-worker service time (then the rows'
	// Service fields are known), Service per request type and Queue per
	// transport when it has those histograms, Tracing when it reports
	// whether it is attached.
	HasService bool
	Service    []Service
	Queue      []Queue
	Tracing    *Tracing
	// Talkers are the daemon's top talkers of its last complete window
	// (talkers.go), by kind, busiest first.
	Talkers []Talker
	// KDCUp: top's Source found the KDC's processes (KDCKnown: it looks
	// for them at all); LastSeen is when it last did (zero: never since
	// top started). OtherKDCs are other KDCs on the host, not shown.
	KDCUp, KDCKnown bool
	LastSeen        time.Time
	OtherKDCs       int
	// Capacity is the daemon's live estimate of the requests per second
	// the KDC could answer at the current mix (0: none yet), from
	// CapacitySource.
	Capacity       float64
	CapacitySource string
}

// Service is the KDC's own time per request of one request type over the
// interval: from its receive of a request to its send of the reply.
type Service struct {
	Request string  // as, tgs, other
	Rate    float64 // requests per second
	// P95 and Mean in seconds, NaN when no request was served.
	P95, Mean float64
	// CPU, RunQueue, Blocked and Stolen are the shares of the service
	// time on a CPU, waiting for one, asleep (disk, database lock) and
	// taken by the hypervisor; NaN without the split series or time.
	CPU, RunQueue, Blocked, Stolen float64
}

// Queue is the time requests of one transport waited in the KDC's socket
// before it read them, over the interval.
type Queue struct {
	Transport string
	P95, Mean float64 // seconds, NaN when none was read
}

// Tracing is whether the daemon's kdcservice collector is attached, and if
// not, the reasons it counted (krb5_kdc_service_tracing_errors_total).
type Tracing struct {
	Up      bool
	Reasons []string // sorted
}

// Offender is one of an attack signal's top k in the daemon's window.
type Offender struct {
	Signal, Name string // Name as the daemon exports it: show it with Printable
	Score        float64
}

// The series the view is made of (see docs/metrics.md).
const (
	// Top's own Source (source.go) defines these three.
	mWorkerCPU = "krb5_kdc_worker_cpu_seconds_total"
	mWorkerRSS = "krb5_kdc_worker_resident_memory_bytes"
	mWorkerPID = "krb5_kdc_worker_pid" // only on top's own registry
	mOtherKDCs = "krb5_top_other_kdcs" // likewise
	// The daemon's collectors define the others: their names come from
	// there, so a rename there is one here.
	mWorkerRequests = kdclog.MetricWorkerRequests
	mProcessCPU     = collector.MetricProcessCPU
	mProcessRSS     = collector.MetricProcessRSS
	mKadmind        = kdclog.MetricKadmindRequests
	mKadmindAuth    = kdclog.MetricKadmindAuthFailures // present when a kadmind log is read
	mUDPDrops       = collector.MetricUDPDrops
	mTCPOverflows   = collector.MetricTCPListenOverflows
	mProbeSuccess   = probestatus.MetricSuccess
	mProbeDuration  = probestatus.MetricDuration
	mProbeTotal     = probestatus.MetricTotal
	mAttackOffender = kdclog.MetricAttackOffender
	// The daemon's kdcservice collector (--collector.kdcservice), by the
	// names of its metric contract (docs/metrics.md).
	mServiceSeconds = "krb5_kdc_request_service_seconds"
	mServiceSplit   = "krb5_kdc_request_service_split_seconds_total"
	mQueueSeconds   = "krb5_kdc_request_queue_seconds"
	mWorkerService  = "krb5_kdc_worker_service_seconds_total"
	mWorkerServed   = "krb5_kdc_worker_service_requests_total"
	mTracingUp      = "krb5_kdc_service_tracing_up"
	mTracingErrors  = "krb5_kdc_service_tracing_errors_total"
	mCapacity       = "krb5_kdc_capacity_requests_per_second"
)

// The label values of the kdcservice series top shows; others (from a
// daemon top does not know) are left out, which bounds the lines.
var (
	serviceRequests   = []string{"as", "tgs", "other"}
	serviceTransports = []string{"udp", "tcp"}
	serviceStates     = []string{"cpu", "runqueue", "blocked", "stolen"}
)

// Sampler turns gathers of g into Snapshots.
type Sampler struct {
	g      prometheus.Gatherer
	prev   map[string]float64
	prevAt time.Time
	seen   map[string]bool // row names seen so far, to show the gone
	// latency is the last probe latency seen, by target/exchange.
	latency map[string]time.Duration
	sawPIDs bool // the krb5kdc processes are known (top's Source)
	daemon  *Daemon
	// lastSeen is when the KDC's processes were last found.
	lastSeen time.Time
}

// ReadDaemon tells the sampler that d is among its gatherer's sources, to
// show where the probes come from and whether that worked.
func (s *Sampler) ReadDaemon(d *Daemon) { s.daemon = d }

// NewSampler samples g.
func NewSampler(g prometheus.Gatherer) *Sampler {
	return &Sampler{g: g, seen: map[string]bool{}, latency: map[string]time.Duration{}}
}

// Sample gathers once; rates are over the time since the previous Sample
// (all zero on the first).
func (s *Sampler) Sample(now time.Time) (Snapshot, error) {
	mfs, err := s.g.Gather()
	if err != nil && len(mfs) == 0 {
		return Snapshot{}, err
	}
	g := &gather{s: s, snap: Snapshot{At: now}, cur: map[string]float64{}, rows: map[string]*Row{}, single: true,
		probes: map[string]*Probe{}, probeDur: map[string]*durations{}, services: map[string]*histDelta{},
		queues: map[string]*histDelta{}, split: map[string]float64{}}
	if s.prev != nil {
		g.snap.Interval = now.Sub(s.prevAt)
		g.dt = g.snap.Interval.Seconds()
	}
	for _, mf := range mfs {
		if mf.GetName() == mWorkerCPU && len(mf.GetMetric()) > 0 {
			g.single = false // per-worker CPU series: not a single-process KDC
		}
		if mf.GetName() == mWorkerPID {
			s.sawPIDs = true
		}
	}
	for _, mf := range mfs {
		name := mf.GetName()
		for _, m := range mf.GetMetric() {
			l := labels(m)
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			key := name + "{" + l.String() + "}"
			if g.talk.add(name, l, v) {
				continue
			}
			if h := handlers[name]; h != nil {
				h(g, sample{l, m, key, v})
			}
		}
	}
	return g.finish(now), nil
}

// sample is one series of a gather: its labels, the metric, the key its
// previous value is kept under, and its value (counter or gauge).
type sample struct {
	l   labelSet
	m   *dto.Metric
	key string
	v   float64
}

// handlers take the series of each metric the view is made of into the
// snapshot being built: one entry a metric, so that a new series is one
// line here and a function.
var handlers = map[string]func(*gather, sample){
	mWorkerRequests: (*gather).workerRequests,
	mWorkerCPU:      func(g *gather, x sample) { g.row(x.l["worker"]).CPU += g.rate(x.key, x.v) },
	mWorkerRSS:      func(g *gather, x sample) { g.row(x.l["worker"]).RSS = x.v },
	mWorkerPID:      func(g *gather, x sample) { g.row(x.l["worker"]).PID = int(x.v) },
	mProcessCPU:     (*gather).processCPU,
	mProcessRSS:     (*gather).processRSS,
	mKadmindAuth:    func(g *gather, _ sample) { g.snap.HasKadmin = true },
	mKadmind:        (*gather).kadmind,
	mUDPDrops: func(g *gather, x sample) {
		g.snap.HasNetwork = true
		g.snap.UDPDrops += g.rate(x.key, x.v)
	},
	mTCPOverflows: func(g *gather, x sample) {
		g.snap.HasNetwork = true
		g.snap.TCPOverflows += g.rate(x.key, x.v)
	},
	mServiceSeconds: func(g *gather, x sample) {
		if slices.Contains(serviceRequests, x.l["request"]) {
			g.hist(x.key, x.m.GetHistogram(), g.services, x.l["request"])
		}
	},
	mQueueSeconds: func(g *gather, x sample) {
		if slices.Contains(serviceTransports, x.l["transport"]) {
			g.hist(x.key, x.m.GetHistogram(), g.queues, x.l["transport"])
		}
	},
	mServiceSplit: func(g *gather, x sample) {
		if slices.Contains(serviceRequests, x.l["request"]) && slices.Contains(serviceStates, x.l["state"]) {
			g.split[x.l["request"]+"/"+x.l["state"]] += g.rate(x.key, x.v)
		}
	},
	mWorkerService: func(g *gather, x sample) {
		g.snap.HasService = true
		g.row(x.l["worker"]).ServiceSeconds += g.rate(x.key, x.v)
	},
	mWorkerServed: func(g *gather, x sample) {
		g.snap.HasService = true
		g.row(x.l["worker"]).ServiceRequests += g.rate(x.key, x.v)
	},
	mTracingUp: func(g *gather, x sample) {
		if g.snap.Tracing == nil {
			g.snap.Tracing = &Tracing{}
		}
		g.snap.Tracing.Up = x.v == 1
	},
	mTracingErrors: func(g *gather, x sample) {
		if x.v > 0 && len(g.tracingReasons) < maxReasons {
			g.tracingReasons = append(g.tracingReasons, x.l["reason"])
		}
	},
	mAttackOffender: func(g *gather, x sample) {
		g.snap.Offenders = append(g.snap.Offenders, Offender{Signal: x.l["signal"], Name: x.l["offender"], Score: x.v})
	},
	mProbeSuccess:  func(g *gather, x sample) { g.probe(x.l).OK = x.v == 1 },
	mProbeTotal:    (*gather).probeTotal,
	mProbeDuration: (*gather).probeDuration,
	mOtherKDCs:     func(g *gather, x sample) { g.snap.OtherKDCs = int(x.v) },
	mCapacity: func(g *gather, x sample) {
		if x.l["request"] == "mix" {
			g.snap.Capacity, g.snap.CapacitySource = x.v, x.l["source"]
		}
	},
}

// gather is one Sample's state: the snapshot being built and what its
// series add up to.
type gather struct {
	s    *Sampler
	snap Snapshot
	cur  map[string]float64 // this gather's values, the next one's prev
	dt   float64            // seconds since the previous gather; 0 on the first
	rows map[string]*Row
	// single: no per-worker CPU series, a single-process KDC (worker 0).
	single         bool
	probes         map[string]*Probe
	probeDur       map[string]*durations
	services       map[string]*histDelta // by request
	queues         map[string]*histDelta // by transport
	split          map[string]float64    // request/state -> seconds per second
	tracingReasons []string
	talk           talkerSums
}

type durations struct{ dsum, dcount float64 }

// rate is a counter's rate since the previous gather: a series that
// appeared counts from zero, a reset (the exporter restarted) from zero
// too.
func (g *gather) rate(key string, v float64) float64 {
	g.cur[key] = v
	if g.dt <= 0 {
		return 0
	}
	old := g.s.prev[key]
	if v < old {
		return v / g.dt
	}
	return (v - old) / g.dt
}

func (g *gather) row(name string) *Row {
	r := g.rows[name]
	if r == nil {
		r = &Row{Name: name, RSS: math.NaN()}
		g.rows[name] = r
	}
	return r
}

func (g *gather) probe(l labelSet) *Probe {
	k := l["target"] + "/" + l["exchange"]
	p := g.probes[k]
	if p == nil {
		p = &Probe{Target: l["target"], Exchange: l["exchange"]}
		g.probes[k] = p
	}
	return p
}

// hist adds a histogram's change since the previous gather to into[by]
// (none on the first; a reset counts from zero, as rate does).
func (g *gather) hist(key string, h *dto.Histogram, into map[string]*histDelta, by string) {
	d := into[by]
	if d == nil {
		d = &histDelta{buckets: map[float64]float64{}}
		into[by] = d
	}
	count := float64(h.GetSampleCount())
	_, seen := g.s.prev[key+"count"]
	reset := count < g.s.prev[key+"count"]
	delta := func(k string, v float64) float64 {
		g.cur[k] = v
		switch {
		case g.dt <= 0:
			return 0
		case reset || !seen:
			return v
		}
		return v - g.s.prev[k]
	}
	d.count += delta(key+"count", count)
	d.sum += delta(key+"sum", h.GetSampleSum())
	for _, b := range h.GetBucket() {
		ub := b.GetUpperBound()
		d.buckets[ub] += delta(key+"le="+strconv.FormatFloat(ub, 'g', -1, 64), float64(b.GetCumulativeCount()))
	}
}

func (g *gather) workerRequests(x sample) {
	r := g.row(x.l["worker"])
	v := g.rate(x.key, x.v)
	ok, step := outcome(x.l["status"])
	switch {
	case x.l["request"] == "as" && ok:
		r.ASOK += v
	case x.l["request"] == "as" && step:
		r.ASStep += v
	case x.l["request"] == "as":
		r.ASErr += v
	case ok:
		r.TGSOK += v
	case step:
		r.TGSStep += v
	default:
		r.TGSErr += v
	}
}

func (g *gather) processCPU(x sample) {
	if x.l["program"] != "krb5kdc" {
		return
	}
	v := g.rate(x.key, x.v)
	g.snap.Total.CPU += v
	if g.single {
		g.row("0").CPU += v
	}
}

func (g *gather) processRSS(x sample) {
	if x.l["program"] != "krb5kdc" {
		return
	}
	g.snap.Total.RSS = x.v
	if g.single {
		g.row("0").RSS = x.v
	}
}

func (g *gather) kadmind(x sample) {
	g.snap.HasKadmin = true
	v := g.rate(x.key, x.v)
	g.snap.KadminOps += v
	if x.l["result"] != "success" {
		g.snap.KadminErr += v
	}
}

// probeTotal keeps a failing probe's reason: the result counted most
// since the previous gather, else the one counted most so far.
func (g *gather) probeTotal(x sample) {
	res := x.l["result"]
	if res == probestatus.ClassSuccess {
		return
	}
	p := g.probe(x.l)
	n := g.rate(x.key, x.v) * 1e9 // counted since the previous gather first...
	if n == 0 {
		n = x.v // ...else so far
	}
	if n > p.failed {
		p.Reason, p.failed = res, n
	}
}

// probeDuration adds the exchanges completed since the previous gather
// (none on the first; a series that appeared counts from zero, as in rate).
func (g *gather) probeDuration(x sample) {
	h := x.m.GetHistogram()
	k := x.l["target"] + "/" + x.l["exchange"]
	d := g.probeDur[k]
	if d == nil {
		d = &durations{}
		g.probeDur[k] = d
	}
	if g.dt > 0 {
		sum, count := h.GetSampleSum(), float64(h.GetSampleCount())
		oldSum, oldCount := g.s.prev[x.key+"sum"], g.s.prev[x.key+"count"]
		if count > oldCount {
			d.dsum += sum - oldSum
			d.dcount += count - oldCount
		}
	}
	g.cur[x.key+"sum"], g.cur[x.key+"count"] = h.GetSampleSum(), float64(h.GetSampleCount())
}

// finish turns what the series added up to into the snapshot.
func (g *gather) finish(now time.Time) Snapshot {
	s, snap, dt := g.s, &g.snap, g.dt
	if s.daemon != nil {
		snap.Daemon, snap.DaemonErr = s.daemon.URL(), s.daemon.Err()
	}
	for _, req := range serviceRequests {
		d := g.services[req]
		if d == nil {
			continue
		}
		sv := Service{Request: req, Rate: d.count / max(dt, 1e-9), P95: d.quantile(0.95), Mean: d.mean(),
			CPU: math.NaN(), RunQueue: math.NaN(), Blocked: math.NaN(), Stolen: math.NaN()}
		if dt <= 0 {
			sv.Rate = 0
		}
		if all := g.split[req+"/cpu"] + g.split[req+"/runqueue"] + g.split[req+"/blocked"] + g.split[req+"/stolen"]; all > 0 {
			sv.CPU, sv.RunQueue, sv.Blocked, sv.Stolen = g.split[req+"/cpu"]/all, g.split[req+"/runqueue"]/all, g.split[req+"/blocked"]/all, g.split[req+"/stolen"]/all
		}
		snap.Service = append(snap.Service, sv)
	}
	for _, tr := range serviceTransports {
		if d := g.queues[tr]; d != nil {
			snap.Queue = append(snap.Queue, Queue{Transport: tr, P95: d.quantile(0.95), Mean: d.mean()})
		}
	}
	if snap.Tracing != nil {
		slices.Sort(g.tracingReasons)
		snap.Tracing.Reasons = g.tracingReasons
	}
	for k, d := range g.probeDur {
		if d.dcount > 0 {
			s.latency[k] = time.Duration(d.dsum / d.dcount * float64(time.Second))
		}
	}
	for k, p := range g.probes {
		p.Latency = s.latency[k]
		if p.OK {
			p.Reason = ""
		}
		snap.Probes = append(snap.Probes, *p)
	}
	for name := range s.seen {
		if g.rows[name] == nil {
			g.rows[name] = &Row{Name: name, RSS: math.NaN(), Gone: true}
		}
	}
	// Request counters outlive their process: with pids known, a row
	// without a running process is gone.
	for name, r := range g.rows {
		if s.sawPIDs && r.PID == 0 && name != "unknown" && name != "other" {
			r.Gone = true
		}
	}
	for name, r := range g.rows {
		s.seen[name] = true
		snap.Rows = append(snap.Rows, *r)
		snap.Total.ASOK += r.ASOK
		snap.Total.ASErr += r.ASErr
		snap.Total.ASStep += r.ASStep
		snap.Total.TGSOK += r.TGSOK
		snap.Total.TGSErr += r.TGSErr
		snap.Total.TGSStep += r.TGSStep
		snap.Total.ServiceSeconds += r.ServiceSeconds
		snap.Total.ServiceRequests += r.ServiceRequests
	}
	snap.Total.Name = "total"
	snap.KDCKnown = s.sawPIDs
	for _, r := range snap.Rows {
		if r.PID > 0 && !r.Gone {
			snap.KDCUp = true
		}
	}
	if snap.KDCUp {
		s.lastSeen = now
	}
	snap.LastSeen = s.lastSeen
	if snap.Total.CPU == 0 && snap.Total.RSS == 0 { // no whole-program series: add up the rows
		for _, r := range snap.Rows {
			snap.Total.CPU += r.CPU
			if !math.IsNaN(r.RSS) {
				snap.Total.RSS += r.RSS
			}
		}
	}
	if snap.Total.RSS == 0 {
		snap.Total.RSS = math.NaN()
	}
	SortRows(snap.Rows, ByName)
	// The KDC's own exchanges first: top is a view of the KDC, and a line
	// cut at the terminal's width keeps them; kadmind's probes follow.
	slices.SortFunc(snap.Probes, func(a, b Probe) int {
		if ka, kb := kadmindExchange(a.Exchange), kadmindExchange(b.Exchange); ka != kb {
			if ka {
				return 1
			}
			return -1
		}
		return strings.Compare(a.Target+"/"+a.Exchange, b.Target+"/"+b.Exchange)
	})
	slices.SortFunc(snap.Offenders, func(a, b Offender) int {
		if c := strings.Compare(a.Signal, b.Signal); c != 0 {
			return c
		}
		return cmpDesc(a.Score, b.Score)
	})
	snap.Talkers = g.talk.talkers()
	s.prev, s.prevAt = g.cur, now
	return *snap
}

// maxReasons bounds the tracing error reasons shown.
const maxReasons = 4

// histDelta is a classic histogram's change over one interval: cumulative
// counts by upper bound, summed over the series of one request type or
// transport (the collector gives them the same buckets).
type histDelta struct {
	buckets    map[float64]float64
	sum, count float64
}

// quantile is q of the observations, interpolated within its bucket as
// PromQL's histogram_quantile does (the first bucket from 0; in the +Inf
// bucket, the highest finite bound); NaN without observations.
func (d *histDelta) quantile(q float64) float64 {
	if d.count <= 0 {
		return math.NaN()
	}
	bounds := make([]float64, 0, len(d.buckets))
	for b := range d.buckets {
		if !math.IsInf(b, 1) {
			bounds = append(bounds, b)
		}
	}
	slices.Sort(bounds)
	rank := q * d.count
	lower, below := 0.0, 0.0
	for _, b := range bounds {
		c := d.buckets[b]
		if c >= rank {
			if c == below {
				return b
			}
			return lower + (b-lower)*(rank-below)/(c-below)
		}
		lower, below = b, c
	}
	return lower
}

func (d *histDelta) mean() float64 {
	if d.count <= 0 {
		return math.NaN()
	}
	return d.sum / d.count
}

// outcome sorts a logged status: ISSUE is success; NEEDED_PREAUTH and
// MORE_PREAUTH_DATA_REQUIRED are steps of a login; anything else an error.
func outcome(status string) (ok, step bool) {
	switch status {
	case "ISSUE":
		return true, false
	case "NEEDED_PREAUTH", "MORE_PREAUTH_DATA_REQUIRED":
		return false, true
	}
	return false, false
}

type labelSet map[string]string

func labels(m *dto.Metric) labelSet {
	l := labelSet{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

func (l labelSet) String() string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + strconv.Quote(l[k]) + ",")
	}
	return b.String()
}

// Sort orders of the rows.
const (
	ByName     = "name"
	ByRequests = "requests"
	ByCPU      = "cpu"
	ByErrors   = "errors"
)

// SortOrders lists the orders in the order the `s` key cycles through.
var SortOrders = []string{ByCPU, ByRequests, ByErrors, ByName}

// SortRows orders rows: by name numerically (main and supervisor first),
// or by a value, highest first.
func SortRows(rows []Row, by string) {
	slices.SortStableFunc(rows, func(a, b Row) int {
		switch by {
		case ByRequests:
			return cmpDesc(a.Requests(), b.Requests())
		case ByCPU:
			return cmpDesc(a.CPU, b.CPU)
		case ByErrors:
			return cmpDesc(a.ASErr+a.TGSErr, b.ASErr+b.TGSErr)
		}
		return cmpName(a.Name, b.Name)
	})
}

func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

func cmpName(a, b string) int {
	ai, aerr := strconv.Atoi(a)
	bi, berr := strconv.Atoi(b)
	switch {
	case aerr == nil && berr == nil:
		return ai - bi
	case aerr == nil:
		return 1
	case berr == nil:
		return -1
	}
	return strings.Compare(a, b)
}

// kadmindExchange reports whether a probe exchange is one of the kpasswd
// and kadmin probers' (kpasswd_as, kpasswd, kadmin_rpc).
func kadmindExchange(ex string) bool {
	return ex == probestatus.ExchangeKpasswdAS || ex == probestatus.ExchangeKpasswd || ex == probestatus.ExchangeKadminRPC
}
