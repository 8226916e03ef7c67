package bench

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/cli"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// Flags is the bench command's command line. RegisterFlags fills it in
// when the command line is parsed; Config lays the settings given on it
// over the configuration file's.
type Flags struct {
	// Once runs the suite once; without it the command runs it every
	// Interval and serves the last results on Listen.
	Once     bool
	Interval time.Duration
	Listen   string
	// ConfigFile is the YAML file of the settings and of an optional
	// existing realm.
	ConfigFile string
	Setup      Setup
	// Baseline is an earlier run each run is compared with; FloorPct and
	// SingleRunFactor are the comparison's floors (compare.Options), also
	// bench compare's.
	Baseline                  string
	FloorPct, SingleRunFactor float64

	// applied after the configuration file, only when given
	given []func(*Config) error
}

// defaultOutputDir is where results go without --output-dir.
const defaultOutputDir = "results"

// RegisterFlags adds the bench command's flags to app; listenAddress is
// --web.listen-address's default. The returned Flags are filled in when
// the command line is parsed.
func RegisterFlags(app cli.FlagGroup, listenAddress string) *Flags {
	f := &Flags{}
	app.Flag("once", "Run the suite once, write the results and exit: 0 when every test passed, 1 when one failed, 2 when nothing could run.").BoolVar(&f.Once)
	app.Flag("config.file", "YAML file with the settings below (same names, with _) and an optional existing realm.").StringVar(&f.ConfigFile)
	app.Flag("interval", "Without --once: run the suite this often and serve the last results on /metrics.").Default("24h").DurationVar(&f.Interval)
	app.Flag("web.listen-address", "Without --once: where to serve /metrics.").Default(listenAddress).StringVar(&f.Listen)
	app.Flag("allow-writes", "Against an existing realm: allow the tests that write (kadmin) or restart the KDC (startup).").BoolVar(&f.Setup.AllowWrites)
	app.Flag("kdc-cpu", "Pin the ephemeral realm's KDC to this CPU (taskset); -1 leaves it.").Default("-1").IntVar(&f.Setup.KDCCPU)
	app.Flag("generator-cpu", "Pin this process (the load generator) to this CPU; -1 leaves it.").Default("-1").IntVar(&f.Setup.GeneratorCPU)
	// The ephemeral realm: the options of `realm up`, under realm.
	realm.RegisterFlags(app, "realm.", &f.Setup.Realm)
	app.Flag("realm.keep", "Ephemeral realm: leave it running afterwards (prints its directory).").BoolVar(&f.Setup.KeepRealm)
	app.Flag("baseline", "With --once (or each run of the daemon): compare the run with this earlier one (a results/<timestamp> directory or its report.json) in the reports and metrics, and exit 1 when a metric got significantly worse beyond --change-floor, even if it passes its target.").StringVar(&f.Baseline)
	app.Flag("change-floor", "With --baseline and bench compare, runs with --count: a change smaller than this % of the old value is never called slower or faster.").Default("5").Float64Var(&f.FloorPct)
	app.Flag("single-run-floor", "With --baseline and bench compare: when either run ran its loads once (no --count), a metric is called only when new/old is at least this factor or at most its inverse: the seconds of one run show that run's noise, not how much two runs differ.").Default("2").Float64Var(&f.SingleRunFactor)
	f.settingFlags(app)
	return f
}

// settingFlags adds a flag for each setting of the configuration file;
// one given on the command line replaces the file's.
func (fl *Flags) settingFlags(app cli.FlagGroup) {
	// The settings' helps say their defaults.
	def := Defaults()
	str := func(name, help string, apply func(*Config, string) error) {
		var v string
		var given bool
		app.Flag(name, help).IsSetByUser(&given).StringVar(&v)
		fl.given = append(fl.given, func(cfg *Config) error {
			if !given {
				return nil
			}
			if err := apply(cfg, v); err != nil {
				return fmt.Errorf("--%s: %w", name, err)
			}
			return nil
		})
	}
	intf := func(p func(*Config) *int) func(*Config, string) error {
		return func(cfg *Config, v string) error {
			n, err := strconv.Atoi(v)
			*p(cfg) = n
			return err
		}
	}
	floatf := func(p func(*Config) *float64) func(*Config, string) error {
		return func(cfg *Config, v string) error {
			f, err := strconv.ParseFloat(v, 64)
			*p(cfg) = f
			return err
		}
	}
	durf := func(p func(*Config) *time.Duration) func(*Config, string) error {
		return func(cfg *Config, v string) error {
			d, err := time.ParseDuration(v)
			*p(cfg) = d
			return err
		}
	}
	str("tests", "Comma-separated tests to run (default all): "+strings.Join(TestNames(), ","), func(cfg *Config, v string) (err error) {
		cfg.Tests, err = ParseTests(v)
		return err
	})
	str("clients", fmt.Sprintf("CLIENTS: closed-loop clients of tcp, degradation and (with --generator blocking) as and tgs (%d).", def.Clients), intf(func(c *Config) *int { return &c.Clients }))
	str("duration", fmt.Sprintf("DURATION of as, tgs, tcp and latency (%s).", def.Duration), durf(func(c *Config) *time.Duration { return &c.Duration }))
	str("login-rate", fmt.Sprintf("LOGIN_RATE of the latency load, logins/s (%g).", def.LoginRate), floatf(func(c *Config) *float64 { return &c.LoginRate }))
	str("tgs-per-login", fmt.Sprintf("TGS_PER_LOGIN of the latency load (%d).", def.TGSPerLogin), intf(func(c *Config) *int { return &c.TGSPerLogin }))
	str("client-levels", "CLIENT_LEVELS of the concurrency test ("+strings.Join(strings.Fields(strings.Trim(fmt.Sprint(def.ClientLevels), "[]")), ",")+").", func(cfg *Config, v string) error {
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
	str("level-duration", fmt.Sprintf("Duration of each concurrency level (%s).", def.LevelDuration), durf(func(c *Config) *time.Duration { return &c.LevelDuration }))
	str("startup-rounds", fmt.Sprintf("STARTUP_ROUNDS (%d).", def.StartupRounds), intf(func(c *Config) *int { return &c.StartupRounds }))
	str("kadmin-operations", fmt.Sprintf("KADMIN_OPERATIONS per kind (%d).", def.KadminOperations), intf(func(c *Config) *int { return &c.KadminOperations }))
	str("dump-rounds", fmt.Sprintf("DUMP_ROUNDS (%d).", def.DumpRounds), intf(func(c *Config) *int { return &c.DumpRounds }))
	str("degradation-rounds", fmt.Sprintf("Rounds of the degradation test (%d).", def.DegradationRounds), intf(func(c *Config) *int { return &c.DegradationRounds }))
	str("degradation-logins", fmt.Sprintf("Logins (each with a service ticket) per degradation round (%d).", def.DegradationLogins), intf(func(c *Config) *int { return &c.DegradationLogins }))
	str("generator", "Generator of the as and tgs loads: batched (many requests in flight per socket, sendmmsg/recvmmsg) or blocking (a goroutine per client).", func(c *Config, v string) error { c.Generator = v; return nil })
	str("preauth", "How the generator's logins pre-authenticate: auto (SPAKE when the KDC offers it, as kinit), spake or encrypted_timestamp ("+def.Preauth+").", func(c *Config, v string) error { c.Preauth = v; return nil })
	str("kdc-service", "true: time the KDC's requests in the kernel during the as, tgs, tcp and latency loads (the kdcservice collector's BPF program; needs root or CAP_BPF and CAP_PERFMON, and the KDC on this host) and report its own service-time distribution beside the clients' latency (false).", func(c *Config, v string) (err error) {
		c.KDCService, err = strconv.ParseBool(v)
		return err
	})
	str("batch-inflight", fmt.Sprintf("Requests the batched generator keeps in flight (%d).", def.BatchInflight), intf(func(c *Config) *int { return &c.BatchInflight }))
	str("count", fmt.Sprintf("N: run the load tests (%s) N times, alternating, each metric the median of its N; 5 lets bench compare test runs against runs (1..%d, default 1).", strings.Join(Repeated(), ", "), MaxCount), func(c *Config, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return err
		}
		c.Count = n
		return ValidateCount(n, false)
	})
	str("shard", "i/n: be the i-th of n generators against one KDC (every n-th user, 1/n of the latency rate; "+andList(FirstShard())+" in shard 1 only).", func(c *Config, v string) error { c.Shard = v; return nil })
	str("request-timeout", fmt.Sprintf("Timeout of one request, UDP resends after 1 s and 2 s included (%s).", def.Timeout), durf(func(c *Config) *time.Duration { return &c.Timeout }))
	str("output-dir", "Results go to DIR/<timestamp>/ ("+defaultOutputDir+").", func(c *Config, v string) error { c.OutputDir = v; return nil })
	str("textfile", "Also write the krb5_bench_* metrics to this node_exporter textfile.", func(c *Config, v string) error { c.Textfile = v; return nil })
	for _, t := range AllTargets() {
		field := t.Field
		str("target."+t.Flag, t.Help(), floatf(func(c *Config) *float64 { return field(&c.Targets) }))
	}
}

// andList is "a, b and c".
func andList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}

// Config is the defaults, then the configuration file, then the settings
// given on the command line.
func (f *Flags) Config() (Config, error) {
	cfg := Config{Settings: Defaults(), OutputDir: defaultOutputDir}
	if f.ConfigFile != "" {
		var err error
		if cfg, err = LoadConfig(f.ConfigFile, cfg); err != nil {
			return cfg, err
		}
	}
	for _, apply := range f.given {
		if err := apply(&cfg); err != nil {
			return cfg, err
		}
	}
	if err := ValidateSettings(&cfg.Settings); err != nil {
		return cfg, err
	}
	return cfg, nil
}
