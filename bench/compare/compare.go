// Package compare tells whether a bench run got slower than another: per
// metric of the suite, the change, its confidence interval and a verdict,
// from the runs' samples, with the Mann-Whitney U test that benchstat uses
// (golang.org/x/perf/benchmath) and a floor below which no change is
// called. The samples are the repetitions of runs made with --count (the
// floor a %), else pieces of each run (each second of a load's requests,
// each resource reading, each round), which show only a run's own noise
// (the floor a factor). The result is a report.Comparison, which package
// report renders.
package compare

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/krb5-exporter/krb5-exporter/bench/report"
)

// Options of a comparison; the zero value is the defaults.
type Options struct {
	// FloorPct: changes smaller than this % of the old value are never
	// called (DefaultFloorPct when 0).
	FloorPct float64
	// Confidence of the intervals (DefaultConfidence when 0); the test's
	// alpha is 1 - Confidence.
	Confidence float64
	// SingleRunFactor is the floor of a metric compared within runs,
	// when either run has one repetition of it: only new/old >= it or
	// <= 1/it is called (DefaultSingleRunFactor when 0). Blocks of one
	// run show that run's own noise, not how much two runs of the same
	// thing differ, which is much more (docs/bench.md).
	SingleRunFactor float64
}

// Defaults of Options. DefaultSingleRunFactor is above what unchanged
// runs one after the other showed here (as +48 %, tcp -21 %: 1.48x) and
// below what one database write per login does (about 4x).
const (
	DefaultFloorPct        = 5
	DefaultConfidence      = 0.95
	DefaultSingleRunFactor = 2
)

// minRepetitions is the fewest repetitions a side for a run-level test:
// with 4 and 4 the U test's smallest p-value is 0.029 and a 95 %
// interval exists; with 3 and 3 neither.
const minRepetitions = 4

// minBlocks is the fewest blocks a load is cut into: a load shorter than
// 8 s is cut into 8 blocks rather than seconds, enough for the U test
// (4 a side is its least at alpha 0.05) and an interval at 95 %.
const minBlocks = 8

// maxBlocks bounds the samples of a long load (an hour's would be 3,600
// seconds, 13 million pairs for the interval).
const maxBlocks = 300

// maxSamples bounds a metric's samples a run: the interval sorts every
// difference of a pair (3,600², 100 MB, for an hour's once-a-second
// resource readings). Blocks are at most about maxBlocks a load and
// repetitions report.MaxCount; readings and rounds are what a
// report.json says.
const maxSamples = 3600

// Compare compares the new run with the old. Their Records (the raw
// requests, report.ReadRun) make the samples of the loads' metrics; a run
// without them has those metrics untested.
func Compare(old, cur *report.Report, o Options) report.Comparison {
	if o.FloorPct == 0 {
		o.FloorPct = DefaultFloorPct
	}
	if o.Confidence == 0 {
		o.Confidence = DefaultConfidence
	}
	if o.SingleRunFactor == 0 {
		o.SingleRunFactor = DefaultSingleRunFactor
	}
	c := report.Comparison{
		Old:      report.RunRef{Started: old.Started, Verdict: old.Verdict, Requests: hasRecords(old), Count: max(1, old.Settings.Count)},
		New:      report.RunRef{Started: cur.Started, Verdict: cur.Verdict, Requests: hasRecords(cur), Count: max(1, cur.Settings.Count)},
		FloorPct: o.FloorPct, Confidence: o.Confidence, Alpha: math.Round((1-o.Confidence)*1e9) / 1e9,
		SingleRunFactor: o.SingleRunFactor,
	}
	c.Settings = settingPairs(old, cur)
	for _, s := range c.Settings {
		if s.Differ {
			c.Differ++
		}
	}
	oldM := map[string]report.Metric{}
	for _, m := range old.Metrics {
		oldM[m.Name] = m
	}
	seen := map[string]bool{}
	for _, m := range cur.Metrics {
		seen[m.Name] = true
		om, ok := oldM[m.Name]
		if !ok {
			c.Metrics = append(c.Metrics, report.Change{Test: m.Test, Name: m.Name, Label: m.Label, Unit: m.Unit, Op: m.Op,
				New: m.Value, Missing: "old", Verdict: report.NotCompared, Note: "only the new run has it"})
			continue
		}
		c.Metrics = append(c.Metrics, finite(metric(old, cur, om, m, o)))
	}
	for _, m := range old.Metrics {
		if !seen[m.Name] {
			c.Metrics = append(c.Metrics, report.Change{Test: m.Test, Name: m.Name, Label: m.Label, Unit: m.Unit, Op: m.Op,
				Old: m.Value, Missing: "new", Verdict: report.NotCompared, Note: "only the old run has it"})
		}
	}
	for _, m := range c.Metrics {
		if m.IsWorse {
			c.Worse++
		}
		if m.Tested && !m.RunLevel {
			c.SingleRun = true
		}
	}
	return c
}

func hasRecords(rep *report.Report) bool {
	for _, l := range []*report.Load{rep.AS, rep.TGS} {
		if l != nil && len(l.Records) > 0 {
			return true
		}
	}
	if rep.Latency != nil && len(rep.Latency.Logins.Records) > 0 {
		return true
	}
	return rep.TCP != nil && len(rep.TCP.Load.Records) > 0
}

// metric compares one metric both runs have.
func metric(old, cur *report.Report, om, m report.Metric, o Options) report.Change {
	ch := report.Change{Test: m.Test, Name: m.Name, Label: m.Label, Unit: m.Unit, Op: m.Op, Old: om.Value, New: m.Value, Verdict: report.NoChange}
	if om.Value != 0 {
		ch.ChangePct = 100 * (m.Value - om.Value) / om.Value // replaced by the estimate when tested
	}
	var xs, ys []float64
	var what string
	if len(om.Repeats) > 1 && len(m.Repeats) > 1 {
		// Run-level: each repetition is a sample, as benchstat's runs.
		ch.RunLevel = true
		xs, ys, what = slices.Clone(om.Repeats), slices.Clone(m.Repeats), "a repetition (its value in one run of the test)"
	} else {
		src, ok := sources[m.Name]
		if !ok {
			ch.Note = "one value per run: not tested"
			return ch
		}
		xs, ys, what = src(old, cur)
	}
	ch.Samples, ch.OldN, ch.NewN = what, len(xs), len(ys)
	if len(xs) == 0 || len(ys) == 0 {
		ch.Note = "no samples in " + map[bool]string{true: "the old run", false: "the new run"}[len(xs) == 0] + " (raw/*-requests.csv missing?)"
		return ch
	}
	if max(len(xs), len(ys)) > maxSamples {
		ch.Note = fmt.Sprintf("too many samples (%d and %d, at most %d a run): not tested", len(xs), len(ys), maxSamples)
		return ch
	}
	alpha := math.Round((1-o.Confidence)*1e9) / 1e9
	t := uTest(xs, ys, alpha)
	ch.U, ch.P = t.u, t.p
	// Rates, latencies, CPU and memory compare as ratios (the shift of
	// their logarithms), errors and anything with a zero as differences.
	logScale := !slices.ContainsFunc(xs, nonPositive) && !slices.ContainsFunc(ys, nonPositive)
	lx, ly := xs, ys
	if logScale {
		lx, ly = mapLog(xs), mapLog(ys)
	}
	t.shift(lx, ly, o.Confidence)
	pct := func(v float64) float64 {
		if logScale {
			return 100 * math.Expm1(v)
		}
		base := report.Median(xs)
		if base == 0 {
			base = max(mean(xs), mean(ys)) // the old value 0: % of the larger mean
		}
		if base == 0 {
			return 0
		}
		return 100 * v / base
	}
	ch.ChangePct = pct(t.est)
	if ch.RunLevel && min(len(xs), len(ys)) < minRepetitions {
		ch.Note = fmt.Sprintf("too few repetitions (%d and %d): --count 5 each", len(xs), len(ys))
		return ch
	}
	if !t.interval {
		ch.Note = fmt.Sprintf("too few samples (%d and %d) for a %g %% interval", len(xs), len(ys), 100*o.Confidence)
		return ch
	}
	ch.Tested, ch.LowPct, ch.HighPct, ch.Confidence = true, pct(t.lo), pct(t.hi), t.conf
	significant := t.p < alpha && (t.lo > 0 || t.hi < 0)
	beyond := math.Abs(ch.ChangePct) >= o.FloorPct
	if !ch.RunLevel {
		// Within runs: the change must be a factor, as large up as down.
		// (1e-9: a change of exactly the factor, up to rounding, is called.)
		ratio := 1 + ch.ChangePct/100
		beyond = ratio >= o.SingleRunFactor*(1-1e-9) || ratio <= (1+1e-9)/o.SingleRunFactor
	}
	beyond = beyond || !logScale && report.Median(xs) == 0 && t.est != 0
	if !significant || !beyond {
		switch {
		case significant && ch.RunLevel:
			ch.Note = fmt.Sprintf("a real change, within the %g %% floor", o.FloorPct)
		case significant:
			ch.Note = fmt.Sprintf("beyond each run's own noise, within the %gx floor of a comparison within runs", o.SingleRunFactor)
		}
		return ch
	}
	fell := t.est < 0
	worse := fell && m.Op == ">=" || !fell && m.Op == "<="
	ch.IsWorse = worse
	speed := strings.HasSuffix(m.Unit, "/s") || m.Unit == "ms" || m.Unit == "s"
	switch {
	case worse && speed:
		ch.Verdict = report.Slower
	case worse:
		ch.Verdict = report.Worse
	case speed:
		ch.Verdict = report.Faster
	default:
		ch.Verdict = report.Better
	}
	return ch
}

// finite leaves a change that overflows a float64 (finite values as far
// apart as 1e-300 and 1e300) uncalled: no verdict, JSON or chart can
// hold an infinite per cent.
func finite(ch report.Change) report.Change {
	for _, v := range []float64{ch.ChangePct, ch.LowPct, ch.HighPct} {
		if math.IsInf(v, 0) || math.IsNaN(v) {
			ch.ChangePct, ch.LowPct, ch.HighPct, ch.Tested, ch.IsWorse = 0, 0, 0, false, false
			ch.Verdict, ch.Note = report.NotCompared, fmt.Sprintf("the change from %g to %g is beyond what a float64 holds", ch.Old, ch.New)
			return ch
		}
	}
	return ch
}

func nonPositive(v float64) bool { return !(v > 0) }

func mapLog(xs []float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = math.Log(x)
	}
	return out
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

// settingPairs are the settings that decide the numbers, those that
// differ first.
func settingPairs(old, cur *report.Report) []report.SettingPair {
	var out []report.SettingPair
	add := func(name, a, b string) {
		out = append(out, report.SettingPair{Name: name, Old: a, New: b, Differ: a != b})
	}
	add("MIT krb5", old.Machine.KRB5Version, cur.Machine.KRB5Version)
	add("cores", strconv.Itoa(old.Machine.Cores), strconv.Itoa(cur.Machine.Cores))
	add("CPU", old.Machine.Model, cur.Machine.Model)
	add("kernel", old.Machine.Kernel, cur.Machine.Kernel)
	add("realm", old.System.Realm, cur.System.Realm)
	add("users", strconv.Itoa(old.System.Users), strconv.Itoa(cur.System.Users))
	add("services", strconv.Itoa(old.System.Services), strconv.Itoa(cur.System.Services))
	add("logins' pre-authentication", old.System.Preauth, cur.System.Preauth)
	// kdc.conf's and the realm's settings, pinning (kdc_cpu,
	// generator_cpu): the union of both runs' keys.
	keys := map[string]bool{}
	for k := range old.System.Settings {
		keys[k] = true
	}
	for k := range cur.System.Settings {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.Sort(sorted)
	for _, k := range sorted {
		a, b := old.System.Settings[k], cur.System.Settings[k]
		if k == "kdc_cpu" || k == "generator_cpu" {
			a, b = orUnpinned(a), orUnpinned(b)
		}
		add(k, a, b)
	}
	os, ns := old.Settings, cur.Settings
	add("generator", fmt.Sprintf("%s, %d in flight", os.Generator, os.BatchInflight), fmt.Sprintf("%s, %d in flight", ns.Generator, ns.BatchInflight))
	add("clients", strconv.Itoa(os.Clients), strconv.Itoa(ns.Clients))
	add("duration", os.Duration.String(), ns.Duration.String())
	add("login rate, tickets per login", fmt.Sprintf("%g/s, %d", os.LoginRate, os.TGSPerLogin), fmt.Sprintf("%g/s, %d", ns.LoginRate, ns.TGSPerLogin))
	add("client levels", fmt.Sprintf("%v × %s", os.ClientLevels, os.LevelDuration), fmt.Sprintf("%v × %s", ns.ClientLevels, ns.LevelDuration))
	add("preauth setting", os.Preauth, ns.Preauth)
	add("shard", orOne(os.Shard), orOne(ns.Shard))
	add("request timeout", os.Timeout.String(), ns.Timeout.String())
	slices.SortStableFunc(out, func(a, b report.SettingPair) int {
		switch {
		case a.Differ && !b.Differ:
			return -1
		case b.Differ && !a.Differ:
			return 1
		}
		return 0
	})
	return out
}

func orUnpinned(s string) string {
	if s == "" {
		return "not pinned"
	}
	return s
}

func orOne(s string) string {
	if s == "" {
		return "1/1"
	}
	return s
}

// blockOf is the length of the blocks a load of wall time w is cut into:
// a second, or an eighth of the load when it is under 8 s (so that it
// gives at least 8 samples), or whole seconds making at most maxBlocks
// when it is longer than that many seconds. Each run's from its own wall
// time: a load's blocks are at most about maxBlocks, whatever the other
// run's load lasted (a shared block of 1 ms, from a load of 8 ms, would
// cut a day's load into 86 million).
func blockOf(w time.Duration) time.Duration {
	if w >= maxBlocks*time.Second {
		// A long load: at most maxBlocks blocks, whole seconds, which
		// bounds the pairs of the interval (maxBlocks² differences).
		return (w / maxBlocks).Truncate(time.Second)
	}
	if w >= minBlocks*time.Second {
		return time.Second
	}
	return max(time.Millisecond, (w / minBlocks).Truncate(time.Millisecond))
}
