package compare_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/bench/compare"
	"github.com/krb5-exporter/krb5-exporter/bench/report"
)

// runOf is a run of --count len(repeats) whose as metric has these
// repetitions (no requests: a run-level comparison reads none).
func runOf(asRepeats []float64, startupMS []float64) *report.Report {
	r := &report.Report{Settings: report.Settings{Count: max(1, len(asRepeats))}}
	if len(asRepeats) > 0 {
		r.Metrics = append(r.Metrics, report.Metric{Test: "as", Name: "as_logins_per_second", Label: "Logins per second",
			Unit: "logins/s", Op: ">=", Value: report.Median(asRepeats), Repeats: asRepeats})
	}
	if len(startupMS) > 0 {
		r.Startup = &report.Startup{RoundsMS: startupMS}
		r.Metrics = append(r.Metrics, report.Metric{Test: "startup", Name: "startup_seconds", Label: "Startup",
			Unit: "ms", Op: "<=", Value: report.Median(startupMS)})
	}
	return r
}

func only(t *testing.T, c report.Comparison, name string) report.Change {
	t.Helper()
	for _, m := range c.Metrics {
		if m.Name == name {
			return m
		}
	}
	t.Fatalf("no %s in %+v", name, c.Metrics)
	return report.Change{}
}

// With repetitions on both sides the samples are the repetitions, one
// per run of the test: U counted over the pairs, P by every permutation
// and the Hodges-Lehmann change with its interval by the exact
// distribution, all computed here; the 5 % floor decides, and nothing of
// the one-run floor is said.
func TestRepetitionsAreTheSamples(t *testing.T) {
	for _, tc := range []struct {
		name    string
		xs, ys  []float64
		verdict string
	}{
		// Every new repetition below every old one, 10 % down.
		{"slower", []float64{800, 810, 790, 805, 795}, []float64{720, 729, 711, 725, 716}, report.Slower},
		// Overlapping: not significant.
		{"mixed", []float64{800, 700, 900, 750, 850}, []float64{780, 720, 880, 760, 830}, report.NoChange},
		// Significant but 3 % (within the 5 % floor).
		{"small", []float64{800, 801, 802, 803, 804, 805}, []float64{776, 777, 778, 779, 780, 781}, report.NoChange},
		// Four a side, twice as fast.
		{"faster", []float64{500, 510, 505, 495}, []float64{1000, 1010, 990, 1005}, report.Faster},
	} {
		c := compare.Compare(runOf(tc.xs, nil), runOf(tc.ys, nil), compare.Options{})
		m := only(t, c, "as_logins_per_second")
		if !m.RunLevel || m.OldN != len(tc.xs) || m.NewN != len(tc.ys) || !strings.Contains(m.Samples, "repetition") {
			t.Errorf("%s: run level %v, %d + %d samples (%s)", tc.name, m.RunLevel, m.OldN, m.NewN, m.Samples)
		}
		checkStats(t, tc.name, m, tc.xs, tc.ys)
		if m.Verdict != tc.verdict || !m.Tested {
			t.Errorf("%s: verdict %q (tested %v, note %q), want %q", tc.name, m.Verdict, m.Tested, m.Note, tc.verdict)
		}
		if c.SingleRun || strings.Contains(report.ComparisonVerdict(&c), "one run each") {
			t.Errorf("%s: a run-level comparison says %q", tc.name, report.ComparisonVerdict(&c))
		}
		t.Logf("%s: %+.1f %% [%+.1f, %+.1f] U=%g p=%.3g %s", tc.name, m.ChangePct, m.LowPct, m.HighPct, m.U, m.P, m.Verdict)
	}
}

// Fewer than 4 repetitions a side: the U test cannot reject at 5 % nor
// is there a 95 % interval; the metric says how many it needs, even for
// a change it would otherwise call.
func TestTooFewRepetitions(t *testing.T) {
	for _, n := range [][2]int{{3, 5}, {5, 3}, {2, 2}} {
		xs, ys := make([]float64, n[0]), make([]float64, n[1])
		for i := range xs {
			xs[i] = 1000 + float64(i)
		}
		for i := range ys {
			ys[i] = 100 + float64(i)
		}
		c := compare.Compare(runOf(xs, nil), runOf(ys, nil), compare.Options{})
		m := only(t, c, "as_logins_per_second")
		want := fmt.Sprintf("too few repetitions (%d and %d): --count 5 each", n[0], n[1])
		if m.Tested || m.Verdict != report.NoChange || m.Note != want || c.Worse != 0 {
			t.Errorf("%v: tested %v, verdict %q, note %q; want %q", n, m.Tested, m.Verdict, m.Note, want)
		}
	}
}

// A metric compared within runs (startup's rounds, one run each) is
// called only beyond the single-run factor, the same up and down:
// 1.99x and 1/1.99x are not, 2.01x and 1/2.01x are; the verdict line
// says why and what to do. A run-level metric of the same comparison
// (as, 5 repetitions a side) keeps the 5 % floor.
func TestSingleRunFactorFloor(t *testing.T) {
	base := []float64{100, 101, 102, 103, 104, 105, 106, 107}
	times := func(f float64) []float64 {
		out := make([]float64, len(base))
		for i, v := range base {
			out[i] = v * f
		}
		return out
	}
	as := []float64{800, 810, 790, 805, 795}
	as10 := []float64{720, 729, 711, 725, 716}
	for _, tc := range []struct {
		f       float64
		verdict string
	}{
		{1.99, report.NoChange}, {2.01, report.Slower}, {1 / 1.99, report.NoChange}, {1 / 2.01, report.Faster},
		{2, report.Slower}, {0.5, report.Faster},
	} {
		old, cur := runOf(as, base), runOf(as10, times(tc.f))
		c := compare.Compare(old, cur, compare.Options{})
		m := only(t, c, "startup_seconds")
		if m.RunLevel || !m.Tested || m.P >= 0.05 {
			t.Fatalf("%gx: run level %v, tested %v, p %g: the rounds do not separate", tc.f, m.RunLevel, m.Tested, m.P)
		}
		if m.Verdict != tc.verdict {
			t.Errorf("%gx (change %+.2f %%): verdict %q (%s), want %q", tc.f, m.ChangePct, m.Verdict, m.Note, tc.verdict)
		}
		if tc.verdict == report.NoChange && !strings.Contains(m.Note, "2x") {
			t.Errorf("%gx: note %q", tc.f, m.Note)
		}
		if a := only(t, c, "as_logins_per_second"); !a.RunLevel || a.Verdict != report.Slower {
			t.Errorf("%gx: as (run level %v): %s, want slower at the 5 %% floor", tc.f, a.RunLevel, a.Verdict)
		}
		v := report.ComparisonVerdict(&c)
		if !c.SingleRun || !strings.Contains(v, "the tests that ran once (startup, dump) are compared within each run: only changes beyond 2x are called") {
			t.Errorf("%gx: verdict line %q", tc.f, v)
		}
		// One run each (no --count): the same edges, and the verdict
		// line says what to do.
		c = compare.Compare(runOf(nil, base), runOf(nil, times(tc.f)), compare.Options{})
		v = report.ComparisonVerdict(&c)
		if m := only(t, c, "startup_seconds"); m.Verdict != tc.verdict || !strings.Contains(v, "one run each: only changes beyond 2x are called; use --count 5") {
			t.Errorf("%gx, one run each: %s; verdict line %q", tc.f, m.Verdict, v)
		}
	}
	// The factor is an option (--single-run-floor).
	c := compare.Compare(runOf(nil, base), runOf(nil, times(1.6)), compare.Options{SingleRunFactor: 1.5})
	if m := only(t, c, "startup_seconds"); m.Verdict != report.Slower || c.SingleRunFactor != 1.5 {
		t.Errorf("1.6x at a 1.5x floor: %s", m.Verdict)
	}
}
