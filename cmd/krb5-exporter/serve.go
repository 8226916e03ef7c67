package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/coreos/go-systemd/v22/activation"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/version"
	toolkitweb "github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/krb5-exporter/krb5-exporter/capacity"
	"github.com/krb5-exporter/krb5-exporter/collector"
	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/kdcproc"
	"github.com/krb5-exporter/krb5-exporter/internal/statuspage"
	"github.com/krb5-exporter/krb5-exporter/internal/web"
	"github.com/krb5-exporter/krb5-exporter/kdclog"
	"github.com/krb5-exporter/krb5-exporter/logging"
	"github.com/krb5-exporter/krb5-exporter/prober"
)

// serveCmd is the daemon: host collectors, continuous probes, log
// counters, /metrics, /probe, health endpoints and config reload.
type serveCmd struct {
	cmd         *kingpin.CmdClause
	log         *logging.Config
	web         *toolkitweb.FlagConfig
	collectors  *collector.Config
	logs        *kdclog.Config
	configFile  string
	configCheck bool
	metricsPath string
	maxRequests int
	maxProbes   int
	idleTimeout time.Duration
	benchDir    string
}

func addServeCommand(app *kingpin.Application) *serveCmd {
	s := &serveCmd{cmd: app.Command("serve", "Run the exporter daemon (the default command).").Default()}
	s.log = logging.RegisterFlags(s.cmd)
	s.web = kingpinflag.AddFlags(s.cmd, defaultListenAddress)
	s.cmd.Flag("config.file", "Configuration file (YAML): probe modules and targets, log files. Empty: none.").
		Default("").StringVar(&s.configFile)
	s.cmd.Flag("config.check", "Check the configuration file and exit: 0 when valid, 1 otherwise.").
		BoolVar(&s.configCheck)
	s.cmd.Flag("web.telemetry-path", "Path under which to expose metrics.").
		Default("/metrics").StringVar(&s.metricsPath)
	s.cmd.Flag("web.max-requests", "Maximum number of parallel scrape requests. 0 disables the limit.").
		Default("40").IntVar(&s.maxRequests)
	s.cmd.Flag("web.max-probe-requests", "Maximum number of parallel /probe requests; more are answered 503. 0 disables the limit.").
		Default("20").IntVar(&s.maxProbes)
	s.cmd.Flag("web.idle-timeout", "Close a keep-alive connection idle this long (each one holds a file descriptor).").
		Default("2m").DurationVar(&s.idleTimeout)
	s.cmd.Flag("capacity.bench-results", "Bench results directory (bench's --output-dir): the latest run's measured as and tgs ceilings are exported beside the live capacity estimate. Empty: none.").
		Default("").StringVar(&s.benchDir)
	s.collectors = collector.RegisterFlags(s.cmd)
	s.logs = kdclog.RegisterFlags(s.cmd)
	return s
}

func (s *serveCmd) run(stdout, stderr io.Writer) int {
	logger, slogger, err := logging.New(s.log, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "krb5-exporter: %v\n", err)
		return 2
	}
	if s.configCheck {
		return s.check(stdout, logger)
	}
	if err := s.checkFlags(); err != nil {
		level.Error(logger).Log("msg", "invalid command line", "err", err)
		return 1
	}
	setGOGC()
	// SIGHUP's default action kills the process: catch it from the start,
	// before a slow first load, and act on it once serving.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	// Bind first: an instance that cannot serve must exit before it reads
	// (and saves positions past) a single log line that then counts
	// nowhere.
	listeners, err := s.listen()
	if err != nil {
		level.Error(logger).Log("msg", "cannot listen; not reading any log", "err", err)
		return 1
	}
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()

	reg := prometheus.NewRegistry()
	reg.MustRegister(
		versioncollector.NewCollector("krb5_exporter"),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	// One pid -> worker index for the process collector's per-worker CPU
	// and the log's per-worker requests, so that worker="1" is the same
	// process in both.
	rule, err := s.collectors.Identity.Rule()
	if err != nil {
		level.Error(logger).Log("msg", "cannot set up the host collectors", "err", err)
		return 1
	}
	workers, err := kdcproc.NewWorkers(s.collectors.ProcFS, rule)
	if err != nil {
		level.Error(logger).Log("msg", "cannot set up the host collectors", "err", err)
		return 1
	}
	hostCfg := *s.collectors
	hostCfg.Workers = workers
	host, err := collector.New(logger, hostCfg)
	if err != nil {
		level.Error(logger).Log("msg", "cannot set up the host collectors", "err", err)
		return 1
	}
	defer host.Close() // detaches the kdcservice collector's BPF program
	reg.MustRegister(host)
	level.Info(logger).Log("msg", "KDC host collectors", "enabled", strings.Join(host.Enabled(), ","))
	probes := prober.NewManager(logger, reg)
	defer probes.Stop()
	// Log entries without path or journal follow the [logging] of the
	// kdc.conf the collectors read.
	logsCfg := *s.logs
	logsCfg.KDCProfile, logsCfg.Krb5Profile = s.collectors.KDCProfile()
	logs, err := kdclog.NewManager(logger, reg, logsCfg)
	if err != nil {
		level.Error(logger).Log("msg", "cannot set up the log collector", "err", err)
		return 1
	}
	defer logs.Close()
	logs.SetWorkerIndex(workers)
	reloader := config.NewReloader(s.configFile, logger, logging.NewLimiter(logRepeatInterval), reg)
	reloader.OnReload(probes.ApplyConfig)
	reloader.OnReload(logs.ApplyConfig)
	if err := reloader.Reload(); err != nil {
		// Reload has logged the one line that says what is wrong. The
		// packaged unit does not restart on this status
		// (RestartPreventExitStatus=): the file needs fixing first.
		return exitConfig
	}
	var addrs []net.Addr
	for _, l := range listeners {
		addrs = append(addrs, l.Addr())
	}
	if kv := exposureWarning(addrs, *s.web.WebConfigFile, reloader.Current()); kv != nil {
		level.Warn(logger).Log(kv...)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// Both managers of the configuration run until ctx ends; on the way
	// out the log positions are written last, after HTTP stops.
	var running sync.WaitGroup
	for _, m := range []interface{ Run(context.Context) error }{probes, logs} {
		running.Add(1)
		go func() {
			defer running.Done()
			m.Run(ctx)
		}()
	}
	defer func() { stop(); running.Wait() }()
	go func() {
		for {
			select {
			case <-hup:
				reloader.Reload()
			case <-ctx.Done():
				return
			}
		}
	}()

	// The capacity estimate reads each scrape's own series.
	capCfg := capacity.Config{CPUs: capacity.AffinityCPUs(workers.PIDs)}
	if s.benchDir != "" {
		capCfg.Bench = capacity.NewBench(s.benchDir, logger)
	}
	metrics := capacity.New(reg, capCfg)
	// The landing page reads the managers' state when it is asked for.
	page := statuspage.New(statuspage.Config{
		Version:     version.Version,
		MetricsPath: s.metricsPath,
		Probes:      probes.Status,
		Logs:        logs.Sources,
		Host:        func() collector.Status { return host.Status(statusMaxAge) },
		Talkers:     logs.TopTalkers,
		Capacity:    metrics.Status,
	})
	mux := s.routes(logger, reg, metrics, reloader, probes, page)
	// The listeners are bound (a taken port failed before any log was
	// read); they answer once the logs are held open again at their
	// saved positions, so that "the exporter answers" means no rotation
	// from now on can take lines away from it.
	select {
	case <-logs.Ready():
	case <-time.After(readyWait):
		level.Warn(logger).Log("msg", "the log collector is not ready yet; serving metrics anyway", "waited", readyWait)
	case <-ctx.Done():
	}
	// exporter-toolkit's web configuration sets no timeouts: without an
	// idle timeout every keep-alive connection a client leaves open holds
	// a file descriptor for ever. Requests' contexts end with ctx: on
	// SIGTERM a /probe waiting on a KDC that never answers returns at once
	// instead of holding the stop.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: s.idleTimeout,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	errc := make(chan error, 1)
	go func() { errc <- toolkitweb.ServeMultiple(listeners, srv, s.web, slogger) }()
	level.Info(logger).Log("msg", "starting krb5-exporter", "version", version.Info(), "build_context", version.BuildContext())

	select {
	case err := <-errc:
		level.Error(logger).Log("msg", "cannot serve HTTP", "err", err)
		return 1
	case <-ctx.Done():
	}
	level.Info(logger).Log("msg", "shutting down")
	shutdown, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		// A client that does not read its reply (or a /probe still
		// waiting) must not hold the stop: its connection is closed.
		level.Warn(logger).Log("msg", "requests still running at shutdown; closing their connections", "err", err)
		srv.Close()
	}
	return 0
}

// exitConfig is the exit status of a start whose configuration file is
// invalid: sysexits.h's EX_CONFIG, distinct from 1 (a failure a restart
// may cure, such as a port still taken).
const exitConfig = 78

// readyWait bounds how long serving waits for the log collector.
const readyWait = 10 * time.Second

// readHeaderTimeout bounds a request's headers; shutdownGrace is how long
// requests in flight get to finish after SIGTERM, so that the daemon stops
// within seconds whatever its clients do.
const (
	readHeaderTimeout = 10 * time.Second
	shutdownGrace     = 2 * time.Second
)

// logRepeatInterval: an event that repeats (a scrape aborted, a collector
// failing) is logged at most once per interval.
const logRepeatInterval = time.Minute

// listen binds the --web.listen-address sockets, or takes systemd's.
func (s *serveCmd) listen() ([]net.Listener, error) {
	if *s.web.WebSystemdSocket {
		ls, err := activation.Listeners()
		if err != nil {
			return nil, err
		}
		if len(ls) == 0 {
			return nil, errors.New("--web.systemd-socket: no socket activation file descriptors found")
		}
		return ls, nil
	}
	var ls []net.Listener
	for _, addr := range *s.web.WebListenAddresses {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			return nil, err
		}
		ls = append(ls, l)
	}
	if len(ls) == 0 {
		return nil, errors.New("no --web.listen-address")
	}
	return ls, nil
}

// reservedPaths are the daemon's own endpoints: --web.telemetry-path must
// not shadow them.
var reservedPaths = []string{"/probe", "/" + statuspage.LogsPath, "/-/healthy", "/-/ready", "/-/reload"}

// checkFlags validates flag values kingpin cannot.
func (s *serveCmd) checkFlags() error {
	p := s.metricsPath
	if !strings.HasPrefix(p, "/") {
		return fmt.Errorf("--web.telemetry-path %q: want a path starting with /", p)
	}
	for _, r := range reservedPaths {
		if p == r {
			return fmt.Errorf("--web.telemetry-path %q is the daemon's own endpoint", p)
		}
	}
	if strings.ContainsAny(p, " \t\n{}") {
		return fmt.Errorf("--web.telemetry-path %q: no spaces or braces", p)
	}
	if s.maxRequests < 0 || s.maxProbes < 0 {
		return fmt.Errorf("--web.max-requests and --web.max-probe-requests must not be negative")
	}
	if s.idleTimeout <= 0 {
		return fmt.Errorf("--web.idle-timeout %s: want a positive duration", s.idleTimeout)
	}
	return nil
}

// check validates the configuration file for --config.check.
func (s *serveCmd) check(stdout io.Writer, logger log.Logger) int {
	if s.configFile == "" {
		level.Error(logger).Log("msg", "--config.check needs --config.file")
		return 1
	}
	if _, err := config.Load(s.configFile); err != nil {
		level.Error(logger).Log("msg", "invalid configuration", "err", err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: configuration is valid\n", s.configFile)
	return 0
}

// statusMaxAge: the landing page runs the host collectors itself when the
// last scrape is older than this.
const statusMaxAge = 10 * time.Second

// routes builds the HTTP endpoints of the daemon.
func (s *serveCmd) routes(logger log.Logger, reg *prometheus.Registry, metrics prometheus.Gatherer, reloader *config.Reloader, probes *prober.Manager, page *statuspage.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	limit := logging.NewLimiter(logRepeatInterval)
	mux.Handle(s.metricsPath, clientGone(logger, limit, web.MetricsHandler(metrics, promhttp.HandlerOpts{
		ErrorLog:            promErrorLogger{logger, limit},
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: s.maxRequests,
		Registry:            reg,
	})))
	mux.Handle("/probe", probes.Handler(reloader.Current, s.maxProbes))
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "Healthy")
	})
	mux.HandleFunc("/-/ready", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "Ready")
	})
	mux.HandleFunc("/-/reload", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost && r.Method != http.MethodPut {
			w.Header().Set("Allow", "POST, PUT")
			http.Error(w, "reload needs POST or PUT", http.StatusMethodNotAllowed)
			return
		}
		if err := reloader.Reload(); err != nil {
			http.Error(w, fmt.Sprintf("failed to reload config: %s", err), http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "configuration reloaded")
	})
	if s.metricsPath != "/" {
		mux.Handle(page.Prefix(), page)
	}
	return mux
}

// promErrorLogger sends promhttp's errors to the project logger, at most
// one a logRepeatInterval: a collector failing fails every scrape.
type promErrorLogger struct {
	logger log.Logger
	limit  *logging.Limiter
}

func (l promErrorLogger) Println(v ...any) {
	if held, ok := l.limit.Allow("metrics error"); ok {
		level.Error(l.logger).Log("msg", fmt.Sprint(v...), "earlier_not_logged", held)
	}
}

// clientGone makes a scrape whose client went away (its scrape timeout, a
// closed connection) one event: promhttp would log the failed write of
// every metric family, some 100 lines per aborted scrape. The first failed
// write is logged (at most once a logRepeatInterval) and the rest of the
// reply is dropped as if written.
func clientGone(logger log.Logger, limit *logging.Limiter, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&goneWriter{ResponseWriter: w, logger: logger, limit: limit}, r)
	})
}

type goneWriter struct {
	http.ResponseWriter
	logger log.Logger
	limit  *logging.Limiter
	gone   bool
}

func (w *goneWriter) Write(p []byte) (int, error) {
	if w.gone {
		return len(p), nil
	}
	if _, err := w.ResponseWriter.Write(p); err != nil {
		w.gone = true
		if held, ok := w.limit.Allow("scrape aborted"); ok {
			level.Warn(w.logger).Log("msg", "the scrape's client went away before its reply was sent", "err", err, "earlier_not_logged", held)
		}
	}
	return len(p), nil
}
