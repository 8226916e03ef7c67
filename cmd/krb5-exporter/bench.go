package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/krb5-exporter/krb5-exporter/bench"
	"github.com/krb5-exporter/krb5-exporter/bench/report"
	"github.com/krb5-exporter/krb5-exporter/internal/safefile"
	"github.com/krb5-exporter/krb5-exporter/internal/web"
)

// benchCmd is `krb5-exporter bench`: the seed's KDC test suite.
type benchCmd struct {
	cmd *kingpin.CmdClause
	// run is the suite (the default); compare and merge read results.
	runCmd *kingpin.CmdClause
	cmp    compareArgs
	merge  mergeArgs
	flags  *bench.Flags
}

func addBenchCommand(app *kingpin.Application) *benchCmd {
	c := app.Command("bench", "Run the KDC performance tests of the seed document ("+strings.Join(bench.TestNames(), ", ")+") with PASS/FAIL per metric. Without a configured realm it creates an ephemeral one on 127.0.0.1.")
	b := &benchCmd{cmd: c, flags: bench.RegisterFlags(c, defaultListenAddress)}
	b.runCmd = c.Command("run", "Run the suite (the default).").Default().Hidden()
	b.addCompare(c)
	b.addMerge(c)
	return b
}

func (b *benchCmd) run(stdout, stderr io.Writer) int {
	cfg, err := b.flags.Config()
	if err != nil {
		fmt.Fprintf(stderr, "krb5-exporter bench: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A reader that goes away (`| head`) must not kill the bench before it
	// removes its realm and its kadmin principals.
	signal.Ignore(syscall.SIGPIPE)
	if err := b.flags.Setup.PinGenerator(); err != nil {
		fmt.Fprintf(stderr, "krb5-exporter bench: %v\n", err)
		return 2
	}
	if b.flags.Once {
		_, code := b.runOnce(ctx, cfg, stdout, stderr)
		return code
	}
	return b.daemon(ctx, cfg, stdout, stderr)
}

// runOnce sets up the system, runs the suite, writes the outputs and
// returns the exit code (0 PASS, 1 FAIL, 2 could not run).
func (b *benchCmd) runOnce(ctx context.Context, cfg bench.Config, stdout, stderr io.Writer) (*bench.Report, int) {
	// A baseline that cannot be read fails before the run, not after it.
	base, err := b.loadBaseline()
	if err != nil {
		fmt.Fprintf(stderr, "krb5-exporter bench: --baseline: %v\n", err)
		return nil, 2
	}
	sys, cleanup, err := b.flags.Setup.System(ctx, cfg, func(format string, args ...any) {
		fmt.Fprintf(stderr, "krb5-exporter bench: "+format+"\n", args...)
	})
	if err != nil {
		fmt.Fprintf(stderr, "krb5-exporter bench: %v\n", err)
		return nil, 2
	}
	defer cleanup()
	suite := &bench.Suite{Sys: sys, Settings: cfg.Settings}
	pr := newProgressPrinter(stderr, suite)
	suite.Observer = pr
	pr.start()
	rep, err := suite.Run(ctx)
	pr.stop()
	if err != nil {
		fmt.Fprintf(stderr, "krb5-exporter bench: %v\n", err)
		return nil, 2
	}
	dir := filepath.Join(cfg.OutputDir, rep.Started.UTC().Format("20060102T150405Z"))
	b.compareBaseline(base, rep, dir)
	report.WriteSummary(stdout, rep)
	if err := writeResults(rep, dir, cfg.Textfile); err != nil {
		fmt.Fprintf(stderr, "krb5-exporter bench: writing results: %v\n", err)
		return rep, 2
	}
	if rep.Baseline != nil {
		fmt.Fprintln(stdout, "\nCompared with the baseline:")
		report.WriteComparison(stdout, rep.Baseline)
	}
	fmt.Fprintf(stdout, "results: %s\n", dir)
	if rep.Verdict != bench.Pass || rep.Baseline != nil && rep.Baseline.Worse > 0 {
		return rep, 1
	}
	return rep, 0
}

// writeResults writes the outputs into dir, OUTPUT_DIR/<timestamp>: a
// predictable name, where a planted link or another user's directory must
// not receive them.
func writeResults(rep *report.Report, dir, textfile string) error {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return err
	}
	if err := safefile.MkdirOwned(dir, 0o755); err != nil {
		return err
	}
	return report.WriteAll(rep, dir, textfile)
}

// daemon runs the suite every interval and serves the last results.
func (b *benchCmd) daemon(ctx context.Context, cfg bench.Config, stdout, stderr io.Writer) int {
	reg := prometheus.NewRegistry()
	col := report.NewCollector()
	reg.MustRegister(col)
	mux := http.NewServeMux()
	mux.Handle("/metrics", web.MetricsHandler(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/-/healthy", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "OK\n") })
	// Bound before the first run: a taken port must not cost a whole run.
	ln, err := net.Listen("tcp", b.flags.Listen)
	if err != nil {
		fmt.Fprintf(stderr, "krb5-exporter bench: --web.listen-address: %v\n", err)
		return 2
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	defer srv.Close()
	fmt.Fprintf(stderr, "krb5-exporter bench: serving /metrics on %s, running the suite every %s\n", b.flags.Listen, b.flags.Interval)
	for {
		rep, code := b.runOnce(ctx, cfg, stdout, stderr)
		if rep != nil {
			col.Set(rep)
		} else if code == 2 && ctx.Err() == nil {
			fmt.Fprintf(stderr, "krb5-exporter bench: the run could not start; next try in %s\n", b.flags.Interval)
		}
		select {
		case <-ctx.Done():
			return 0
		case err := <-errc:
			fmt.Fprintf(stderr, "krb5-exporter bench: %v\n", err)
			return 2
		case <-time.After(b.flags.Interval):
		}
	}
}
