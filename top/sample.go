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
	mAttackOffender = kdclog.MetricAttackOffender
	// The daemon's kdcservice collector (--collector.kdcservice), by the
	// names of its metric contract (docs/metrics.md).
	mServiceSeconds = "krb5_kdc_request_service_seconds"
	mServiceSplit   = "krb5_kdc_request_service_split_seconds_total"
	mQueueSeconds   = "krb5_kdc_request_queue_seconds"
	mWorkerService  = "krb5_kdc_worker_service_seconds_total"
	mWorkerServed   = "krb5_kdc_worker_service_requests_total"
	mTracingUp      = "krb5_kdc_service_tracing_up"
	mCapacity       = "krb5_kdc_capacity_requests_per_second"
	mTracingErrors  = "krb5_kdc_service_tracing_errors_total"
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
	cur := map[string]float64{}
	snap := Snapshot{At: now}
	var dt float64
	if s.prev != nil {
		snap.Interval = now.Sub(s.prevAt)
		dt = snap.Interval.Seconds()
	}
	rate := func(key string, v float64) float64 {
		cur[key] = v
		if dt <= 0 {
			return 0
		}
		old, ok := s.prev[key]
		if !ok {
			old = 0 // a series that appeared counts from zero
		}
		if v < old { // a reset (the exporter restarted its counter)
			return v / dt
		}
		return (v - old) / dt
	}
	rows := map[string]*Row{}
	row := func(name string) *Row {
		r := rows[name]
		if r == nil {
			r = &Row{Name: name, RSS: math.NaN()}
			rows[name] = r
		}
		return r
	}
	single := true // no per-worker CPU series: a single-process KDC, worker 0
	for _, mf := range mfs {
		if mf.GetName() == mWorkerCPU && len(mf.GetMetric()) > 0 {
			single = false
		}
		if mf.GetName() == mWorkerPID {
			s.sawPIDs = true
		}
	}
	var tracingReasons []string
	probes := map[string]*Probe{}
	probe := func(l labelSet) *Probe {
		k := l["target"] + "/" + l["exchange"]
		p := probes[k]
		if p == nil {
			p = &Probe{Target: l["target"], Exchange: l["exchange"]}
			probes[k] = p
		}
		return p
	}
	type durations struct{ dsum, dcount float64 }
	probeDur := map[string]*durations{}
	services := map[string]*histDelta{} // by request
	queues := map[string]*histDelta{}   // by transport
	split := map[string]float64{}       // request/state -> seconds per second
	// hist adds a histogram's change since the previous Sample to d (none
	// on the first; a reset counts from zero, as rate does).
	hist := func(key string, h *dto.Histogram, into map[string]*histDelta, by string) {
		d := into[by]
		if d == nil {
			d = &histDelta{buckets: map[float64]float64{}}
			into[by] = d
		}
		count := float64(h.GetSampleCount())
		_, seen := s.prev[key+"count"]
		reset := count < s.prev[key+"count"]
		delta := func(k string, v float64) float64 {
			cur[k] = v
			switch {
			case dt <= 0:
				return 0
			case reset || !seen:
				return v
			}
			return v - s.prev[k]
		}
		d.count += delta(key+"count", count)
		d.sum += delta(key+"sum", h.GetSampleSum())
		for _, b := range h.GetBucket() {
			ub := b.GetUpperBound()
			d.buckets[ub] += delta(key+"le="+strconv.FormatFloat(ub, 'g', -1, 64), float64(b.GetCumulativeCount()))
		}
	}
	var talk talkerSums
	for _, mf := range mfs {
		name := mf.GetName()
		for _, m := range mf.GetMetric() {
			l := labels(m)
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			key := name + "{" + l.String() + "}"
			if talk.add(name, l, v) {
				continue
			}
			switch name {
			case mWorkerRequests:
				r := row(l["worker"])
				x := rate(key, v)
				ok, step := outcome(l["status"])
				switch {
				case l["request"] == "as" && ok:
					r.ASOK += x
				case l["request"] == "as" && step:
					r.ASStep += x
				case l["request"] == "as":
					r.ASErr += x
				case ok:
					r.TGSOK += x
				case step:
					r.TGSStep += x
				default:
					r.TGSErr += x
				}
			case mWorkerCPU:
				row(l["worker"]).CPU += rate(key, v)
			case mWorkerRSS:
				row(l["worker"]).RSS = v
			case mWorkerPID:
				row(l["worker"]).PID = int(v)
			case mProcessCPU:
				if l["program"] == "krb5kdc" {
					x := rate(key, v)
					snap.Total.CPU += x
					if single {
						row("0").CPU += x
					}
				}
			case mProcessRSS:
				if l["program"] == "krb5kdc" {
					snap.Total.RSS = v
					if single {
						row("0").RSS = v
					}
				}
			case mKadmindAuth:
				snap.HasKadmin = true
			case mKadmind:
				snap.HasKadmin = true
				x := rate(key, v)
				snap.KadminOps += x
				if l["result"] != "success" {
					snap.KadminErr += x
				}
			case mUDPDrops:
				snap.HasNetwork = true
				snap.UDPDrops += rate(key, v)
			case mTCPOverflows:
				snap.HasNetwork = true
				snap.TCPOverflows += rate(key, v)
			case mServiceSeconds:
				if slices.Contains(serviceRequests, l["request"]) {
					hist(key, m.GetHistogram(), services, l["request"])
				}
			case mQueueSeconds:
				if slices.Contains(serviceTransports, l["transport"]) {
					hist(key, m.GetHistogram(), queues, l["transport"])
				}
			case mServiceSplit:
				if slices.Contains(serviceRequests, l["request"]) && slices.Contains(serviceStates, l["state"]) {
					split[l["request"]+"/"+l["state"]] += rate(key, v)
				}
			case mWorkerService:
				snap.HasService = true
				row(l["worker"]).ServiceSeconds += rate(key, v)
			case mWorkerServed:
				snap.HasService = true
				row(l["worker"]).ServiceRequests += rate(key, v)
			case mCapacity:
				if l["request"] == "mix" {
					snap.Capacity, snap.CapacitySource = v, l["source"]
				}
			case mTracingUp:
				if snap.Tracing == nil {
					snap.Tracing = &Tracing{}
				}
				snap.Tracing.Up = v == 1
			case mTracingErrors:
				if v > 0 && len(tracingReasons) < maxReasons {
					tracingReasons = append(tracingReasons, l["reason"])
				}
			case mAttackOffender:
				snap.Offenders = append(snap.Offenders, Offender{Signal: l["signal"], Name: l["offender"], Score: v})
			case mProbeSuccess:
				probe(l).OK = v == 1
			case mProbeDuration:
				h := m.GetHistogram()
				k := l["target"] + "/" + l["exchange"]
				d := probeDur[k]
				if d == nil {
					d = &durations{}
					probeDur[k] = d
				}
				// Deltas since the previous refresh; none on the first.
				if dt > 0 {
					sum, count := h.GetSampleSum(), float64(h.GetSampleCount())
					// A series that appeared counts from zero, as in rate.
					oldSum, oldCount := s.prev[key+"sum"], s.prev[key+"count"]
					if count > oldCount {
						d.dsum += sum - oldSum
						d.dcount += count - oldCount
					}
				}
				cur[key+"sum"], cur[key+"count"] = h.GetSampleSum(), float64(h.GetSampleCount())
			}
		}
	}
	if s.daemon != nil {
		snap.Daemon, snap.DaemonErr = s.daemon.URL(), s.daemon.Err()
	}
	for _, req := range serviceRequests {
		d := services[req]
		if d == nil {
			continue
		}
		sv := Service{Request: req, Rate: d.count / max(dt, 1e-9), P95: d.quantile(0.95), Mean: d.mean(),
			CPU: math.NaN(), RunQueue: math.NaN(), Blocked: math.NaN(), Stolen: math.NaN()}
		if dt <= 0 {
			sv.Rate = 0
		}
		if all := split[req+"/cpu"] + split[req+"/runqueue"] + split[req+"/blocked"] + split[req+"/stolen"]; all > 0 {
			sv.CPU, sv.RunQueue, sv.Blocked, sv.Stolen = split[req+"/cpu"]/all, split[req+"/runqueue"]/all, split[req+"/blocked"]/all, split[req+"/stolen"]/all
		}
		snap.Service = append(snap.Service, sv)
	}
	for _, tr := range serviceTransports {
		if d := queues[tr]; d != nil {
			snap.Queue = append(snap.Queue, Queue{Transport: tr, P95: d.quantile(0.95), Mean: d.mean()})
		}
	}
	if snap.Tracing != nil {
		slices.Sort(tracingReasons)
		snap.Tracing.Reasons = tracingReasons
	}
	for k, d := range probeDur {
		if d.dcount > 0 {
			s.latency[k] = time.Duration(d.dsum / d.dcount * float64(time.Second))
		}
	}
	for k, p := range probes {
		p.Latency = s.latency[k]
		snap.Probes = append(snap.Probes, *p)
	}
	for name := range s.seen {
		if rows[name] == nil {
			rows[name] = &Row{Name: name, RSS: math.NaN(), Gone: true}
		}
	}
	// Request counters outlive their process: with pids known, a row
	// without a running process is gone.
	for name, r := range rows {
		if s.sawPIDs && r.PID == 0 && name != "unknown" && name != "other" {
			r.Gone = true
		}
	}
	for name, r := range rows {
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
	snap.Talkers = talk.talkers()
	s.prev, s.prevAt = cur, now
	return snap, nil
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
var SortOrders = []string{ByName, ByRequests, ByCPU, ByErrors}

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
