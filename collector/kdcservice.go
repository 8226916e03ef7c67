package collector

import (
	"errors"
	"strconv"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/krb5-exporter/krb5-exporter/internal/kdcbpf"
	"github.com/krb5-exporter/krb5-exporter/internal/kdcproc"
)

// The names of the series other packages read (alerts, dashboards, top).
const (
	MetricKDCServiceSeconds = "krb5_kdc_request_service_seconds"
	MetricKDCQueueSeconds   = "krb5_kdc_request_queue_seconds"
)

// kdcServiceCollector times each request of the watched krb5kdc processes
// in the kernel (internal/kdcbpf): service time by request type and
// transport, its split into on CPU, waiting for a CPU, blocked and stolen, the UDP
// queue time, and per worker. The program is loaded once, when the
// collector is made; without the privileges or the kernel hooks it needs,
// the collector logs one line and reports itself down.
type kdcServiceCollector struct {
	scan   *procScanner
	slots  *kdcproc.Workers
	logger log.Logger
	tracer *kdcbpf.Tracer // nil: not loaded

	errs    map[string]float64 // by reason
	snap    kdcbpf.Snapshot
	full    uint64 // snap.MapFull() of the scrape before
	warned  bool   // a table was full at the scrape before: logged
	missed  uint64 // snap.MissedReturns of the scrape before
	missing bool   // returns were missed at the scrape before: logged
	pids    []int
	last    map[int]kdcbpf.Worker // by pid: the totals read last
	byIdx   map[int]*kdcbpf.Worker

	service, split, warm, warmSplit, queue, workerService, workerRequests, workerCPU, workerOutside, up, info, errors *prometheus.Desc

	labels      [kdcbpf.NumRequests][kdcbpf.NumTransports][]*dto.LabelPair
	queueLabels []*dto.LabelPair
}

// Classic buckets of the histograms: powers of two from 2^-16 s (15 µs)
// to 2 s. Each is a bound of the native buckets (schema 3), so both come
// exactly from the same counts.
const classicMin, classicMax = -16, 1

func newKDCServiceCollector(scan *procScanner, slots *kdcproc.Workers, logger log.Logger, load func() (*kdcbpf.Tracer, error)) *kdcServiceCollector {
	c := &kdcServiceCollector{
		scan:   scan,
		slots:  slots,
		logger: logger,
		errs:   map[string]float64{},
		last:   map[int]kdcbpf.Worker{},
		byIdx:  map[int]*kdcbpf.Worker{},
		service: prometheus.NewDesc(MetricKDCServiceSeconds,
			"Time krb5kdc worked on a request: from its receive system call returning the request to its send of the reply, measured in the kernel (eBPF), by request type (the ASN.1 tag) and transport. Native-histogram buckets too, for scrapers that negotiate protobuf.",
			[]string{"request", "transport"}, nil),
		split: desc("kdc", "request_service_split_seconds_total",
			"The service time of krb5kdc's requests split by what the process was doing: on CPU, runnable waiting for a CPU (runqueue), blocked (disk, locks, sleep), or stolen (on a CPU the hypervisor took: steal time).",
			"request", "state"),
		warm: desc("kdc", "request_service_warm_requests_total",
			"Requests krb5kdc began without blocking since its previous reply (warm: the request was already waiting, as every request is at saturation), by request type; a share of the requests of krb5_kdc_request_service_seconds.",
			"request"),
		warmSplit: desc("kdc", "request_service_warm_seconds_total",
			"Of the warm requests (krb5_kdc_request_service_warm_requests_total): their service time on CPU (cpu) and blocked (blocked), and the time from the previous reply to their start less its waits for a CPU (gap: the worker's event loop, logging, the receive; its cycle outside service).",
			"request", "state"),
		queue: prometheus.NewDesc(MetricKDCQueueSeconds,
			"Time a request waited before krb5kdc read it: from the datagram's arrival in the host's network stack to the KDC's receive call that dequeues it (UDP only).",
			[]string{"transport"}, nil),
		workerService: desc("kdc", "worker_service_seconds_total",
			"Service time of the requests one krb5kdc worker answered (worker as in krb5_kdc_worker_cpu_seconds_total).", "worker"),
		workerRequests: desc("kdc", "worker_service_requests_total",
			"Requests one krb5kdc worker answered, as timed by the kdcservice collector.", "worker"),
		workerCPU: desc("kdc", "worker_service_cpu_seconds_total",
			"The on-CPU part of krb5_kdc_worker_service_seconds_total: time one krb5kdc worker was on CPU while serving a request.", "worker"),
		workerOutside: desc("kdc", "worker_outside_service_cpu_seconds_total",
			"Time one krb5kdc worker was on CPU outside service (its event loop, the receive and send calls' own work, logging after the reply, receives that found nothing); with krb5_kdc_worker_service_cpu_seconds_total, the worker's CPU time since the collector first saw it.", "worker"),
		up: desc("kdc", "service_tracing_up",
			"1 if the kdcservice collector's BPF programs are attached and timed every request of the running krb5kdc processes since the last scrape, else 0 (not loaded, no krb5kdc, a table of the program full or receives' returns missed: see the map_full and missed_return errors).", nil...),
		info: desc("kdc", "service_tracing_info",
			"1 while the kdcservice collector's BPF programs are attached, labelled with the hooks they see krb5kdc's receives and sends with: socket (the socket tracepoints, Linux 6.3), fentry or kprobe (on inet_recvmsg and inet_sendmsg), tracepoint (the receive and send system calls' tracepoints), syscalls (sys_enter and sys_exit: every system call of the host, the costliest).", "hooks"),
		errors: desc("kdc", "service_tracing_errors_total",
			"Failures of the kdcservice collector by reason: permission, unsupported_kernel, load and attach when its program could not be loaded; map_full for the requests and processes not timed because a table of the program was full; missed_return for the receives of krb5kdc whose return the program did not see (each a request it may not have timed).", "reason"),
	}
	for i := range kdcbpf.NumRequests {
		for j := range kdcbpf.NumTransports {
			c.labels[i][j] = prometheus.MakeLabelPairs(c.service, []string{kdcbpf.RequestNames[i], kdcbpf.TransportNames[j]})
		}
	}
	c.queueLabels = prometheus.MakeLabelPairs(c.queue, []string{kdcbpf.TransportNames[kdcbpf.TransportUDP]})
	t, err := load()
	if err != nil {
		reason := kdcbpf.ReasonLoad
		var e *kdcbpf.Error
		if errors.As(err, &e) {
			reason = e.Reason
		}
		c.errs[reason]++
		level.Error(logger).Log("msg", "kdcservice collector: cannot trace krb5kdc; its service-time metrics are absent and krb5_kdc_service_tracing_up is 0 (it needs CAP_BPF and CAP_PERFMON, kernel 5.8 or later with BTF)", "reason", reason, "err", err)
	} else {
		kv := []any{"msg", "kdcservice collector: tracing krb5kdc", "hooks", t.Hooks}
		for _, s := range t.Skipped {
			kv = append(kv, "skipped", s)
		}
		if kdcbpf.TaxesHost(t.Hooks) {
			kv = append(kv, "cost", "the system call hooks "+kdcbpf.HooksEnv+" chose slow every system call of every process on the host while the collector runs (docs/bench.md)")
			level.Warn(logger).Log(kv...)
		} else {
			level.Info(logger).Log(kv...)
		}
	}
	c.tracer = t
	return c
}

// Close detaches the program.
func (c *kdcServiceCollector) Close() error {
	if c.tracer == nil {
		return nil
	}
	err := c.tracer.Close()
	c.tracer = nil
	return err
}

func (c *kdcServiceCollector) describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.service, c.split, c.warm, c.warmSplit, c.queue, c.workerService, c.workerRequests, c.workerCPU, c.workerOutside, c.up, c.info, c.errors} {
		ch <- d
	}
}

func (c *kdcServiceCollector) Update(ch chan<- prometheus.Metric) error {
	err := c.update(ch)
	for _, r := range kdcbpf.Reasons {
		v := c.errs[r]
		switch r {
		case kdcbpf.ReasonMapFull:
			v += float64(c.snap.MapFull())
		case kdcbpf.ReasonMissedReturn:
			v += float64(c.snap.MissedReturns)
		}
		ch <- counter(c.errors, v, r)
	}
	return err
}

func (c *kdcServiceCollector) update(ch chan<- prometheus.Metric) error {
	if c.tracer == nil {
		ch <- gauge(c.up, 0)
		return nil
	}
	ch <- gauge(c.info, 1, c.tracer.Hooks)
	snap, err := c.scan.get()
	if err != nil {
		ch <- gauge(c.up, 0)
		return err
	}
	c.pids = c.pids[:0]
	if p := snap.program(progKDC); p != nil {
		for _, pr := range p.procs {
			c.pids = append(c.pids, pr.pid)
		}
	}
	if err := c.tracer.Watch(c.pids); err != nil {
		ch <- gauge(c.up, 0)
		return err
	}
	if err := c.tracer.Read(&c.snap); err != nil {
		ch <- gauge(c.up, 0)
		return err
	}
	ch <- gauge(c.up, boolFloat(c.traced()))
	for i := range kdcbpf.NumRequests {
		var cpu, runq, blocked, stolen uint64
		var warm kdcbpf.Warm
		for j := range kdcbpf.NumTransports {
			h := &c.snap.Service[i][j]
			ch <- &histMetric{desc: c.service, labels: c.labels[i][j], h: h}
			cpu += h.CPU
			runq += h.Runqueue
			blocked += h.Blocked
			stolen += h.Stolen
			w := &c.snap.Warm[i][j]
			warm.Count += w.Count
			warm.CPU += w.CPU
			warm.Blocked += w.Blocked
			warm.Gap += w.Gap
		}
		name := kdcbpf.RequestNames[i]
		ch <- counter(c.split, float64(cpu)/1e9, name, "cpu")
		ch <- counter(c.split, float64(runq)/1e9, name, "runqueue")
		ch <- counter(c.split, float64(blocked)/1e9, name, "blocked")
		ch <- counter(c.split, float64(stolen)/1e9, name, "stolen")
		ch <- counter(c.warm, float64(warm.Count), name)
		ch <- counter(c.warmSplit, float64(warm.CPU)/1e9, name, "cpu")
		ch <- counter(c.warmSplit, float64(warm.Blocked)/1e9, name, "blocked")
		ch <- counter(c.warmSplit, float64(warm.Gap)/1e9, name, "gap")
	}
	ch <- &histMetric{desc: c.queue, labels: c.queueLabels, h: &c.snap.Queue[kdcbpf.TransportUDP]}
	c.updateWorkers(ch)
	return nil
}

// traced tells whether the program timed every request of the KDC since
// the last scrape: a KDC runs, each of its processes is watched, and no
// table of the program was full meanwhile. A full table is logged once,
// when it starts.
func (c *kdcServiceCollector) traced() bool {
	full := c.snap.MapFull()
	grew := full > c.full
	short := grew || c.snap.NotWatched > 0
	if short && !c.warned {
		level.Warn(c.logger).Log("msg", "kdcservice collector: a table of the BPF program is full, some krb5kdc requests or processes are not timed; krb5_kdc_service_tracing_up is 0 until it is not (krb5_kdc_service_tracing_errors_total{reason=\"map_full\"} counts them)",
			"processes", len(c.pids), "not_watched", c.snap.NotWatched, "threads_full", c.snap.ThreadsFull, "workers_full", c.snap.WorkersFull, "watched_full", c.snap.WatchedFull)
	}
	c.full = full
	c.warned = short
	// Missed returns: the kprobe hooks' return probe ran out of
	// instances (receives in progress host-wide, any process's).
	missing := c.snap.MissedReturns > c.missed
	if missing && !c.missing {
		level.Warn(c.logger).Log("msg", "kdcservice collector: the BPF program missed the return of krb5kdc receives, some requests are not timed; krb5_kdc_service_tracing_up is 0 while it does (krb5_kdc_service_tracing_errors_total{reason=\"missed_return\"} counts them; alerts/runbook.md, KDCServiceTracingDown)",
			"hooks", c.tracer.Hooks, "missed_returns", c.snap.MissedReturns)
	}
	c.missed = c.snap.MissedReturns
	c.missing = missing
	return len(c.pids) > 0 && !c.warned && !c.missing
}

// updateWorkers adds what each process answered since the last scrape to
// its worker index's totals: a replaced worker's index carries on.
func (c *kdcServiceCollector) updateWorkers(ch chan<- prometheus.Metric) {
	seen := make(map[int]bool, len(c.snap.Workers))
	for _, w := range c.snap.Workers {
		seen[w.PID] = true
		prev := c.last[w.PID]
		c.last[w.PID] = w
		idx, ok := c.slots.Index(w.PID)
		if !ok {
			continue // the supervisor of -w N answers none
		}
		t := c.byIdx[idx]
		if t == nil {
			t = &kdcbpf.Worker{}
			c.byIdx[idx] = t
		}
		t.Requests += w.Requests - prev.Requests
		t.Service += w.Service - prev.Service
		t.CPU += w.CPU - prev.CPU
		t.Outside += w.Outside - prev.Outside
		t.Runqueue += w.Runqueue - prev.Runqueue
		t.Stolen += w.Stolen - prev.Stolen
	}
	for pid := range c.last {
		if !seen[pid] {
			delete(c.last, pid)
		}
	}
	for idx, t := range c.byIdx {
		l := strconv.Itoa(idx)
		ch <- counter(c.workerService, float64(t.Service)/1e9, l)
		ch <- counter(c.workerRequests, float64(t.Requests), l)
		ch <- counter(c.workerCPU, float64(t.CPU)/1e9, l)
		ch <- counter(c.workerOutside, float64(t.Outside)/1e9, l)
	}
}

// histMetric is one histogram of the program's counts, with classic and
// native (schema 3) buckets from the same counts.
type histMetric struct {
	desc   *prometheus.Desc
	labels []*dto.LabelPair
	h      *kdcbpf.Hist
}

func (m *histMetric) Desc() *prometheus.Desc { return m.desc }

func (m *histMetric) Write(out *dto.Metric) error {
	h := m.h
	hist := &dto.Histogram{
		SampleCount:   proto.Uint64(h.Count),
		SampleSum:     proto.Float64(float64(h.Sum) / 1e9),
		Schema:        proto.Int32(kdcbpf.Schema),
		ZeroThreshold: proto.Float64(kdcbpf.ZeroThreshold),
		ZeroCount:     proto.Uint64(h.Buckets[0]),
	}
	// Classic: bound 2^e is native index 8e, bucket 8e - MinIndex.
	var cum uint64
	b := 0
	for e := classicMin; e <= classicMax; e++ {
		last := 8*e - kdcbpf.MinIndex
		for ; b <= last; b++ {
			cum += h.Buckets[b]
		}
		hist.Bucket = append(hist.Bucket, &dto.Bucket{CumulativeCount: proto.Uint64(cum), UpperBound: proto.Float64(kdcbpf.UpperBound(last))})
	}
	// Native: runs of non-empty buckets as spans, counts as deltas.
	var prev int64
	lastIdx := 0
	for b := 1; b < kdcbpf.NumBuckets; b++ {
		n := int64(h.Buckets[b])
		if n == 0 {
			continue
		}
		idx := b + kdcbpf.MinIndex
		switch {
		case len(hist.PositiveSpan) == 0:
			hist.PositiveSpan = append(hist.PositiveSpan, &dto.BucketSpan{Offset: proto.Int32(int32(idx)), Length: proto.Uint32(1)})
		case idx == lastIdx+1:
			*hist.PositiveSpan[len(hist.PositiveSpan)-1].Length++
		default:
			hist.PositiveSpan = append(hist.PositiveSpan, &dto.BucketSpan{Offset: proto.Int32(int32(idx - lastIdx - 1)), Length: proto.Uint32(1)})
		}
		hist.PositiveDelta = append(hist.PositiveDelta, n-prev)
		prev, lastIdx = n, idx
	}
	if len(hist.PositiveSpan) == 0 && h.Buckets[0] == 0 {
		// No observation yet: an empty span marks it native all the same,
		// as client_golang's own histograms do.
		hist.PositiveSpan = []*dto.BucketSpan{{Offset: proto.Int32(0), Length: proto.Uint32(0)}}
	}
	out.Label = m.labels
	out.Histogram = hist
	return nil
}
