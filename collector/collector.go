// Package collector holds the scrape-time collectors of the KDC host, in
// the style of node_exporter: small collectors behind one interface, each
// enabled by a --collector.NAME flag, run by one prometheus.Collector that
// reports how long each took and whether it succeeded. Nothing is
// executed; everything is read from files and the kernel. Under
// --path.procfs, the files read on every scrape (each process's stat,
// status, io, limits, schedstat, task children; net/udp, net/snmp,
// net/netstat) stay open and are re-read in place, as the pid files are,
// not through github.com/prometheus/procfs (procfile.go says why); procfs
// reads the rest (boot time, fd links, somaxconn), and cmdline and task/
// are read directly. The KDC's TCP sockets come from sock_diag where the
// KDC shares the exporter's network namespace, else from its net/tcp
// (procfs). kdc.conf and krb5.conf are read through safefile; the
// database's size, the iprop update log's header and the full-propagation
// markers from their files.
package collector

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/procfs"

	"github.com/krb5-exporter/krb5-exporter/internal/kdcbpf"
	"github.com/krb5-exporter/krb5-exporter/internal/kdcproc"
	"github.com/krb5-exporter/krb5-exporter/logging"
)

const namespace = "krb5"

// The names of the series other packages read (top), declared once here.
const (
	MetricProcessCPU         = "krb5_process_cpu_seconds_total"
	MetricProcessRSS         = "krb5_process_resident_memory_bytes"
	MetricUDPDrops           = "krb5_kdc_udp_drops_total"
	MetricTCPListenOverflows = "krb5_host_tcp_listen_overflows_total"
)

// Collector is one source of metrics, run once per scrape.
type Collector interface {
	// Update sends the current metrics; an error marks the collector's
	// scrape as failed (metrics already sent are still exposed).
	Update(ch chan<- prometheus.Metric) error
}

// describer is implemented by collectors whose descriptors are fixed, so
// that the registry can check them.
type describer interface {
	describe(ch chan<- *prometheus.Desc)
}

type namedCollector struct {
	name string
	c    Collector
}

// KDCCollector runs the enabled collectors on every scrape. Scrapes are
// serialised: the collectors share one process scan per scrape and keep
// state across scrapes (restart counts, worker indexes).
type KDCCollector struct {
	mu         sync.Mutex
	logger     log.Logger
	scan       *procScanner
	conf       *confSource
	collectors []namedCollector
	failures   *logging.Changes // per collector: the error logged last
	lastRun    time.Time        // of the last Collect, for Status

	duration, success *prometheus.Desc
}

// New builds the collectors enabled in cfg. It fails only on a
// configuration that cannot work (an unusable procfs path); daemons that
// are not running yet, or a kdc.conf that does not parse, show up in the
// metrics instead.
func New(logger log.Logger, cfg Config) (*KDCCollector, error) {
	if logger == nil {
		logger = log.NewNopLogger()
	}
	pfs, err := procfs.NewFS(cfg.ProcFS)
	if err != nil {
		return nil, fmt.Errorf("collector: --path.procfs: %w", err)
	}
	kdcPaths := cfg.kdcConfPaths()
	pidFiles := cfg.pidFiles()
	rule, err := cfg.Identity.Rule()
	if err != nil {
		return nil, fmt.Errorf("collector: --collector.process.*: %w", err)
	}
	scan := &procScanner{ident: newIdentity(rule, logger), fs: pfs, procPath: cfg.ProcFS, files: newFileCache(), dirBuf: make([]byte, 8192), onProcfs: isProcfs(cfg.ProcFS), warn: newOnceLogger(logger), access: newAccessTracker(logger), pids: newPidLister(cfg.ProcFS, foundByName(pidFiles)), pidFiles: pidFiles}
	conf := newConfSource(logger, kdcPaths, cfg.krb5ConfPaths())
	k := &KDCCollector{
		logger:   logger,
		scan:     scan,
		conf:     conf,
		failures: logging.NewChanges(nil),
		duration: prometheus.NewDesc("krb5_exporter_collector_scrape_duration_seconds",
			"Time a collector took in this scrape.", []string{"collector"}, nil),
		success: prometheus.NewDesc("krb5_exporter_collector_scrape_success",
			"1 if the collector succeeded in this scrape, else 0.", []string{"collector"}, nil),
	}
	workers := cfg.Workers
	if workers == nil && (cfg.Process || cfg.KDCService) {
		if workers, err = kdcproc.NewWorkers(cfg.ProcFS, rule); err != nil {
			return nil, fmt.Errorf("collector: --path.procfs: %w", err)
		}
	}
	d := deps{cfg: &cfg, scan: scan, conf: conf, fs: pfs, workers: workers, logger: logger}
	for _, c := range collectors {
		if *c.enabled(&cfg) {
			k.collectors = append(k.collectors, namedCollector{c.name, c.build(d)})
		}
	}
	return k, nil
}

// deps is what the collectors are built from.
type deps struct {
	cfg     *Config
	scan    *procScanner
	conf    *confSource
	fs      procfs.FS
	workers *kdcproc.Workers
	logger  log.Logger
}

// collectors are declared once, here: the name (--[no-]collector.NAME and
// the collector label), whether it is on by default, its flag's help, its
// Config field and how it is built.
var collectors = []struct {
	name      string
	byDefault bool
	help      string
	enabled   func(*Config) *bool
	build     func(deps) Collector
}{
	{"process", true, "Enable the process collector (krb5kdc, kadmind, kpropd: CPU, memory, fds, workers, restarts).",
		func(c *Config) *bool { return &c.Process },
		func(d deps) Collector { return newProcessCollector(d.scan, d.workers, d.logger) }},
	{"network", true, "Enable the network collector (the KDC's UDP queues and drops, TCP listen queue and connections).",
		func(c *Config) *bool { return &c.Network },
		func(d deps) Collector {
			return newNetworkCollector(d.scan, d.conf, d.fs, d.cfg.ProcFS, d.cfg.TCPConnections, d.logger)
		}},
	{"kdcconf", true, "Enable the kdcconf collector (settings from kdc.conf, database file size).",
		func(c *Config) *bool { return &c.KDCConf },
		func(d deps) Collector { return newKDCConfCollector(d.scan, d.conf, d.logger) }},
	{"replication", true, "Enable the replication collector (the iprop update log's header per realm, full-propagation markers).",
		func(c *Config) *bool { return &c.Replication },
		func(d deps) Collector { return newReplicationCollector(d.scan, d.conf, d.cfg.dumpFile(), d.logger) }},
	{"kdcservice", false, "Enable the kdcservice collector (off by default): each krb5kdc request's service time, its split into on CPU, waiting for a CPU and blocked, and the UDP queue time, measured in the kernel with eBPF. Needs CAP_BPF and CAP_PERFMON and a kernel of 5.8 or later with BTF (see docs/metrics.md).",
		func(c *Config) *bool { return &c.KDCService },
		func(d deps) Collector { return newKDCServiceCollector(d.scan, d.workers, d.logger, kdcbpf.Load) }},
}

// Close releases what the collectors hold in the kernel (the kdcservice
// collector's BPF program).
func (k *KDCCollector) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	var errs []error
	for _, c := range k.collectors {
		if cl, ok := c.c.(io.Closer); ok {
			errs = append(errs, cl.Close())
		}
	}
	return errors.Join(errs...)
}

// Enabled lists the names of the enabled collectors, for a start-up log line.
func (k *KDCCollector) Enabled() []string {
	names := make([]string, len(k.collectors))
	for i, c := range k.collectors {
		names[i] = c.name
	}
	return names
}

// Describe implements prometheus.Collector.
func (k *KDCCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- k.duration
	ch <- k.success
	ch <- k.scan.access.readable
	ch <- k.scan.ident.desc
	for _, c := range k.collectors {
		if d, ok := c.c.(describer); ok {
			d.describe(ch)
		}
	}
}

// Collect implements prometheus.Collector. The collectors run one after
// another: they all read procfs, take a few milliseconds at most, and
// share the scan; goroutines would buy nothing.
func (k *KDCCollector) Collect(ch chan<- prometheus.Metric) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.scan.reset()
	k.conf.begin()
	defer k.conf.end()
	for _, c := range k.collectors {
		start := time.Now()
		err := c.c.Update(ch)
		d := time.Since(start).Seconds()
		ok := 1.0
		if err != nil {
			ok = 0
		}
		k.logChange(c.name, d, err)
		ch <- gauge(k.duration, d, c.name)
		ch <- gauge(k.success, ok, c.name)
	}
	k.scan.access.collect(ch)
	k.scan.ident.collect(ch)
	k.scan.files.sweep()
	k.lastRun = time.Now()
}

// logChange logs a collector's failure when its error differs from the
// previous scrape's, and its recovery: a condition that persists (an
// unreadable kdc.conf) is one line, not one per scrape; the success
// metric says it on every scrape.
func (k *KDCCollector) logChange(name string, d float64, err error) {
	var outcome string
	if err != nil {
		outcome = err.Error()
	}
	if _, _, changed := k.failures.Note(name, outcome); !changed {
		return
	}
	if err == nil {
		level.Info(k.logger).Log("msg", "collector recovered", "name", name)
	} else {
		level.Error(k.logger).Log("msg", "collector failed; logged again only when the error changes", "name", name, "duration_seconds", d, "err", err)
	}
}

func desc(subsystem, name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(namespace, subsystem, name), help, labels, nil)
}

func gauge(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return constMetric(d, prometheus.GaugeValue, v, labels)
}

func counter(d *prometheus.Desc, v float64, labels ...string) prometheus.Metric {
	return constMetric(d, prometheus.CounterValue, v, labels)
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// onceLogger warns once per key about conditions that persist (missing
// permissions, an unreadable file), instead of on every scrape: a state
// that is never seen to end, so its first failure is its only change.
type onceLogger struct {
	logger log.Logger
	seen   *logging.Changes
}

func newOnceLogger(l log.Logger) *onceLogger {
	return &onceLogger{logger: l, seen: logging.NewChanges(nil)}
}

func (o *onceLogger) log(key string, keyvals ...any) {
	if _, _, first := o.seen.Note(key, "seen"); first {
		level.Warn(o.logger).Log(keyvals...)
	}
}
