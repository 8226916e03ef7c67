package top

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/procfs"

	"github.com/krb5-exporter/krb5-exporter/kdclog"
	"github.com/krb5-exporter/krb5-exporter/tailer"
)

// Source is what `top` reads on the KDC host: the KDC log followed from its
// end (each request line names the pid that answered it; top keeps no
// position file and never touches the daemon's), and /proc for each
// krb5kdc process. As a prometheus.Collector it offers the per-worker
// series the Sampler reads.
type Source struct {
	logs    []string
	pidFile string
	proc    procfs.FS
	logger  log.Logger

	mu sync.Mutex
	// by pid: [request][outcome] counts; outcome 0 ISSUE, 1 a preauth
	// step, 2 an error.
	counts map[int]*[2][3]float64
}

// NewSource follows the KDC logs given (FILE: targets of krb5kdc) and finds
// krb5kdc through pidFile (its supervisor) or, without one, by name.
func NewSource(logs []string, pidFile, procRoot string, logger log.Logger) (*Source, error) {
	fs, err := procfs.NewFS(procRoot)
	if err != nil {
		return nil, err
	}
	return &Source{logs: logs, pidFile: pidFile, proc: fs, logger: logger, counts: map[int]*[2][3]float64{}}, nil
}

// Run follows the logs until ctx ends.
func (s *Source) Run(ctx context.Context) error {
	store, err := tailer.OpenPositions("", s.logger) // in memory: never the daemon's file
	if err != nil {
		return err
	}
	defer store.Close()
	var wg sync.WaitGroup
	for _, path := range s.logs {
		var parser kdclog.Parser
		var e kdclog.Event
		t := tailer.New(tailer.Options{Path: path, MinInterval: 100e6}, s.logger, store, &tailer.Stats{},
			func(line []byte, truncated bool) {
				if truncated || !parser.Parse(line, &e) || e.Kind != kdclog.KindRequest || e.PID <= 0 {
					return
				}
				status := string(e.Status)
				if e.MorePreauth { // a SPAKE login's middle step, not a failure
					status = kdclog.StatusMorePreauth
				}
				s.count(e.PID, e.Request, status)
			})
		wg.Add(1)
		go func() { defer wg.Done(); t.Run(ctx) }()
	}
	wg.Wait()
	return nil
}

func (s *Source) count(pid int, req kdclog.Request, status string) {
	r := 0
	if req != kdclog.RequestAS {
		r = 1
	}
	o := 2
	if ok, step := outcome(status); ok {
		o = 0
	} else if step {
		o = 1
	}
	s.mu.Lock()
	c := s.counts[pid]
	if c == nil {
		c = &[2][3]float64{}
		s.counts[pid] = c
	}
	c[r][o]++
	s.mu.Unlock()
}

// kdcProcess is one krb5kdc process.
type kdcProcess struct {
	pid        int
	start      uint64
	utime      float64 // seconds
	stime      float64
	rss        float64 // bytes
	supervisor bool
}

// processes finds krb5kdc: the supervisor (from the pid file, else the
// krb5kdc whose parent is not one) and its krb5kdc children; none when
// the pid file is given but absent.
func (s *Source) processes() []kdcProcess {
	all, err := s.proc.AllProcs()
	if err != nil {
		return nil
	}
	root := 0
	if s.pidFile != "" {
		// No pid file means this KDC is not running, not "any krb5kdc":
		// other realms' KDCs on the host are never its processes.
		b, err := os.ReadFile(s.pidFile)
		if err != nil {
			return nil
		}
		if root, _ = strconv.Atoi(strings.TrimSpace(string(b))); root <= 0 {
			return nil
		}
	}
	var kdc []procfs.ProcStat
	for _, p := range all {
		st, err := p.Stat()
		if err != nil || st.Comm != "krb5kdc" || st.State == "Z" {
			continue
		}
		kdc = append(kdc, st)
	}
	isKDC := map[int]bool{}
	for _, st := range kdc {
		isKDC[st.PID] = true
	}
	var out []kdcProcess
	for _, st := range kdc {
		sup := !isKDC[st.PPID]
		if root > 0 && st.PID != root && st.PPID != root {
			continue // another realm's KDC on this host
		}
		out = append(out, kdcProcess{pid: st.PID, start: st.Starttime, supervisor: sup,
			utime: float64(st.UTime) / 100, stime: float64(st.STime) / 100, rss: float64(st.ResidentMemory())})
	}
	slices.SortFunc(out, func(a, b kdcProcess) int {
		if a.start != b.start {
			return int(int64(a.start) - int64(b.start))
		}
		return a.pid - b.pid
	})
	return out
}

var (
	descReq = prometheus.NewDesc(mWorkerRequests, "Requests answered, by worker.", []string{"worker", "request", "status"}, nil)
	descCPU = prometheus.NewDesc(mWorkerCPU, "CPU time, by worker.", []string{"worker", "mode"}, nil)
	descRSS = prometheus.NewDesc(mWorkerRSS, "Resident memory, by worker.", []string{"worker"}, nil)
	descPID = prometheus.NewDesc(mWorkerPID, "Process id of the worker (top's own registry only: a pid is never a label).", []string{"worker"}, nil)
)

// Describe sends the descriptors.
func (s *Source) Describe(ch chan<- *prometheus.Desc) {
	ch <- descReq
	ch <- descCPU
	ch <- descRSS
	ch <- descPID
}

// Collect names the processes: "main" for a single-process KDC (and for
// lines of a pid no longer running), "supervisor", and workers 0..N-1 in
// the order they started; requests are attributed to the process whose
// pid the line carries.
func (s *Source) Collect(ch chan<- prometheus.Metric) {
	procs := s.processes()
	names := map[int]string{}
	workers := 0
	for _, p := range procs {
		if !p.supervisor {
			workers++
		}
	}
	w := 0
	for _, p := range procs {
		name := "main"
		switch {
		case p.supervisor && workers > 0:
			name = "supervisor"
		case !p.supervisor:
			name = strconv.Itoa(w)
			w++
		}
		names[p.pid] = name
		ch <- prometheus.MustNewConstMetric(descCPU, prometheus.CounterValue, p.utime, name, "user")
		ch <- prometheus.MustNewConstMetric(descCPU, prometheus.CounterValue, p.stime, name, "system")
		ch <- prometheus.MustNewConstMetric(descRSS, prometheus.GaugeValue, p.rss, name)
		ch <- prometheus.MustNewConstMetric(descPID, prometheus.GaugeValue, float64(p.pid), name)
	}
	type key struct {
		worker string
		r, o   int
	}
	sum := map[key]float64{}
	s.mu.Lock()
	for pid, c := range s.counts {
		name, ok := names[pid]
		if !ok {
			name = "gone"
		}
		for r := range 2 {
			for o := range 3 {
				sum[key{name, r, o}] += c[r][o]
			}
		}
	}
	s.mu.Unlock()
	reqs := [2]string{"as", "tgs"}
	statuses := [3]string{"ISSUE", "NEEDED_PREAUTH", "ERROR"}
	for k, v := range sum {
		ch <- prometheus.MustNewConstMetric(descReq, prometheus.CounterValue, v, k.worker, reqs[k.r], statuses[k.o])
	}
}
