package bench

import (
	"context"
)

// testDef is one test of the suite: what runs it, how --count and --shard
// treat it, and the report section it writes.
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
}

// tests are the tests in the order they run. cpu and memory are measured
// during latency's load and need it.
var tests = []testDef{
	{name: "startup", run: (*run).startup, firstShard: true},
	{name: "as", run: (*run).as, repeated: true,
		section: func(rep *Report) func() { as := rep.AS; return func() { rep.AS = as } }},
	{name: "tgs", run: (*run).tgs, repeated: true,
		section: func(rep *Report) func() { tgs := rep.TGS; return func() { rep.TGS = tgs } }},
	{name: "latency", run: (*run).latency, repeated: true,
		section: func(rep *Report) func() { lat := rep.Latency; return func() { rep.Latency = lat } }},
	{name: "cpu", run: (*run).cpu, repeated: true},
	{name: "memory", run: (*run).memory},
	{name: "concurrency", run: (*run).concurrency, repeated: true,
		section: func(rep *Report) func() { c := rep.Concurrency; return func() { rep.Concurrency = c } }},
	{name: "tcp", run: (*run).tcp, repeated: true,
		section: func(rep *Report) func() { tcp := rep.TCP; return func() { rep.TCP = tcp } }},
	{name: "kadmin", run: (*run).kadmin, firstShard: true},
	{name: "dump", run: (*run).dump, firstShard: true},
	{name: "degradation", run: (*run).degradation},
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
