package compare_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/bench/compare"
	"github.com/krb5-exporter/krb5-exporter/bench/report"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// A run with a baseline (the stored pair: slow against fast) carries the
// comparison into every rendering: report.md's section with a row per
// metric and the differing setting, report.json's baseline, report.html's
// table and chart, and krb5_bench_baseline_* in the textfile with the
// values of the comparison.
func TestBaselineRendered(t *testing.T) {
	old, cur := load(t, "fast"), load(t, "slow")
	c := compare.Compare(old, cur, compare.Options{})
	c.Old.Path = "results/fast"
	cur.Baseline = &c
	dir := t.TempDir()
	prom := filepath.Join(dir, "bench.prom")
	if err := report.WriteAll(cur, dir, prom); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	var as report.Change
	for _, m := range c.Metrics {
		if m.Name == "as_logins_per_second" {
			as = m
		}
	}
	for _, want := range []string{
		"\n## Compared with the baseline\n",
		"**1 setting(s) differ**",
		"| `as` | Logins per second | 1673 logins/s | 502 logins/s | -74.1 % | [-86.2, -53.5] % | **slower** | 8 + 8: the rate of each 250ms of the load |",
		"| **disable_last_success (differs)** | `true` | `false` |",
	} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("report.md has no %q", want)
		}
	}
	js, _ := os.ReadFile(filepath.Join(dir, "report.json"))
	var back report.Report
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if back.Baseline == nil || back.Baseline.Worse != 1 || len(back.Baseline.Metrics) != len(c.Metrics) {
		t.Fatalf("report.json's baseline: %+v", back.Baseline)
	}
	html, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	for _, want := range []string{"<h2>Compared with the baseline</h2>", `data-chart="baseline-change"`, `<td class="FAIL">slower</td>`} {
		if !bytes.Contains(html, []byte(want)) {
			t.Errorf("report.html has no %q", want)
		}
	}
	mfs := testutil.ReadExposition(t, prom).MFs
	value := func(name, metric string) (float64, bool) {
		mf := mfs[name]
		if mf == nil {
			return 0, false
		}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == "metric" && l.GetValue() == metric {
					return m.GetGauge().GetValue(), true
				}
			}
		}
		return 0, false
	}
	for _, m := range c.Metrics {
		v, ok := value("krb5_bench_baseline_change_ratio", m.Name)
		if !ok || !near(v, m.ChangePct/100) {
			t.Errorf("%s: change ratio %g (%v), want %g", m.Name, v, ok, m.ChangePct/100)
		}
		want := 0.0
		if m.IsWorse {
			want = -1
		} else if m.Verdict != report.NoChange {
			want = 1
		}
		if v, _ := value("krb5_bench_baseline_verdict", m.Name); v != want {
			t.Errorf("%s: verdict %g, want %g", m.Name, v, want)
		}
		lo, ok := value("krb5_bench_baseline_change_low_ratio", m.Name)
		if ok != m.Tested || m.Tested && !near(lo, m.LowPct/100) {
			t.Errorf("%s: low %g (%v), tested %v, want %g", m.Name, lo, ok, m.Tested, m.LowPct/100)
		}
	}
	if v := mfs["krb5_bench_baseline_settings_differ"]; v == nil || v.Metric[0].GetGauge().GetValue() != 1 {
		t.Errorf("settings_differ: %v", v)
	}
	if v, _ := value("krb5_bench_baseline_verdict", "as_logins_per_second"); v != -1 || as.Verdict != report.Slower {
		t.Errorf("as: verdict metric %g, comparison %s", v, as.Verdict)
	}
}
