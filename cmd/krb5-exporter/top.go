package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/term"

	"github.com/krb5-exporter/krb5-exporter/collector"
	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/kdcproc"
	"github.com/krb5-exporter/krb5-exporter/kdclog"
	"github.com/krb5-exporter/krb5-exporter/top"
)

// topCmd is `krb5-exporter top`: the live per-process view of the KDC.
type topCmd struct {
	cmd         *kingpin.CmdClause
	configFile  string
	logs        []string
	kadmindLogs []string
	pidFile     string
	procfs      string
	identity    kdcproc.Identity
	daemonURL   string
	interval    time.Duration
	batch       bool
	once        bool
	iterations  int
	sort        string
}

// topPollInterval is how often top reads the logs: well inside one refresh,
// so that a refresh shows the lines of its own interval.
const topPollInterval = 100 * time.Millisecond

func addTopCommand(app *kingpin.Application) *topCmd {
	t := &topCmd{}
	t.cmd = app.Command("top", "Live view of the KDC per process (supervisor and each -w N worker by its stable index): requests per second by outcome from the KDC log, CPU and memory from /proc, kadmind operations, UDP drops and TCP listen overflows, the latest probe results of a running daemon and, where that daemon runs --collector.kdcservice, the KDC's own time per request (p95, mean, its split into CPU, waiting for a CPU and blocked; per worker) and the requests' wait in the socket. Follows the logs from their end; touches no position file.")
	c := t.cmd
	c.Flag("config.file", "Exporter configuration file (the daemon's --config.file): every log of its logs: section is followed, from its end.").StringVar(&t.configFile)
	c.Flag("log", "KDC log file to follow (repeatable; instead of or besides --config.file's).").StringsVar(&t.logs)
	c.Flag("kadmind-log", "kadmind log file to follow for its operations per second (repeatable; besides --config.file's).").StringsVar(&t.kadmindLogs)
	collector.KDCPidFileFlag(c, &t.pidFile)
	collector.ProcFSFlag(c, &t.procfs)
	collector.IdentityFlags(c, &t.identity)
	c.Flag("daemon.url", "The /metrics of the krb5-exporter daemon whose probe results (success, latency of the latest login and service ticket) and top talkers (its last complete window) are shown. top sends no probe of its own: logins every refresh would show in the very rates it displays, and the daemon probes each target at its interval already. Its kdcservice series, if any, are shown too (top attaches no eBPF program of its own). Empty: no probe line.").
		Default("http://localhost" + defaultListenAddress + "/metrics").StringVar(&t.daemonURL)
	c.Flag("interval", "Time between two refreshes.").Default("1s").DurationVar(&t.interval)
	c.Flag("batch", "Print plain-text snapshots instead of the full-screen view (also when not on a terminal).").Short('b').BoolVar(&t.batch)
	c.Flag("once", "Print one snapshot (after one interval) and exit; the same as --batch --iterations 1.").BoolVar(&t.once)
	c.Flag("iterations", "With --batch: snapshots to print (0: until interrupted).").Default("0").IntVar(&t.iterations)
	c.Flag("sort", "Row order: name, requests, cpu or errors.").Default(top.ByCPU).EnumVar(&t.sort, top.SortOrders...)
	return t
}

// logConfig is the configuration top's log collector runs: the logs of the
// configuration file (its modules tell the probe principals apart) and of
// the flags, all read from their end and often.
func (t *topCmd) logConfig() (*config.Config, error) {
	cfg := &config.Config{}
	if t.configFile != "" {
		var err error
		if cfg, err = config.Load(t.configFile); err != nil {
			return nil, err
		}
	}
	var logs []config.LogSource
	for _, l := range cfg.Logs {
		if l.Type != "kpropd" {
			logs = append(logs, l)
		}
	}
	for _, p := range t.logs {
		logs = append(logs, config.LogSource{Path: p, Type: "kdc"})
	}
	for _, p := range t.kadmindLogs {
		logs = append(logs, config.LogSource{Path: p, Type: "kadmind"})
	}
	for i := range logs {
		logs[i].StartAt = "end"
		logs[i].PollInterval = topPollInterval
	}
	cfg.Logs = logs
	// The top talkers are the daemon's (--daemon.url): its windows are
	// complete, where top, following from the logs' end, would show none
	// for the first window and the same names twice beside the daemon's.
	cfg.TopTalkers.Disabled = true
	// The --log paths are checked as the file's are: a FIFO is refused
	// here, not followed silently.
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

func (t *topCmd) run(stdout, stderr io.Writer) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "krb5-exporter top: %v\n", err)
		return 1
	}
	if t.once {
		t.batch, t.iterations = true, 1
	}
	if t.interval < 100*time.Millisecond {
		return fail(fmt.Errorf("--interval must be at least 100ms"))
	}
	cfg, err := t.logConfig()
	if err != nil {
		return fail(err)
	}
	if len(cfg.Logs) == 0 {
		fmt.Fprintln(stderr, "krb5-exporter top: no log to follow (--config.file with a logs: section, or --log): requests will show as 0")
	}
	// One worker index for the log's counts and the rows' /proc values.
	rule, err := t.identity.Rule()
	if err != nil {
		return fail(err)
	}
	workers, err := kdcproc.NewWorkers(t.procfs, rule)
	if err != nil {
		return fail(err)
	}
	reg := prometheus.NewRegistry()
	logs, err := kdclog.NewManager(log.NewNopLogger(), reg, kdclog.Config{}) // positions in memory only
	if err != nil {
		return fail(err)
	}
	defer logs.Close()
	logs.SetWorkerIndex(workers)
	if err := logs.ApplyConfig(cfg); err != nil {
		return fail(fmt.Errorf("the logs to follow: %w", err))
	}
	host, err := collector.New(log.NewNopLogger(), collector.Config{ProcFS: t.procfs, Network: true, KDCPidFile: t.pidFile, Identity: t.identity})
	if err != nil {
		return fail(err)
	}
	src, err := top.NewSource(t.procfs, t.pidFile, rule, workers)
	if err != nil {
		return fail(err)
	}
	reg.MustRegister(host, src)
	gatherers := prometheus.Gatherers{reg}
	var daemon *top.Daemon
	if t.daemonURL != "" {
		if !strings.HasPrefix(t.daemonURL, "http://") && !strings.HasPrefix(t.daemonURL, "https://") {
			return fail(fmt.Errorf("--daemon.url: want http:// or https://"))
		}
		daemon = top.NewDaemon(t.daemonURL, min(t.interval, 2*time.Second))
		gatherers = append(gatherers, daemon)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	done := make(chan struct{})
	go func() { defer close(done); logs.Run(ctx) }()
	defer func() { stop(); <-done }()

	s := top.NewSampler(gatherers)
	if daemon != nil {
		s.ReadDaemon(daemon)
	}
	if _, err := s.Sample(time.Now()); err != nil {
		return fail(err)
	}
	f, isFile := stdout.(*os.File)
	if !t.batch && isFile && term.IsTerminal(int(f.Fd())) && term.IsTerminal(int(os.Stdin.Fd())) {
		if err := top.Interactive(ctx, s, t.interval, t.sort, os.Stdin, stdout); err != nil {
			return fail(err)
		}
		return 0
	}
	view := top.View{Sort: t.sort}
	tick := time.NewTicker(t.interval)
	defer tick.Stop()
	for n := 0; t.iterations == 0 || n < t.iterations; n++ {
		select {
		case <-ctx.Done():
			return 0
		case now := <-tick.C:
			snap, err := s.Sample(now)
			if err != nil {
				return fail(err)
			}
			if n > 0 {
				fmt.Fprintln(stdout)
			}
			top.Write(stdout, snap, view)
		}
	}
	return 0
}
