package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/krb5-exporter/krb5-exporter/bench/report"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// Generators of the loads (Settings.Generator).
const (
	// GeneratorBatched keeps many requests in flight per socket, matches
	// replies by nonce and batches the system calls (loadgen.Batched,
	// Sessions, TCP).
	GeneratorBatched = "batched"
	// GeneratorBlocking is one goroutine per client, one request at a
	// time, on the engine's blocking client.
	GeneratorBlocking = "blocking"
)

// Defaults are the seed's settings and targets.
func Defaults() Settings {
	return Settings{
		Tests:             TestNames(),
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
		return TestNames(), nil
	}
	var out []string
	names := TestNames()
	for _, n := range strings.Split(s, ",") {
		n = strings.TrimSpace(n)
		if !slices.Contains(names, n) {
			return nil, fmt.Errorf("unknown test %q (tests: %s)", n, strings.Join(names, ","))
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// Validate reports the first setting that cannot work.
func ValidateSettings(s *Settings) error {
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
	if err := ValidateCount(s.Count, true); err != nil {
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

// MaxCount bounds --count (report.MaxCount, which bounds what a
// report.json read back may hold).
const MaxCount = report.MaxCount

// ValidateCount checks a repetition count (0, unset, means 1 when
// zeroOK).
func ValidateCount(n int, zeroOK bool) error {
	if n < 1 && !(zeroOK && n == 0) || n > MaxCount {
		return fmt.Errorf("count %d out of range 1..%d (how many times the load tests run; 5 makes a comparison of runs meaningful)", n, MaxCount)
	}
	return nil
}

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
