package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/krb5-exporter/krb5-exporter/bench"
	"github.com/krb5-exporter/krb5-exporter/bench/report"
	"github.com/krb5-exporter/krb5-exporter/internal/kdcproc"
	"github.com/krb5-exporter/krb5-exporter/internal/safefile"
	"github.com/krb5-exporter/krb5-exporter/internal/web"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// benchCmd is `krb5-exporter bench`: the seed's KDC test suite.
type benchCmd struct {
	cmd *kingpin.CmdClause
	// run is the suite (the default); compare and merge read results.
	runCmd *kingpin.CmdClause
	cmp    compareArgs
	merge  mergeArgs

	once       bool
	configFile string
	interval   time.Duration
	listen     string
	allowWrite bool
	kdcCPU     int
	genCPU     int
	realmOpts  realm.Options
	keepRealm  bool
	baseline   string
	floorPct   float64
	singleRun  float64

	// applied after the configuration file, only when given
	flags []func(*bench.Config) error
}

func addBenchCommand(app *kingpin.Application) *benchCmd {
	b := &benchCmd{}
	c := app.Command("bench", "Run the KDC performance tests of the seed document ("+strings.Join(bench.TestNames(), ", ")+") with PASS/FAIL per metric. Without a configured realm it creates an ephemeral one on 127.0.0.1.")
	b.cmd = c
	c.Flag("once", "Run the suite once, write the results and exit: 0 when every test passed, 1 when one failed, 2 when nothing could run.").BoolVar(&b.once)
	c.Flag("config.file", "YAML file with the settings below (same names, with _) and an optional existing realm.").StringVar(&b.configFile)
	c.Flag("interval", "Without --once: run the suite this often and serve the last results on /metrics.").Default("24h").DurationVar(&b.interval)
	c.Flag("web.listen-address", "Without --once: where to serve /metrics.").Default(defaultListenAddress).StringVar(&b.listen)
	c.Flag("allow-writes", "Against an existing realm: allow the tests that write (kadmin) or restart the KDC (startup).").BoolVar(&b.allowWrite)
	c.Flag("kdc-cpu", "Pin the ephemeral realm's KDC to this CPU (taskset); -1 leaves it.").Default("-1").IntVar(&b.kdcCPU)
	c.Flag("generator-cpu", "Pin this process (the load generator) to this CPU; -1 leaves it.").Default("-1").IntVar(&b.genCPU)
	// The ephemeral realm: the options of `realm up`, under realm.
	realm.RegisterFlags(c, "realm.", &b.realmOpts)
	c.Flag("realm.keep", "Ephemeral realm: leave it running afterwards (prints its directory).").BoolVar(&b.keepRealm)
	c.Flag("baseline", "With --once (or each run of the daemon): compare the run with this earlier one (a results/<timestamp> directory or its report.json) in the reports and metrics, and exit 1 when a metric got significantly worse beyond --change-floor, even if it passes its target.").StringVar(&b.baseline)
	c.Flag("change-floor", "With --baseline and bench compare, runs with --count: a change smaller than this % of the old value is never called slower or faster.").Default("5").Float64Var(&b.floorPct)
	c.Flag("single-run-floor", "With --baseline and bench compare: when either run ran its loads once (no --count), a metric is called only when new/old is at least this factor or at most its inverse: the seconds of one run show that run's noise, not how much two runs differ.").Default("2").Float64Var(&b.singleRun)
	b.runCmd = c.Command("run", "Run the suite (the default).").Default().Hidden()
	b.addCompare(c)
	b.addMerge(c)

	// The settings' helps say their defaults.
	def := bench.Defaults()
	set := func(name, help string) *kingpin.FlagClause {
		return c.Flag(name, help)
	}
	str := func(name, help string, apply func(*bench.Config, string) error) {
		var v string
		var given bool
		set(name, help).IsSetByUser(&given).StringVar(&v)
		b.flags = append(b.flags, func(cfg *bench.Config) error {
			if !given {
				return nil
			}
			if err := apply(cfg, v); err != nil {
				return fmt.Errorf("--%s: %w", name, err)
			}
			return nil
		})
	}
	intf := func(p func(*bench.Config) *int) func(*bench.Config, string) error {
		return func(cfg *bench.Config, v string) error {
			n, err := strconv.Atoi(v)
			*p(cfg) = n
			return err
		}
	}
	floatf := func(p func(*bench.Config) *float64) func(*bench.Config, string) error {
		return func(cfg *bench.Config, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			*p(cfg) = f
			return err
		}
	}
	durf := func(p func(*bench.Config) *time.Duration) func(*bench.Config, string) error {
		return func(cfg *bench.Config, v string) error {
			d, err := time.ParseDuration(v)
			*p(cfg) = d
			return err
		}
	}
	str("tests", "Comma-separated tests to run (default all): "+strings.Join(bench.TestNames(), ","), func(cfg *bench.Config, v string) (err error) {
		cfg.Tests, err = bench.ParseTests(v)
		return err
	})
	str("clients", fmt.Sprintf("CLIENTS: closed-loop clients of tcp, degradation and (with --generator blocking) as and tgs (%d).", def.Clients), intf(func(c *bench.Config) *int { return &c.Clients }))
	str("duration", fmt.Sprintf("DURATION of as, tgs, tcp and latency (%s).", def.Duration), durf(func(c *bench.Config) *time.Duration { return &c.Duration }))
	str("login-rate", fmt.Sprintf("LOGIN_RATE of the latency load, logins/s (%g).", def.LoginRate), floatf(func(c *bench.Config) *float64 { return &c.LoginRate }))
	str("tgs-per-login", fmt.Sprintf("TGS_PER_LOGIN of the latency load (%d).", def.TGSPerLogin), intf(func(c *bench.Config) *int { return &c.TGSPerLogin }))
	str("client-levels", "CLIENT_LEVELS of the concurrency test ("+strings.Join(strings.Fields(strings.Trim(fmt.Sprint(def.ClientLevels), "[]")), ",")+").", func(cfg *bench.Config, v string) error {
		cfg.ClientLevels = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return err
			}
			cfg.ClientLevels = append(cfg.ClientLevels, n)
		}
		return nil
	})
	str("level-duration", fmt.Sprintf("Duration of each concurrency level (%s).", def.LevelDuration), durf(func(c *bench.Config) *time.Duration { return &c.LevelDuration }))
	str("startup-rounds", fmt.Sprintf("STARTUP_ROUNDS (%d).", def.StartupRounds), intf(func(c *bench.Config) *int { return &c.StartupRounds }))
	str("kadmin-operations", fmt.Sprintf("KADMIN_OPERATIONS per kind (%d).", def.KadminOperations), intf(func(c *bench.Config) *int { return &c.KadminOperations }))
	str("dump-rounds", fmt.Sprintf("DUMP_ROUNDS (%d).", def.DumpRounds), intf(func(c *bench.Config) *int { return &c.DumpRounds }))
	str("degradation-rounds", fmt.Sprintf("Rounds of the degradation test (%d).", def.DegradationRounds), intf(func(c *bench.Config) *int { return &c.DegradationRounds }))
	str("degradation-logins", fmt.Sprintf("Logins (each with a service ticket) per degradation round (%d).", def.DegradationLogins), intf(func(c *bench.Config) *int { return &c.DegradationLogins }))
	str("generator", "Generator of the as and tgs loads: batched (many requests in flight per socket, sendmmsg/recvmmsg) or blocking (a goroutine per client).", func(c *bench.Config, v string) error { c.Generator = v; return nil })
	str("preauth", "How the generator's logins pre-authenticate: auto (SPAKE when the KDC offers it, as kinit), spake or encrypted_timestamp ("+def.Preauth+").", func(c *bench.Config, v string) error { c.Preauth = v; return nil })
	str("kdc-service", "true: time the KDC's requests in the kernel during the as, tgs, tcp and latency loads (the kdcservice collector's BPF program; needs root or CAP_BPF and CAP_PERFMON, and the KDC on this host) and report its own service-time distribution beside the clients' latency (false).", func(c *bench.Config, v string) (err error) {
		c.KDCService, err = strconv.ParseBool(v)
		return err
	})
	str("batch-inflight", fmt.Sprintf("Requests the batched generator keeps in flight (%d).", def.BatchInflight), intf(func(c *bench.Config) *int { return &c.BatchInflight }))
	str("count", fmt.Sprintf("N: run the load tests (%s) N times, alternating, each metric the median of its N; 5 lets bench compare test runs against runs (1..%d, default 1).", strings.Join(bench.Repeated(), ", "), bench.MaxCount), func(c *bench.Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return err
		}
		c.Count = n
		return bench.ValidateCount(n, false)
	})
	str("shard", "i/n: be the i-th of n generators against one KDC (every n-th user, 1/n of the latency rate; "+andList(bench.FirstShard())+" in shard 1 only).", func(c *bench.Config, v string) error { c.Shard = v; return nil })
	str("request-timeout", fmt.Sprintf("Timeout of one request, UDP resends after 1 s and 2 s included (%s).", def.Timeout), durf(func(c *bench.Config) *time.Duration { return &c.Timeout }))
	str("output-dir", "Results go to DIR/<timestamp>/ ("+defaultOutputDir+").", func(c *bench.Config, v string) error { c.OutputDir = v; return nil })
	str("textfile", "Also write the krb5_bench_* metrics to this node_exporter textfile.", func(c *bench.Config, v string) error { c.Textfile = v; return nil })
	for _, t := range bench.AllTargets() {
		field := t.Field
		str("target."+t.Flag, t.Help(), floatf(func(c *bench.Config) *float64 { return field(&c.Targets) }))
	}
	return b
}

// defaultOutputDir is where results go without --output-dir.
const defaultOutputDir = "results"

// andList is "a, b and c".
func andList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// config is the defaults, then the file, then the flags given.
func (b *benchCmd) config() (bench.Config, error) {
	cfg := bench.Config{Settings: bench.Defaults(), OutputDir: defaultOutputDir}
	if b.configFile != "" {
		var err error
		if cfg, err = bench.LoadConfig(b.configFile, cfg); err != nil {
			return cfg, err
		}
	}
	for _, f := range b.flags {
		if err := f(&cfg); err != nil {
			return cfg, err
		}
	}
	if err := bench.ValidateSettings(&cfg.Settings); err != nil {
		return cfg, err
	}
	return cfg, nil
}

func (b *benchCmd) run(stdout, stderr io.Writer) int {
	cfg, err := b.config()
	if err != nil {
		fmt.Fprintf(stderr, "krb5-exporter bench: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A reader that goes away (`| head`) must not kill the bench before it
	// removes its realm and its kadmin principals.
	signal.Ignore(syscall.SIGPIPE)
	if b.genCPU >= 0 {
		if err := pin(os.Getpid(), b.genCPU); err != nil {
			fmt.Fprintf(stderr, "krb5-exporter bench: %v\n", err)
			return 2
		}
		// One CPU: more Go threads would only take turns on it.
		runtime.GOMAXPROCS(1)
	}
	if b.once {
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
	sys, cleanup, err := b.system(ctx, cfg, stderr)
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
	ln, err := net.Listen("tcp", b.listen)
	if err != nil {
		fmt.Fprintf(stderr, "krb5-exporter bench: --web.listen-address: %v\n", err)
		return 2
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	defer srv.Close()
	fmt.Fprintf(stderr, "krb5-exporter bench: serving /metrics on %s, running the suite every %s\n", b.listen, b.interval)
	for {
		rep, code := b.runOnce(ctx, cfg, stdout, stderr)
		if rep != nil {
			col.Set(rep)
		} else if code == 2 && ctx.Err() == nil {
			fmt.Fprintf(stderr, "krb5-exporter bench: the run could not start; next try in %s\n", b.interval)
		}
		select {
		case <-ctx.Done():
			return 0
		case err := <-errc:
			fmt.Fprintf(stderr, "krb5-exporter bench: %v\n", err)
			return 2
		case <-time.After(b.interval):
		}
	}
}

// system is the configured existing realm, or a new ephemeral one
// (removed by cleanup).
func (b *benchCmd) system(ctx context.Context, cfg bench.Config, stderr io.Writer) (*bench.System, func(), error) {
	if cfg.Realm != nil {
		unlock, err := lockRealm(cfg.Realm, cfg.Shard)
		if err != nil {
			return nil, nil, err
		}
		s, err := existingSystem(cfg.Realm, b.allowWrite || cfg.Realm.AllowWrites)
		if err != nil {
			unlock()
			return nil, nil, err
		}
		return s, unlock, nil
	}
	dir, err := os.MkdirTemp("", "krb5-bench-realm-")
	if err != nil {
		return nil, nil, err
	}
	opts := b.realmOpts
	opts.Dir = dir
	fmt.Fprintf(stderr, "krb5-exporter bench: creating an ephemeral realm in %s\n", dir)
	r, err := realm.Up(ctx, opts)
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	cleanup := func() {
		if b.keepRealm {
			fmt.Fprintf(stderr, "krb5-exporter bench: the realm stays up: krb5-exporter realm down --dir %s\n", dir)
			return
		}
		if err := r.Down(); err != nil {
			fmt.Fprintf(stderr, "krb5-exporter bench: removing the realm: %v\n", err)
		}
	}
	sys := bench.RealmSystem(r)
	if b.kdcCPU >= 0 {
		pinKDC := func() error {
			for _, p := range r.KDCPids() {
				if err := pin(p, b.kdcCPU); err != nil {
					return err
				}
			}
			return nil
		}
		if err := pinKDC(); err != nil {
			cleanup()
			return nil, nil, err
		}
		start := sys.StartKDC
		sys.StartKDC = func(ctx context.Context) error {
			if err := start(ctx); err != nil {
				return err
			}
			return pinKDC()
		}
		sys.Settings["kdc_cpu"] = strconv.Itoa(b.kdcCPU)
	}
	if b.genCPU >= 0 {
		sys.Settings["generator_cpu"] = strconv.Itoa(b.genCPU)
	}
	return sys, cleanup, nil
}

// lockRealm refuses a second bench against the same realm and KDC on this
// machine at the same time: their loads would mix and kadmin prefixes
// would be cleaned up under each other. The lock is a flock on a file in
// the temporary directory, released when the process ends however it ends.
func lockRealm(e *bench.ExistingRealm, shard string) (func(), error) {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, e.Name+"@"+e.KDC+shardSuffix(shard))
	path := filepath.Join(os.TempDir(), "krb5-bench-"+name+".lock")
	f, err := safefile.OpenOwned(path, os.O_RDWR|os.O_CREATE, 0o600) // in /tmp: no planted link or file
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another bench is running against realm %s at %s%s (lock %s is held); refusing to run a second at the same time", e.Name, e.KDC, shardSuffix(shard), path)
	}
	return func() { f.Close() }, nil
}

// shardSuffix names a shard in the lock: shards of one run lock apart.
func shardSuffix(shard string) string {
	if shard == "" || shard == "1/1" {
		return ""
	}
	return " shard " + shard
}

// existingSystem describes a configured realm.
func existingSystem(e *bench.ExistingRealm, allowWrites bool) (*bench.System, error) {
	s := &bench.System{
		Realm: e.Name, KDC: e.KDC, Domain: e.Domain, UserKeytab: e.UsersKeytab, Users: e.Users, Services: e.Services,
		KadminAddr: e.Kadmind, AdminPrincipal: e.AdminName, AdminKeytab: e.AdminKeytab, KDCLog: e.KDCLog,
		AllowWrites: allowWrites, DumpCommand: e.DumpCommand,
		Settings: map[string]string{"realm_kind": "existing realm"},
	}
	if e.Krb5Config != "" {
		s.Env = append(s.Env, "KRB5_CONFIG="+e.Krb5Config)
	}
	if e.KDCConf != "" {
		s.Env = append(s.Env, "KRB5_KDC_PROFILE="+e.KDCConf)
	}
	if e.UserFormat != "" {
		f := e.UserFormat
		s.UserName = func(i int) string { return fmt.Sprintf(f, i) }
	}
	if e.ServiceFormat != "" {
		f := e.ServiceFormat
		s.ServiceName = func(i int) string { return fmt.Sprintf(f, i) }
	}
	if e.KDCPidFile != "" {
		path := e.KDCPidFile
		s.KDCPids = func() []int { return kdcPids(path) }
	}
	if len(e.StopCommand) > 0 && len(e.StartCommand) > 0 {
		stopC, startC := e.StopCommand, e.StartCommand
		s.StopKDC = func() error { return runCommand(context.Background(), stopC) }
		s.StartKDC = func(ctx context.Context) error { return runCommand(ctx, startC) }
	}
	return s, nil
}

func runCommand(ctx context.Context, argv []string) error {
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// kdcPids lists the processes of the KDC whose pid file is path: its
// main process and its krb5kdc children (kdcproc.Find, by the default
// rule: root's, or this user's, MIT krb5kdc); none when it is not running
// or /proc cannot be read.
func kdcPids(path string) []int {
	procs, err := kdcproc.Find("/proc", path, nil)
	if err != nil {
		return nil
	}
	pids := make([]int, len(procs))
	for i, p := range procs {
		pids[i] = p.PID
	}
	return pids
}

// pin moves every thread of pid to one CPU.
func pin(pid, cpu int) error {
	out, err := exec.Command("taskset", "-a", "-p", "-c", strconv.Itoa(cpu), strconv.Itoa(pid)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("taskset -a -p -c %d %d: %v: %s", cpu, pid, err, strings.TrimSpace(string(out)))
	}
	return nil
}
