package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/alecthomas/kingpin/v2"

	"github.com/krb5-exporter/krb5-exporter/bench/compare"
	"github.com/krb5-exporter/krb5-exporter/bench/report"
)

// compareArgs are `bench compare`'s.
type compareArgs struct {
	cmd      *kingpin.CmdClause
	old, new string
	format   string
}

func (b *benchCmd) addCompare(c *kingpin.CmdClause) {
	a := &b.cmp
	a.cmd = c.Command("compare", "Compare two runs (results/<timestamp> directories or their report.json): per metric the change, its 95 % confidence interval and a verdict (slower, faster, no significant change), the settings side by side. Runs of bench --count 5 are compared repetition against repetition (floor --change-floor); a run of one repetition only by its seconds (floor --single-run-floor, 2x). Exit 1 when a metric got significantly worse beyond its floor, 2 when the runs cannot be read.")
	a.cmd.Arg("old", "The earlier run.").Required().StringVar(&a.old)
	a.cmd.Arg("new", "The later run.").Required().StringVar(&a.new)
	a.cmd.Flag("format", "text (a terminal's screen), md (markdown) or json.").Default("text").EnumVar(&a.format, "text", "md", "json")
}

// comparison of two loaded runs with the command line's options.
func (b *benchCmd) comparison(old, cur *report.Report, oldPath, newPath string) *report.Comparison {
	c := compare.Compare(old, cur, compare.Options{FloorPct: b.flags.FloorPct, SingleRunFactor: b.flags.SingleRunFactor})
	c.Old.Path, c.New.Path = oldPath, newPath
	return &c
}

// compare is `bench compare OLD NEW`: 0 when nothing got worse, 1 when a
// metric did, 2 when a run cannot be read.
func (b *benchCmd) compare(stdout, stderr io.Writer) int {
	if err := b.floors(); err != nil {
		fmt.Fprintf(stderr, "krb5-exporter bench compare: %v\n", err)
		return 2
	}
	old, oldDir, err := report.ReadRun(b.cmp.old)
	if err != nil {
		fmt.Fprintf(stderr, "krb5-exporter bench compare: %v\n", err)
		return 2
	}
	cur, newDir, err := report.ReadRun(b.cmp.new)
	if err != nil {
		fmt.Fprintf(stderr, "krb5-exporter bench compare: %v\n", err)
		return 2
	}
	c := b.comparison(old, cur, oldDir, newDir)
	switch b.cmp.format {
	case "md":
		report.WriteComparisonMarkdown(stdout, c)
	case "json":
		js, err := json.MarshalIndent(c, "", "  ")
		if err != nil {
			fmt.Fprintf(stderr, "krb5-exporter bench compare: the comparison as JSON: %v\n", err)
			return 2
		}
		fmt.Fprintf(stdout, "%s\n", js)
	default:
		report.WriteComparison(stdout, c)
	}
	if c.Worse > 0 {
		return 1
	}
	return 0
}

// floors checks --change-floor and --single-run-floor.
func (b *benchCmd) floors() error {
	if b.flags.FloorPct < 0 {
		return fmt.Errorf("--change-floor must be >= 0")
	}
	if !(b.flags.SingleRunFactor >= 1) {
		return fmt.Errorf("--single-run-floor must be a factor >= 1 (2: only a halving or a doubling is called), not %g", b.flags.SingleRunFactor)
	}
	return nil
}

// loadBaseline reads --baseline's run (nil without one).
func (b *benchCmd) loadBaseline() (*report.Report, error) {
	if b.flags.Baseline == "" {
		return nil, nil
	}
	if err := b.floors(); err != nil {
		return nil, err
	}
	rep, dir, err := report.ReadRun(b.flags.Baseline)
	if err != nil {
		return nil, err
	}
	b.flags.Baseline = dir
	return rep, nil
}

// compareBaseline puts the comparison of rep (written to dir) with the
// baseline into rep.
func (b *benchCmd) compareBaseline(base, rep *report.Report, dir string) {
	if base == nil {
		return
	}
	rep.Baseline = b.comparison(base, rep, b.flags.Baseline, dir)
}
