package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Verdicts of a metric in a Comparison: slower/faster for rates and
// latencies, worse/better for the others (errors, CPU, memory, ratios).
const (
	Slower   = "slower"
	Faster   = "faster"
	Worse    = "worse"
	Better   = "better"
	NoChange = "no significant change"
	// NotCompared: only one of the runs has the metric.
	NotCompared = "not compared"
)

// Comparison is what `bench compare OLD NEW` and `bench --once --baseline`
// found (package bench/compare computes it): the settings of both runs
// side by side and, per metric of the suite, the change with its
// confidence interval and a verdict.
type Comparison struct {
	Old RunRef `json:"old"`
	New RunRef `json:"new"`
	// FloorPct: a change smaller than this (% of the old value) is never
	// called slower or faster, however sure.
	FloorPct float64 `json:"floor_pct"`
	// SingleRunFactor is the floor of a metric compared within runs
	// (either run ran its test once, so the samples are pieces of one
	// run): called only when new/old >= SingleRunFactor or <= its
	// inverse. SingleRun says some metric was compared so.
	SingleRunFactor float64 `json:"single_run_factor"`
	SingleRun       bool    `json:"single_run"`
	// Confidence asked of the intervals (0.95); Alpha of the test (0.05).
	Confidence float64 `json:"confidence"`
	Alpha      float64 `json:"alpha"`
	// Settings that decide the numbers, old and new side by side;
	// Differ counts those that differ.
	Settings []SettingPair `json:"settings"`
	Differ   int           `json:"settings_differ"`
	Metrics  []Change      `json:"metrics"`
	// Worse counts metrics called slower or worse.
	Worse int `json:"worse"`
}

// RunRef names one run of a comparison.
type RunRef struct {
	Path     string    `json:"path"`
	Started  time.Time `json:"started"`
	Verdict  string    `json:"verdict"`
	Requests bool      `json:"requests"` // its raw/*-requests.csv were read
	// Count is how many times its load tests ran (bench --count).
	Count int `json:"count"`
}

// about is a run's start, verdict and, with --count, its repetitions.
func (r RunRef) about() string {
	s := r.Started.UTC().Format(time.RFC3339) + ", " + r.Verdict
	if r.Count > 1 {
		s += fmt.Sprintf(", loads ×%d", r.Count)
	}
	return s
}

// SettingPair is one setting of both runs.
type SettingPair struct {
	Name   string `json:"name"`
	Old    string `json:"old"`
	New    string `json:"new"`
	Differ bool   `json:"differ"`
}

// Change is one metric of both runs.
type Change struct {
	Test  string `json:"test"`
	Name  string `json:"name"`
	Label string `json:"label"`
	Unit  string `json:"unit"`
	Op    string `json:"op"` // the target's: ">=" higher is better
	// Old and New are the runs' values (report.json's metrics), in Unit;
	// a metric only one run has is absent from the other (Missing).
	Old     float64 `json:"old"`
	New     float64 `json:"new"`
	Missing string  `json:"missing,omitempty"` // "old" or "new"
	// Samples says what one sample is ("1 s of the as load", "a round");
	// OldN and NewN how many each run gave.
	Samples string `json:"samples,omitempty"`
	OldN    int    `json:"old_n"`
	NewN    int    `json:"new_n"`
	// RunLevel: the samples are the runs' repetitions (bench --count),
	// judged with FloorPct; otherwise pieces of one run each, judged
	// with SingleRunFactor.
	RunLevel bool `json:"run_level"`
	// U is the Mann-Whitney statistic of the new samples against the old
	// (pairs in which the new sample is larger, ties counting half) and P
	// its two-sided p-value.
	U float64 `json:"u"`
	P float64 `json:"p"`
	// ChangePct is the Hodges-Lehmann estimate of the change, % of the
	// old value; LowPct and HighPct its confidence interval, of level
	// Confidence (at least the Comparison's; 0 when there were too few
	// samples for one, Tested false).
	ChangePct  float64 `json:"change_pct"`
	LowPct     float64 `json:"low_pct"`
	HighPct    float64 `json:"high_pct"`
	Confidence float64 `json:"confidence"`
	Tested     bool    `json:"tested"`
	// Verdict is Slower/Faster/Worse/Better or NoChange; IsWorse says it is
	// Slower or Worse.
	Verdict string `json:"verdict"`
	IsWorse bool   `json:"is_worse"`
	// Note says why a metric was not tested, or what to keep in mind.
	Note string `json:"note,omitempty"`
}

// WriteComparison prints a comparison for a terminal, on about one
// screen: the settings that differ first, every metric with old, new,
// change, interval and verdict, the verdict with how sure, and the
// settings both runs share.
func WriteComparison(w io.Writer, c *Comparison) {
	fmt.Fprintf(w, "old: %s (%s)\nnew: %s (%s)\n", c.Old.Path, c.Old.about(), c.New.Path, c.New.about())
	if c.Differ > 0 {
		fmt.Fprintf(w, "\nSETTINGS DIFFER (%d): the runs answer different questions; read the changes below with that in mind\n", c.Differ)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SETTING\tOLD\tNEW")
		for _, s := range c.Settings {
			if s.Differ {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", s.Name, short(s.Old), short(s.New))
			}
		}
		tw.Flush()
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "\nTEST\tMETRIC\tOLD\tNEW\tCHANGE\t%g %% INTERVAL\tP\tVERDICT\n", 100*c.Confidence)
	for _, m := range c.Metrics {
		verdict := m.Verdict
		if m.Note != "" {
			verdict += " (" + m.Note + ")"
		}
		p := ""
		if m.Tested {
			p = fmt.Sprintf("%.2g", m.P)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Test, m.Label, valueOf(m, m.Old, "old"), valueOf(m, m.New, "new"), changeOf(m), intervalOf(m), p, verdict)
	}
	tw.Flush()
	fmt.Fprintf(w, "\n%s\n", ComparisonVerdict(c))
	var same []string
	for _, s := range c.Settings {
		if !s.Differ {
			same = append(same, s.Name+" "+short(s.Old))
		}
	}
	if len(same) > 0 {
		fmt.Fprintf(w, "\nSame in both runs: %s.\n", strings.Join(same, "; "))
	}
}

// ComparisonVerdict is the comparison in one line.
func ComparisonVerdict(c *Comparison) string {
	var worse []string
	for _, m := range c.Metrics {
		if m.IsWorse {
			worse = append(worse, fmt.Sprintf("%s %s %s %s, p = %.2g", m.Label, m.Verdict, changeOf(m), intervalOf(m), m.P))
		}
	}
	how := fmt.Sprintf("a metric is called when the Mann-Whitney U test finds p < %g, its %g %% interval excludes 0 and the change is at least %s",
		c.Alpha, 100*c.Confidence, floorText(c))
	if c.SingleRun {
		once := "one run each: only changes beyond %gx are called; use --count 5"
		switch {
		case c.Old.Count > 1 && c.New.Count > 1:
			once = "the tests that ran once (startup, dump) are compared within each run: only changes beyond %gx are called"
		case c.Old.Count > 1:
			once = "the new run ran its loads once: only changes beyond %gx are called; use --count 5 in both"
		case c.New.Count > 1:
			once = "the old run ran its loads once: only changes beyond %gx are called; use --count 5 in both"
		}
		how = fmt.Sprintf(once, c.SingleRunFactor) + "; " + how
	}
	if len(worse) == 0 {
		return "verdict: nothing got significantly worse (" + how + ")"
	}
	return fmt.Sprintf("verdict: %d metric(s) significantly worse: %s (%s)", len(worse), strings.Join(worse, "; "), how)
}

// floorText is the floor of the comparison's metrics: the % floor
// between repetitions, the factor within runs, or both.
func floorText(c *Comparison) string {
	runLevel := false
	for _, m := range c.Metrics {
		runLevel = runLevel || m.Tested && m.RunLevel
	}
	switch {
	case !c.SingleRun:
		return fmt.Sprintf("%g %%", c.FloorPct)
	case runLevel:
		return fmt.Sprintf("%g %% between repetitions, %gx up or down within runs", c.FloorPct, c.SingleRunFactor)
	}
	return fmt.Sprintf("%gx up or down", c.SingleRunFactor)
}

// short cuts a setting's value to fit a terminal's column.
func short(s string) string {
	s = oneLine(s)
	if r := []rune(s); len(r) > 48 {
		return string(r[:47]) + "…"
	}
	return s
}

func valueOf(m Change, v float64, side string) string {
	if m.Missing == side {
		return "–"
	}
	return fmtNum(v) + " " + m.Unit
}

func changeOf(m Change) string {
	if m.Missing != "" {
		return ""
	}
	return signed(m.ChangePct) + " %"
}

func intervalOf(m Change) string {
	if !m.Tested {
		return ""
	}
	return "[" + signed(m.LowPct) + ", " + signed(m.HighPct) + "] %"
}

func signed(v float64) string {
	if v > 0 {
		return "+" + fmtNum(v)
	}
	return fmtNum(v)
}

// writeComparisonMarkdown is report.md's section of a comparison.
func writeComparisonMarkdown(w io.Writer, c *Comparison, title string) {
	fmt.Fprintf(w, "\n## %s\n\n", title)
	fmt.Fprintf(w, "Old: `%s` (%s); new: `%s` (%s).\n\n", c.Old.Path, c.Old.about(), c.New.Path, c.New.about())
	if c.Differ > 0 {
		fmt.Fprintf(w, "**%d setting(s) differ**: the runs answer different questions.\n\n", c.Differ)
	}
	fmt.Fprintf(w, "| Test | Metric | Old | New | Change | %g %% interval | Verdict | Samples (old + new) |\n|---|---|---:|---:|---:|---:|---|---|\n", 100*c.Confidence)
	for _, m := range c.Metrics {
		verdict := m.Verdict
		if m.IsWorse {
			verdict = "**" + verdict + "**"
		}
		if m.Note != "" {
			verdict += " (" + mdEscape(m.Note) + ")"
		}
		samples := ""
		if m.Samples != "" {
			samples = fmt.Sprintf("%d + %d: %s", m.OldN, m.NewN, m.Samples)
		}
		fmt.Fprintf(w, "| `%s` | %s | %s | %s | %s | %s | %s | %s |\n", m.Test, m.Label, valueOf(m, m.Old, "old"), valueOf(m, m.New, "new"), changeOf(m), intervalOf(m), verdict, samples)
	}
	fmt.Fprintln(w, "\n| Setting | Old | New |\n|---|---|---|")
	for _, s := range c.Settings {
		name := s.Name
		if s.Differ {
			name = "**" + name + " (differs)**"
		}
		fmt.Fprintf(w, "| %s | `%s` | `%s` |\n", name, mdEscape(s.Old), mdEscape(s.New))
	}
	fmt.Fprintf(w, "\n%s.\n", strings.TrimPrefix(ComparisonVerdict(c), "verdict: "))
}

// WriteComparisonMarkdown writes a comparison as a markdown document
// (`bench compare --format md`).
func WriteComparisonMarkdown(w io.Writer, c *Comparison) {
	fmt.Fprintln(w, "# KDC performance: comparison of two runs")
	writeComparisonMarkdown(w, c, "Changes")
}

// floorBand is the changes, % of the old value, that are never called:
// the single-run factor's when a metric was compared within runs.
func floorBand(c *Comparison) (lo, hi float64) {
	if c.SingleRun && c.SingleRunFactor > 1 {
		return 100 * (1/c.SingleRunFactor - 1), 100 * (c.SingleRunFactor - 1)
	}
	return -c.FloorPct, c.FloorPct
}

// comparisonChart plots each tested metric's change with its interval,
// and the floor on either side: a point outside the band with its whole
// interval on one side of 0 is a change called.
func comparisonChart(c *Comparison) *figure {
	var pts []xy
	var los, his []float64
	var names []string
	for _, m := range c.Metrics {
		if !m.Tested {
			continue
		}
		pts = append(pts, xy{X: m.ChangePct, Y: float64(len(names))})
		los, his = append(los, m.LowPct), append(his, m.HighPct)
		names = append(names, m.Name)
	}
	if len(pts) == 0 {
		return nil
	}
	lo, hi := floorBand(c)
	p := newFigure(fmt.Sprintf("change, %% of the old value (%g %% interval; dashed: the floor, %s to %s %%)", 100*c.Confidence, signed(lo), signed(hi)), "")
	p.legend = false
	p.yNames = names
	p.marks = append(p.marks, mark{kind: xErrMark, color: blue, pts: pts, lo: los, hi: his}, mark{kind: dotMark, color: blue, pts: pts})
	bandLo, bandHi := lo, hi
	for _, m := range c.Metrics {
		if m.Tested {
			lo, hi = min(lo, m.LowPct), max(hi, m.HighPct)
		}
	}
	for _, x := range []float64{bandLo, 0, bandHi} {
		col := orange
		if x == 0 {
			col = gray
		}
		p.marks = append(p.marks, mark{kind: lineMark, color: col, dashed: true, pts: []xy{{X: x, Y: -0.5}, {X: x, Y: float64(len(names)) - 0.5}}})
	}
	pad := 0.05 * (hi - lo)
	p.xMin, p.xMax = lo-pad, hi+pad
	return p
}
