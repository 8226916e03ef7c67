package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// stored is testdata/report.json: every test of a real `krb5-exporter bench
// --once` against an ephemeral realm (small settings), as it wrote it.
// bench's TestReportSchemaStillDecodes checks that a new run still has
// this schema.
func stored(t *testing.T) (*Report, []byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("testdata/report.json: %v", err)
	}
	if rep.Schema != SchemaVersion {
		t.Fatalf("testdata/report.json has schema %d, want %d", rep.Schema, SchemaVersion)
	}
	return &rep, data
}

// WriteAll writes report.json byte for byte as the run did, report.md with
// a row per metric and a section per test, and report.html with the charts the report has data for.
func TestWriteAllFromStoredReport(t *testing.T) {
	rep, data := stored(t)
	dir := t.TempDir()
	if err := WriteAll(rep, dir, filepath.Join(dir, "bench.prom")); err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(js, data) {
		t.Error("report.json written from the decoded report differs from the stored one")
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	for _, m := range rep.Metrics {
		row := "| `" + m.Test + "` | " + m.Label + " | " + fmtNum(m.Value) + " " + m.Unit + " | " + m.Op + " " + fmtNum(m.Target) + " " + m.Unit + " | **" + m.Verdict + "** |"
		if !strings.Contains(string(md), row) {
			t.Errorf("report.md has no row %q", row)
		}
	}
	for _, s := range []string{"## as", "## tgs", "## latency", "## cpu", "## memory", "## concurrency", "## tcp", "## kadmin", "## dump", "## degradation", "## startup"} {
		if !strings.Contains(string(md), "\n"+s+"\n") {
			t.Errorf("report.md has no section %q", s)
		}
	}
	html, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	// latency-distribution needs the requests, which report.json does not
	// keep (raw/*.csv has them); bench's TestReportHTMLInBrowser draws it.
	for _, id := range []string{"concurrency-rate", "concurrency-latency", "cpu-over-time", "rss-over-time", "degradation-rounds"} {
		if !bytes.Contains(html, []byte(`data-chart="`+id+`"`)) {
			t.Errorf("report.html has no chart %s", id)
		}
	}
}

// The textfile has a result, a target and a pass per metric, in base
// units, and the generator's ratio per load.
func TestTextfileFromStoredReport(t *testing.T) {
	rep, _ := stored(t)
	var b bytes.Buffer
	if err := WriteTextfile(&b, rep); err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(&b)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, m := range mfs["krb5_bench_result"].GetMetric() {
		var test, name string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "test":
				test = l.GetValue()
			case "metric":
				name = l.GetValue()
			}
		}
		got[test+"/"+name] = m.GetGauge().GetValue()
	}
	if len(got) != len(rep.Metrics) {
		t.Errorf("%d krb5_bench_result series for %d metrics", len(got), len(rep.Metrics))
	}
	for _, m := range rep.Metrics {
		if v, ok := got[m.Test+"/"+m.Name]; !ok || v != m.Base {
			t.Errorf("krb5_bench_result{test=%q,metric=%q} = %v, %v; want %v", m.Test, m.Name, v, ok, m.Base)
		}
	}
	if n := len(mfs["krb5_bench_generator_cpu_ratio"].GetMetric()); n != 4 {
		t.Errorf("%d generator ratios, want 4 (as, tgs, latency, tcp)", n)
	}
	if v := mfs["krb5_bench_last_run_success"].GetMetric()[0].GetGauge().GetValue(); v != b2f(rep.Verdict == Pass) {
		t.Errorf("last_run_success %v for verdict %s", v, rep.Verdict)
	}
}

// The summary names every metric and says the verdict.
func TestSummaryFromStoredReport(t *testing.T) {
	rep, _ := stored(t)
	var b bytes.Buffer
	WriteSummary(&b, rep)
	for _, m := range rep.Metrics {
		if !strings.Contains(b.String(), m.Label) {
			t.Errorf("summary has no %q", m.Label)
		}
	}
	if !strings.Contains(b.String(), "verdict: "+rep.Verdict) {
		t.Errorf("summary:\n%s", b.String())
	}
}

// A symbolic link planted at a report's name or at the textfile's (the
// results directory or node_exporter's textfile directory may be writable
// by others) is replaced by the file, never followed: its target keeps its
// content, and no temporary file is left behind.
func TestWriteAllReplacesPlantedLinks(t *testing.T) {
	rep, _ := stored(t)
	dir, outside := t.TempDir(), t.TempDir()
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("keep\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	textfile := filepath.Join(dir, "bench.prom")
	for _, p := range []string{filepath.Join(dir, "report.md"), filepath.Join(dir, "report.json"), textfile} {
		if err := os.Symlink(victim, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteAll(rep, dir, textfile); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep\n" {
		t.Errorf("a planted link's target was written: %.40q", b)
	}
	for _, p := range []string{filepath.Join(dir, "report.md"), filepath.Join(dir, "report.json"), textfile} {
		if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
			t.Errorf("%s: %v, %v; want a regular file 0644", p, fi.Mode(), err)
		}
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".*"))
	if len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// A test that errored (the stored run has none) is a row of its own in the
// summary, report.md and report.html, with its error on one line, and
// report.json keeps the error: its text is the KDC's or the network's, so
// the HTML escapes it and the markdown keeps its table intact.
func TestErroredTestRows(t *testing.T) {
	rep, _ := stored(t)
	const msg = "no request completed: <b>KDC</b> | down\nsecond line"
	rep.Tests = append(rep.Tests, TestResult{Name: "tcp", Status: "error", Error: msg})
	var sum, md bytes.Buffer
	WriteSummary(&sum, rep)
	if !regexp.MustCompile(`(?m)^tcp +no request completed: <b>KDC</b> \| down second line +ERROR$`).Match(sum.Bytes()) {
		t.Errorf("summary has no one-line ERROR row for tcp:\n%s", sum.String())
	}
	WriteMarkdown(&md, rep)
	if !strings.Contains(md.String(), "| – | `tcp` | no request completed: <b>KDC</b> \\| down second line | | | **ERROR** |\n") {
		t.Errorf("report.md has no escaped ERROR row for tcp")
	}
	html, err := HTML(rep)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), "<td>tcp</td><td colspan=\"3\">no request completed: &lt;b&gt;KDC&lt;/b&gt; | down\nsecond line</td><td>error</td>") {
		t.Errorf("report.html has no escaped error row for tcp")
	}
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js, &back); err != nil || back.Tests[len(back.Tests)-1].Error != msg {
		t.Errorf("report.json lost the error: %v", err)
	}
}

// Median of known numbers, written out by hand: the middle one of an odd
// number (not the mean, 4 for 1, 1, 10), the mean of the middle two of
// an even number, whatever the order; 0 for none; its argument unsorted.
func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		xs   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{7}, 7},
		{[]float64{10, 1, 1}, 1},
		{[]float64{3, 1, 2}, 2},
		{[]float64{100, 4, 1, 3}, 3.5},
		{[]float64{5, -2, 9, 0, 1000}, 5},
	} {
		in := slices.Clone(tc.xs)
		if got := Median(in); got != tc.want {
			t.Errorf("Median(%v) = %g, want %g", tc.xs, got, tc.want)
		}
		if !slices.Equal(in, tc.xs) {
			t.Errorf("Median sorted its argument: %v", in)
		}
	}
}
