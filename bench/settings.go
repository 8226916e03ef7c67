package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// TestNames are the tests in the order they run. cpu and memory are
// measured during latency's load and need it.
var TestNames = []string{"startup", "as", "tgs", "latency", "cpu", "memory", "concurrency", "tcp", "kadmin", "dump", "degradation"}

// Settings are the knobs of the suite; the zero value of a field means the
// seed's default (see Defaults). Every field is a flag of `krb5-exporter
// bench` and a key of its configuration file.
type Settings struct {
	Tests             []string      `yaml:"tests" json:"tests"`
	Clients           int           `yaml:"clients" json:"clients"`
	Duration          time.Duration `yaml:"duration" json:"duration_ns"`
	LoginRate         float64       `yaml:"login_rate" json:"login_rate"`
	TGSPerLogin       int           `yaml:"tgs_per_login" json:"tgs_per_login"`
	ClientLevels      []int         `yaml:"client_levels" json:"client_levels"`
	LevelDuration     time.Duration `yaml:"level_duration" json:"level_duration_ns"`
	StartupRounds     int           `yaml:"startup_rounds" json:"startup_rounds"`
	KadminOperations  int           `yaml:"kadmin_operations" json:"kadmin_operations"`
	DumpRounds        int           `yaml:"dump_rounds" json:"dump_rounds"`
	DegradationRounds int           `yaml:"degradation_rounds" json:"degradation_rounds"`
	DegradationLogins int           `yaml:"degradation_logins" json:"degradation_logins"`
	// Generator of the as and tgs loads: GeneratorBatched (default) or
	// GeneratorBlocking.
	Generator string `yaml:"generator" json:"generator"`
	// BatchInflight is how many requests the batched generator keeps in
	// flight (more lets each system call carry more of them).
	BatchInflight int `yaml:"batch_inflight" json:"batch_inflight"`
	// pace is a pause of each blocking client after each request: a
	// generator that throttles itself (tests of the KDC-busy warning).
	pace time.Duration
	// Preauth is how the generator's logins pre-authenticate: auto (SPAKE
	// when the KDC offers it, else encrypted timestamp, as kinit), spake
	// or encrypted_timestamp.
	Preauth string `yaml:"preauth" json:"preauth"`
	// Shard "i/n" makes this generator the i-th of n against one KDC: it
	// uses every n-th user (a disjoint set) and 1/n of the latency rate;
	// startup, kadmin and dump run in shard 1 only. Empty: "1/1".
	Shard string `yaml:"shard" json:"shard,omitempty"`
	// Timeout bounds one request (a login's two round trips count apart).
	Timeout time.Duration `yaml:"request_timeout" json:"request_timeout_ns"`
	Targets Targets       `yaml:"targets" json:"targets"`
}

// Targets are the pass marks, in the units a person reads in the report.
type Targets struct {
	StartupMaxMS        float64 `yaml:"startup_max_ms" json:"startup_max_ms"`
	ASMinRate           float64 `yaml:"as_min_rate" json:"as_min_rate"`
	TGSMinRate          float64 `yaml:"tgs_min_rate" json:"tgs_min_rate"`
	LoginP95MaxMS       float64 `yaml:"login_p95_max_ms" json:"login_p95_max_ms"`
	LoginP99MaxMS       float64 `yaml:"login_p99_max_ms" json:"login_p99_max_ms"`
	TicketP95MaxMS      float64 `yaml:"ticket_p95_max_ms" json:"ticket_p95_max_ms"`
	TicketP99MaxMS      float64 `yaml:"ticket_p99_max_ms" json:"ticket_p99_max_ms"`
	ErrorMaxPct         float64 `yaml:"error_max_pct" json:"error_max_pct"`
	ConcurrencyMinPct   float64 `yaml:"concurrency_min_pct" json:"concurrency_min_pct"`
	TCPMinRate          float64 `yaml:"tcp_min_rate" json:"tcp_min_rate"`
	KadminMinRate       float64 `yaml:"kadmin_min_rate" json:"kadmin_min_rate"`
	DumpMaxS            float64 `yaml:"dump_max_s" json:"dump_max_s"`
	CPUMaxPct           float64 `yaml:"cpu_max_pct" json:"cpu_max_pct"`
	MemoryMaxMB         float64 `yaml:"memory_max_mb" json:"memory_max_mb"`
	DegradationMaxPct   float64 `yaml:"degradation_max_pct" json:"degradation_max_pct"`
	GeneratorWarnFactor float64 `yaml:"generator_warn_factor" json:"generator_warn_factor"`
	// KDCBusyWarnPct: warn when the KDC was less busy than this (% of
	// the cores it may use) during the as and tgs loads.
	KDCBusyWarnPct float64 `yaml:"kdc_busy_warn_pct" json:"kdc_busy_warn_pct"`
}

// Defaults are the seed's settings and targets.
func Defaults() Settings {
	return Settings{
		Tests:             slices.Clone(TestNames),
		Clients:           8,
		Duration:          10 * time.Second,
		LoginRate:         100,
		TGSPerLogin:       4,
		ClientLevels:      []int{1, 2, 4, 8, 16, 32, 64},
		LevelDuration:     3 * time.Second,
		StartupRounds:     3,
		KadminOperations:  1000,
		DumpRounds:        3,
		DegradationRounds: 4,
		DegradationLogins: 1000,
		Timeout:           5 * time.Second,
		Generator:         GeneratorBatched,
		BatchInflight:     64,
		Preauth:           string(krb5.PreauthAuto),
		Targets: Targets{
			StartupMaxMS:        5000,
			ASMinRate:           500,
			TGSMinRate:          1000,
			LoginP95MaxMS:       20,
			LoginP99MaxMS:       50,
			TicketP95MaxMS:      10,
			TicketP99MaxMS:      25,
			ErrorMaxPct:         0.1,
			ConcurrencyMinPct:   70,
			TCPMinRate:          300,
			KadminMinRate:       100,
			DumpMaxS:            30,
			CPUMaxPct:           50,
			MemoryMaxMB:         256,
			DegradationMaxPct:   20,
			GeneratorWarnFactor: 0.2,
			KDCBusyWarnPct:      95,
		},
	}
}

// ParseTests parses a comma-separated list of test names; "all" or "" is
// every test.
func ParseTests(s string) ([]string, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "all" {
		return slices.Clone(TestNames), nil
	}
	var out []string
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(TestNames, n) {
			return nil, fmt.Errorf("unknown test %q (tests: %s)", n, strings.Join(TestNames, ","))
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// Validate reports the first setting that cannot work.
func (s *Settings) Validate() error {
	if _, err := ParseTests(strings.Join(s.Tests, ",")); err != nil {
		return err
	}
	pos := []struct {
		name string
		v    float64
	}{
		{"clients", float64(s.Clients)}, {"duration", float64(s.Duration)}, {"login_rate", s.LoginRate},
		{"level_duration", float64(s.LevelDuration)}, {"startup_rounds", float64(s.StartupRounds)},
		{"kadmin_operations", float64(s.KadminOperations)}, {"dump_rounds", float64(s.DumpRounds)},
		{"degradation_rounds", float64(s.DegradationRounds)}, {"degradation_logins", float64(s.DegradationLogins)},
		{"request_timeout", float64(s.Timeout)}, {"batch_inflight", float64(s.BatchInflight)},
	}
	for _, p := range pos {
		if p.v <= 0 {
			return fmt.Errorf("%s must be positive", p.name)
		}
	}
	if s.TGSPerLogin < 0 {
		return fmt.Errorf("tgs_per_login must be >= 0")
	}
	if s.DegradationRounds < 2 && slices.Contains(s.Tests, "degradation") {
		return fmt.Errorf("degradation_rounds must be at least 2 (the verdict compares the last round with the first)")
	}
	if _, _, err := ParseShard(s.Shard); err != nil {
		return err
	}
	if _, err := krb5.ParsePreauthMode(s.Preauth); err != nil {
		return fmt.Errorf("preauth: %w", err)
	}
	if s.Generator != GeneratorBatched && s.Generator != GeneratorBlocking {
		return fmt.Errorf("generator must be %s or %s, not %q", GeneratorBatched, GeneratorBlocking, s.Generator)
	}
	if len(s.ClientLevels) == 0 {
		return fmt.Errorf("client_levels is empty")
	}
	for _, l := range s.ClientLevels {
		if l <= 0 || l > 4096 {
			return fmt.Errorf("client level %d out of range 1..4096", l)
		}
	}
	if s.Clients > 4096 {
		return fmt.Errorf("clients %d out of range 1..4096", s.Clients)
	}
	return nil
}

// has reports whether test t was asked for.
func (s *Settings) has(t string) bool { return slices.Contains(s.Tests, t) }

// ParseShard parses "i/n" (1 <= i <= n); empty is 1/1.
func ParseShard(v string) (i, n int, err error) {
	if v == "" {
		return 1, 1, nil
	}
	if _, err := fmt.Sscanf(v, "%d/%d", &i, &n); err != nil || n < 1 || i < 1 || i > n || fmt.Sprintf("%d/%d", i, n) != v {
		return 0, 0, fmt.Errorf("shard %q: want i/n with 1 <= i <= n, e.g. 2/4", v)
	}
	return i, n, nil
}
