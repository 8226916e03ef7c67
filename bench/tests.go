package bench

import (
	"context"
	"strconv"
	"strings"
)

// testDef is one test of the suite: what runs it, how --count and --shard
// treat it, the report section it writes and the targets it judges.
type testDef struct {
	name string
	run  func(*run, context.Context) error
	// repeated: --count repeats it (the loads whose metrics a comparison
	// of runs tests); the others run once, in the first round.
	repeated bool
	// firstShard: it runs in shard 1 only (it restarts or writes to the
	// one KDC all shards share).
	firstShard bool
	// section returns what restores the report's section of a repeated
	// test to the repetition that just ran (nil: no section, cpu reads
	// latency's).
	section func(*Report) func()
	targets []Target
}

// tests are the tests in the order they run. cpu and memory are measured
// during latency's load and need it.
var tests = []testDef{
	{name: "startup", run: (*run).startup, firstShard: true, targets: []Target{
		{"startup-max-ms", "Target: startup at most (%s ms).", func(t *Targets) *float64 { return &t.StartupMaxMS }}}},
	{name: "as", run: (*run).as, repeated: true,
		section: func(rep *Report) func() { as := rep.AS; return func() { rep.AS = as } },
		targets: []Target{{"as-min-rate", "Target: logins/s at least (%s).", func(t *Targets) *float64 { return &t.ASMinRate }}}},
	{name: "tgs", run: (*run).tgs, repeated: true,
		section: func(rep *Report) func() { tgs := rep.TGS; return func() { rep.TGS = tgs } },
		targets: []Target{{"tgs-min-rate", "Target: tickets/s at least (%s).", func(t *Targets) *float64 { return &t.TGSMinRate }}}},
	{name: "latency", run: (*run).latency, repeated: true,
		section: func(rep *Report) func() { lat := rep.Latency; return func() { rep.Latency = lat } },
		targets: []Target{
			{"login-p95-max-ms", "Target: login p95 at most (%s ms).", func(t *Targets) *float64 { return &t.LoginP95MaxMS }},
			{"login-p99-max-ms", "Target: login p99 at most (%s ms).", func(t *Targets) *float64 { return &t.LoginP99MaxMS }},
			{"ticket-p95-max-ms", "Target: ticket p95 at most (%s ms).", func(t *Targets) *float64 { return &t.TicketP95MaxMS }},
			{"ticket-p99-max-ms", "Target: ticket p99 at most (%s ms).", func(t *Targets) *float64 { return &t.TicketP99MaxMS }},
			{"error-max-pct", "Target: errors at most (%s %).", func(t *Targets) *float64 { return &t.ErrorMaxPct }}}},
	{name: "cpu", run: (*run).cpu, repeated: true, targets: []Target{
		{"cpu-max-pct", "Target: KDC CPU at the steady load at most (%s % of one core).", func(t *Targets) *float64 { return &t.CPUMaxPct }}}},
	{name: "memory", run: (*run).memory, targets: []Target{
		{"memory-max-mb", "Target: KDC RSS at most (%s MB).", func(t *Targets) *float64 { return &t.MemoryMaxMB }}}},
	{name: "concurrency", run: (*run).concurrency, repeated: true,
		section: func(rep *Report) func() { c := rep.Concurrency; return func() { rep.Concurrency = c } },
		targets: []Target{{"concurrency-min-pct", "Target: top level at least this % of the peak (%s).", func(t *Targets) *float64 { return &t.ConcurrencyMinPct }}}},
	{name: "tcp", run: (*run).tcp, repeated: true,
		section: func(rep *Report) func() { tcp := rep.TCP; return func() { rep.TCP = tcp } },
		targets: []Target{{"tcp-min-rate", "Target: TCP logins/s at least (%s).", func(t *Targets) *float64 { return &t.TCPMinRate }}}},
	{name: "kadmin", run: (*run).kadmin, firstShard: true, targets: []Target{
		{"kadmin-min-rate", "Target: slowest kadmin kind at least (%s ops/s).", func(t *Targets) *float64 { return &t.KadminMinRate }}}},
	{name: "dump", run: (*run).dump, firstShard: true, targets: []Target{
		{"dump-max-s", "Target: dump at most (%s s).", func(t *Targets) *float64 { return &t.DumpMaxS }}}},
	{name: "degradation", run: (*run).degradation, targets: []Target{
		{"degradation-max-pct", "Target: last round slower than the first by at most (%s %).", func(t *Targets) *float64 { return &t.DegradationMaxPct }}}},
}

// warnTargets are the targets of no one test: the levels of warnings.
var warnTargets = []Target{
	{"generator-warn-factor", "No longer decides a warning (the generator is blamed from the KDC's waits for a CPU it shares; docs/bench.md); accepted so that configurations that set it still load.", func(t *Targets) *float64 { return &t.GeneratorWarnFactor }},
	{"kdc-busy-warn-pct", "Warn when the KDC waited for a CPU or its disk 100 minus this % of the time or more, or (as, tgs) was less busy than this % of the cores it may use (%s).", func(t *Targets) *float64 { return &t.KDCBusyWarnPct }},
}

// Target is a setting of Targets: its flag (--target.FLAG), its help
// (a %s is its default) and its field.
type Target struct {
	Flag  string
	help  string
	Field func(*Targets) *float64
}

// Help is the target's help with its default from Defaults.
func (t Target) Help() string {
	d := Defaults().Targets
	return strings.Replace(t.help, "%s", strconv.FormatFloat(*t.Field(&d), 'g', -1, 64), 1)
}

// AllTargets are the targets of the tests in their order, then those of
// the warnings.
func AllTargets() []Target {
	var out []Target
	for _, t := range tests {
		out = append(out, t.targets...)
	}
	return append(out, warnTargets...)
}

// testNames are the names of the tests for which keep is true, in order.
func testNames(keep func(testDef) bool) []string {
	var out []string
	for _, t := range tests {
		if keep(t) {
			out = append(out, t.name)
		}
	}
	return out
}

// TestNames are the tests in the order they run.
func TestNames() []string { return testNames(func(testDef) bool { return true }) }

// Repeated are the tests --count repeats.
func Repeated() []string { return testNames(func(t testDef) bool { return t.repeated }) }

// FirstShard are the tests that run in shard 1 only.
func FirstShard() []string { return testNames(func(t testDef) bool { return t.firstShard }) }
