package top

import (
	"errors"
	"io/fs"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/procfs"

	"github.com/krb5-exporter/krb5-exporter/internal/kdcproc"
)

// Source is top's own view of the krb5kdc processes in /proc: CPU, RSS and
// pid of the supervisor and of each worker under the worker index of
// internal/kdcproc, the same index the log's krb5_kdc_worker_requests_total
// carries, so that a row's requests and its CPU are the same process.
type Source struct {
	procRoot string
	pidFile  string
	rule     *kdcproc.Rule
	workers  *kdcproc.Workers
}

// NewSource finds krb5kdc through pidFile (its supervisor) or, without one,
// by name, among the processes rule accepts (nil: kdcproc.DefaultRule), and
// names its processes by workers' indexes.
func NewSource(procRoot, pidFile string, rule *kdcproc.Rule, workers *kdcproc.Workers) (*Source, error) {
	if _, err := procfs.NewFS(procRoot); err != nil {
		return nil, err
	}
	return &Source{procRoot: procRoot, pidFile: pidFile, rule: rule, workers: workers}, nil
}

var (
	descCPU = prometheus.NewDesc(mWorkerCPU, "CPU time of each krb5kdc process, by worker index (or supervisor).", []string{"worker", "mode"}, nil)
	descRSS = prometheus.NewDesc(mWorkerRSS, "Resident memory, by worker.", []string{"worker"}, nil)
	descPID = prometheus.NewDesc(mWorkerPID, "Process id of the worker (top's own registry only: a pid is never a label).", []string{"worker"}, nil)
	// descOthers: top shows one KDC; this says how many more run.
	descOthers = prometheus.NewDesc(mOtherKDCs, "Other KDCs found by name on the host, not shown (top's own registry only).", nil, nil)
)

// Describe sends the descriptors.
func (s *Source) Describe(ch chan<- *prometheus.Desc) {
	ch <- descCPU
	ch <- descRSS
	ch <- descPID
	ch <- descOthers
}

// Collect names the processes: the workers by their index (a
// single-process KDC is worker 0) and the supervisor of -w N.
func (s *Source) Collect(ch chan<- prometheus.Metric) {
	procs, err := kdcproc.Find(s.procRoot, s.pidFile, s.rule)
	if errors.Is(err, fs.ErrNotExist) {
		procs, err = nil, nil // no pid file: the KDC is not running
	}
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descPID, err)
		return
	}
	// One KDC: with several realms' KDCs on the host (no pid file given),
	// the oldest and its own workers, never one's supervisor with
	// another's workers.
	procs, others := kdcproc.One(procs)
	ch <- prometheus.MustNewConstMetric(descOthers, prometheus.GaugeValue, float64(others))
	answering := kdcproc.Answering(procs)
	idx := s.workers.Assign(answering)
	name := map[int]string{}
	for i, id := range answering {
		name[id.PID] = strconv.Itoa(idx[i])
	}
	for _, p := range procs {
		n, ok := name[p.PID]
		if !ok {
			if !p.Supervisor {
				continue // not possible: every non-supervisor is a worker
			}
			n = "supervisor"
		}
		ch <- prometheus.MustNewConstMetric(descCPU, prometheus.CounterValue, float64(p.UTime)/100, n, "user")
		ch <- prometheus.MustNewConstMetric(descCPU, prometheus.CounterValue, float64(p.STime)/100, n, "system")
		ch <- prometheus.MustNewConstMetric(descRSS, prometheus.GaugeValue, float64(p.RSS), n)
		ch <- prometheus.MustNewConstMetric(descPID, prometheus.GaugeValue, float64(p.PID), n)
	}
}
