package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/krb5-exporter/krb5-exporter/bench/report"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/loadgen"
)

// errSkipped marks a test that cannot run against this system.
var errSkipped = errors.New("skipped")

type skip string

func (s skip) Error() string   { return string(s) }
func (s skip) Is(t error) bool { return t == errSkipped }

// run is one execution of the suite.
type run struct {
	sys     *System
	set     Settings
	rep     *Report
	fleet   *fleet
	sampler *sampler
	prog    *progress
	pace    time.Duration // Suite.pace
	kdc     *kdcTracer    // Settings.KDCService; nil without

	mu      sync.Mutex
	methods map[string]int // logins by pre-authentication method

	// The repetitions (Settings.Count): count of them, the round running
	// and whether its test is repeated; each metric's values and scale,
	// each repeated test's sections per repetition, the warnings of the
	// repetitions.
	count    int
	round    int
	repeated bool
	values   map[string][]float64
	scales   map[string]float64
	details  map[string][]func() // nil for a test without a section (cpu)
	ran      map[string]int
	repWarns []*repWarn
	// capWindows are the latency loads' windows (capacityCheck).
	capWindows map[*OpenLoop]*capWindow
}

// took counts the logins of a load by pre-authentication method.
func (r *run) took(res *loadgen.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for m, n := range res.Methods {
		if r.methods == nil {
			r.methods = map[string]int{}
		}
		r.methods[m] += n
	}
}

// preauthUsed says how the generator's logins pre-authenticated: the
// setting and the methods its logins used, most used first.
func (r *run) preauthUsed() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ms := make([]string, 0, len(r.methods))
	for m := range r.methods {
		ms = append(ms, m)
	}
	sort.Slice(ms, func(i, j int) bool {
		return r.methods[ms[i]] > r.methods[ms[j]] || r.methods[ms[i]] == r.methods[ms[j]] && ms[i] < ms[j]
	})
	used := "no logins"
	if len(ms) > 0 {
		used = strings.Join(ms, ", ")
	}
	return fmt.Sprintf("%s (preauth %s)", used, r.fleet.preauth)
}

// Observer hears about the run as it goes (the live progress line).
type Observer interface {
	TestStarted(name string)
	TestDone(name string, res TestResult)
}

// Suite runs the tests; Progress can be polled by a progress printer.
type Suite struct {
	Sys      *System
	Settings Settings
	Observer Observer

	// StatePeriod is how often, on average, the KDC's /proc states are
	// sampled during a test: 0 means DefaultStatePeriod, below 0 off.
	StatePeriod time.Duration

	prog progress
	// pace pauses each blocking client after each request: a generator
	// that throttles itself (tests of the KDC-busy warning).
	pace time.Duration
}

// Progress returns the running test, its start, and the successful and
// failed requests so far.
func (s *Suite) Progress() (test string, started time.Time, ok, failed int64) {
	if p := s.prog.test.Load(); p != nil {
		test = *p
	}
	return test, time.Unix(0, s.prog.started.Load()), s.prog.counts.OK.Load(), s.prog.counts.Failed.Load()
}

// Run runs the chosen tests in order and returns the report. The error
// is only for a run that could not start (bad settings or system); test
// failures are in the report.
func (s *Suite) Run(ctx context.Context) (*Report, error) {
	if err := ValidateSettings(&s.Settings); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if err := s.Sys.validate(); err != nil {
		return nil, err
	}
	shard, shards, _ := ParseShard(s.Settings.Shard)
	r := &run{
		sys: s.Sys, set: s.Settings, prog: &s.prog, pace: s.pace,
		fleet:   &fleet{sys: s.Sys, shard: shard, shards: shards, preauth: krb5.PreauthMode(s.Settings.Preauth)},
		sampler: newSampler(s.Sys.KDCPids),
		rep: &Report{
			Schema: report.SchemaVersion, Started: time.Now(), Machine: machine(), Settings: s.Settings,
			System: SystemInfo{Realm: s.Sys.Realm, KDC: s.Sys.KDC, Users: s.Sys.Users, Services: s.Sys.Services,
				Settings: s.Sys.Settings},
			Warnings: []string{},
		},
	}
	if s.StatePeriod != 0 {
		r.sampler.period = max(0, s.StatePeriod)
	}
	r.count = max(1, s.Settings.Count)
	r.startKDCTracer()
	defer r.stopKDCTracer()
	// Round k runs repetition k of every chosen repeated test, in the
	// suite's order (the first round also the tests that run once), so
	// that a slow drift of the machine falls on every test alike.
	for round := 1; round <= r.count; round++ {
		for _, t := range tests {
			name := t.name
			repeated := r.count > 1 && t.repeated
			if !slices.Contains(s.Settings.Tests, name) || round > 1 && !repeated {
				continue
			}
			r.round, r.repeated = round, repeated
			label := name
			if repeated {
				label = fmt.Sprintf("%s %d/%d", name, round, r.count)
			}
			res := s.runTest(ctx, r, t, label)
			if round == 1 {
				r.rep.Tests = append(r.rep.Tests, res)
				continue
			}
			t := &r.rep.Tests[slices.IndexFunc(r.rep.Tests, func(t TestResult) bool { return t.Name == name })]
			t.Duration += res.Duration
			if res.Status == "error" && t.Status != "error" {
				t.Status, t.Error = "error", fmt.Sprintf("repetition %d of %d: %s", round, r.count, res.Error)
			}
		}
	}
	r.repeated = false
	r.medians()
	r.prog.reset("")
	r.rep.System.Preauth = r.preauthUsed()
	r.rep.Capacity = r.capacityCheck()
	r.rep.Samples = r.sampler.all()
	r.rep.Finished = time.Now()
	r.rep.Verdict = Pass
	for _, t := range r.rep.Tests {
		if t.Status == "fail" || t.Status == "error" {
			r.rep.Verdict = Fail
		}
	}
	return r.rep, nil
}

// runTest runs one repetition of one test and returns its result; the
// metrics it records are kept in r.values, those of a repetition after
// the first only there (medians puts their median into the report).
func (s *Suite) runTest(ctx context.Context, r *run, t testDef, label string) TestResult {
	name := t.name
	if ctx.Err() != nil {
		return TestResult{Name: name, Status: "error", Error: "not run: interrupted"}
	}
	if s.Observer != nil {
		s.Observer.TestStarted(label)
	}
	r.prog.reset(label)
	start := time.Now()
	r.sampler.begin(name)
	nMetrics := len(r.rep.Metrics)
	var err error
	if shard, shards, _ := ParseShard(s.Settings.Shard); shard > 1 && t.firstShard {
		err = skip(fmt.Sprintf("runs in shard 1 of %d only", shards))
	} else {
		err = t.run(r, ctx)
	}
	r.sampler.end()
	res := TestResult{Name: name, Status: "pass", Duration: time.Since(start).Seconds()}
	switch {
	case errors.Is(err, errSkipped):
		res.Status, res.Error = "skipped", err.Error()
	case err != nil:
		res.Status, res.Error = "error", err.Error()
	default:
		for _, m := range r.rep.Metrics[nMetrics:] {
			if m.Verdict == Fail {
				res.Status = "fail"
			}
		}
	}
	if r.values == nil {
		r.values, r.details, r.ran = map[string][]float64{}, map[string][]func(){}, map[string]int{}
	}
	for _, m := range r.rep.Metrics[nMetrics:] {
		r.values[m.Name] = append(r.values[m.Name], m.Value)
	}
	if r.round > 1 {
		r.rep.Metrics = r.rep.Metrics[:nMetrics]
	}
	if r.repeated {
		var restore func()
		if t.section != nil {
			restore = t.section(r.rep)
		}
		r.details[name] = append(r.details[name], restore)
		r.ran[name]++
	}
	if s.Observer != nil {
		s.Observer.TestDone(label, res)
	}
	return res
}

// medians makes each repeated metric's value the median of its
// repetitions (Repeats keeps them all) and judges it again; a test fails
// when a median does. Each repeated test's section (and raw CSVs) is its
// repetition nearest the median of its first metric, and the warnings of
// the repetitions are said once each.
func (r *run) medians() {
	if r.count == 1 {
		return
	}
	failed := map[string]bool{}
	first := map[string]string{}
	for i := range r.rep.Metrics {
		m := &r.rep.Metrics[i]
		if _, ok := first[m.Test]; !ok {
			first[m.Test] = m.Name
		}
		if vs := r.values[m.Name]; len(vs) > 1 {
			m.Repeats = vs
			judge(m, report.Median(vs), r.scales[m.Name])
		}
		if m.Verdict == Fail {
			failed[m.Test] = true
		}
	}
	for i := range r.rep.Tests {
		t := &r.rep.Tests[i]
		if r.ran[t.Name] == 0 {
			continue
		}
		t.Repeats = r.ran[t.Name]
		if t.Status == "pass" || t.Status == "fail" {
			t.Status = map[bool]string{true: "fail", false: "pass"}[failed[t.Name]]
		}
		d := r.details[t.Name]
		if vs := r.values[first[t.Name]]; len(vs) == len(d) && d[0] != nil {
			med, best := report.Median(vs), 0
			for k, v := range vs {
				if math.Abs(v-med) < math.Abs(vs[best]-med) {
					best = k
				}
			}
			d[best]()
			t.Detail = best + 1
		}
	}
	for _, w := range r.repWarns {
		if len(w.rounds) == 1 {
			r.rep.Warnings = append(r.rep.Warnings, fmt.Sprintf("%s (repetition %d of %d)", w.text, w.rounds[0], r.count))
			continue
		}
		r.rep.Warnings = append(r.rep.Warnings, fmt.Sprintf("%s (in %d of %d repetitions: %s; the numbers are repetition %d's)",
			w.text, len(w.rounds), r.count, joinInts(w.rounds), w.rounds[0]))
	}
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

// metric records one verdict. value and target are in display units;
// scale converts display units to base units.
func (r *run) metric(test, name, label, unit string, value float64, op string, target, scale float64) {
	m := Metric{Test: test, Name: name, Label: label, Unit: unit, Op: op, Target: target}
	judge(&m, value, scale)
	if r.scales == nil {
		r.scales = map[string]float64{}
	}
	r.scales[name] = scale
	r.rep.Metrics = append(r.rep.Metrics, m)
}

// judge sets m's value (display units; scale converts to base units) and
// its verdict against m's target.
func judge(m *Metric, value, scale float64) {
	m.Value, m.Base = value, value*scale
	ok := value >= m.Target
	if m.Op == "<=" {
		ok = value <= m.Target
	}
	m.Verdict = Pass
	if !ok {
		m.Verdict = Fail
	}
}

// environmentLimited notes that something other than the KDC held test's
// figures down (report.VerdictNote says what that means for the verdict).
func (r *run) environmentLimited(test string) {
	test, _, _ = strings.Cut(test, " (") // "concurrency (4 clients)"
	if !slices.Contains(r.rep.EnvironmentLimited, test) {
		r.rep.EnvironmentLimited = append(r.rep.EnvironmentLimited, test)
	}
}

// warn records a warning. A repeated test's warnings are said once per
// kind (its format and the test it names) with the repetitions that gave
// it, not once per repetition.
func (r *run) warn(format string, args ...any) {
	r.warnKind(format, fmt.Sprintf(format, args...))
}

// warnKind records text, a warning of kind (with the test it names, what
// a repeated test's warnings are merged by).
func (r *run) warnKind(kind, text string) {
	if !r.repeated {
		r.rep.Warnings = append(r.rep.Warnings, text)
		return
	}
	test, _, _ := strings.Cut(text, ":")
	key := kind + "\x00" + test
	for _, w := range r.repWarns {
		if w.key == key {
			if !slices.Contains(w.rounds, r.round) {
				w.rounds = append(w.rounds, r.round)
			}
			return
		}
	}
	r.repWarns = append(r.repWarns, &repWarn{key: key, text: text, rounds: []int{r.round}})
}

// repWarn is a kind of warning of the repetitions: the first text and
// the repetitions that gave it.
type repWarn struct {
	key, text string
	rounds    []int
}
