package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/term"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/top"
)

// topCmd is `krb5-exporter top`: the live per-process view of the KDC.
type topCmd struct {
	cmd        *kingpin.CmdClause
	configFile string
	logs       []string
	pidFile    string
	procfs     string
	interval   time.Duration
	batch      bool
	once       bool
	iterations int
	sort       string
}

func addTopCommand(app *kingpin.Application) *topCmd {
	t := &topCmd{}
	t.cmd = app.Command("top", "Live view of the KDC per process (supervisor and each -w N worker): requests per second by outcome from the KDC log, CPU and memory from /proc. Follows the log from its end; touches no position file.")
	c := t.cmd
	c.Flag("config.file", "Exporter configuration file: its kdc and any logs are followed (the daemon's --config.file).").StringVar(&t.configFile)
	c.Flag("log", "KDC log file to follow (repeatable; instead of or besides --config.file's).").StringsVar(&t.logs)
	c.Flag("collector.process.krb5kdc-pidfile", "Find krb5kdc by its pid file (-P); without one, by process name.").StringVar(&t.pidFile)
	c.Flag("path.procfs", "procfs mount point.").Default("/proc").StringVar(&t.procfs)
	c.Flag("interval", "Time between two refreshes.").Default("1s").DurationVar(&t.interval)
	c.Flag("batch", "Print plain-text snapshots instead of the full-screen view (also when not on a terminal).").Short('b').BoolVar(&t.batch)
	c.Flag("once", "Print one snapshot (after one interval) and exit; the same as --batch --iterations 1.").BoolVar(&t.once)
	c.Flag("iterations", "With --batch: snapshots to print (0: until interrupted).").Default("0").IntVar(&t.iterations)
	c.Flag("sort", "Row order: name, requests, cpu or errors.").Default(top.ByName).EnumVar(&t.sort, top.SortOrders...)
	return t
}

func (t *topCmd) run(stdout, stderr io.Writer) int {
	if t.once {
		t.batch, t.iterations = true, 1
	}
	logs := append([]string{}, t.logs...)
	if t.configFile != "" {
		cfg, err := config.Load(t.configFile)
		if err != nil {
			fmt.Fprintf(stderr, "krb5-exporter top: %v\n", err)
			return 1
		}
		for _, l := range cfg.Logs {
			if l.Journal == nil && (l.Type == "kdc" || l.Type == "any") {
				logs = append(logs, l.Path)
			}
		}
	}
	if t.interval < 100*time.Millisecond {
		fmt.Fprintln(stderr, "krb5-exporter top: --interval must be at least 100ms")
		return 1
	}
	src, err := top.NewSource(logs, t.pidFile, t.procfs, log.NewNopLogger())
	if err != nil {
		fmt.Fprintf(stderr, "krb5-exporter top: %v\n", err)
		return 1
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(src)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go src.Run(ctx)
	s := top.NewSampler(reg)
	if _, err := s.Sample(time.Now()); err != nil {
		fmt.Fprintf(stderr, "krb5-exporter top: %v\n", err)
		return 1
	}
	f, isFile := stdout.(*os.File)
	if !t.batch && isFile && term.IsTerminal(int(f.Fd())) && term.IsTerminal(int(os.Stdin.Fd())) {
		if err := top.Interactive(ctx, s, t.interval, os.Stdin, stdout); err != nil {
			fmt.Fprintf(stderr, "krb5-exporter top: %v\n", err)
			return 1
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
				fmt.Fprintf(stderr, "krb5-exporter top: %v\n", err)
				return 1
			}
			if n > 0 {
				fmt.Fprintln(stdout)
			}
			top.Write(stdout, snap, view)
		}
	}
	return 0
}
