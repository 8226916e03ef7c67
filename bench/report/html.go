package report

import (
	"bytes"
	"html/template"
	"strings"
)

var pageTmpl = template.Must(template.New("report").Funcs(template.FuncMap{"num": fmtNum, "signed": signed, "value": ValueText, "repetitions": repetitionsNote, "note": VerdictNote, "settings": settingsRows,
	"estimate": CapacityEstimateText, "dash": orDash, "ratio": ratioText,
	"pct":     func(f float64) float64 { return 100 * f },
	"verdict": func(c *Comparison) string { return strings.TrimPrefix(ComparisonVerdict(c), "verdict: ") }}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>KDC performance report: {{.Verdict}}</title>
<style>body{font-family:sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .6em;text-align:right}td:first-child,th:first-child{text-align:left}.PASS{color:#070}.FAIL{color:#b00;font-weight:bold}.chart{margin:1em 0}</style>
</head><body>
<h1>KDC performance report: <span class="{{.Verdict}}">{{.Verdict}}</span></h1>
<p>{{.Started.UTC.Format "2006-01-02 15:04:05"}} UTC, {{.Machine.Cores}} cores ({{.Machine.Model}}), MIT krb5 {{.Machine.KRB5Version}}, realm {{.System.Realm}}.</p>
<table><tr><th>Test</th><th>Metric</th><th>Value</th><th>Target</th><th>Result</th></tr>
{{range .Metrics}}<tr><td>{{.Test}}</td><td>{{.Label}}</td><td>{{value .}}</td><td>{{.Op}} {{num .Target}} {{.Unit}}</td><td class="{{.Verdict}}">{{.Verdict}}</td></tr>
{{end}}{{range .Tests}}{{if or (eq .Status "error") (eq .Status "skipped")}}<tr><td>{{.Name}}</td><td colspan="3">{{.Error}}</td><td>{{.Status}}</td></tr>{{end}}
{{end}}</table>
{{if gt .Settings.Count 1}}<p>{{repetitions $.Report}}.</p>{{end}}
{{with .Capacity}}<h2>Capacity estimate against the measured ceilings</h2>
<p>The daemon's estimate (krb5_kdc_capacity_requests_per_second) at the latency load ({{num .LoadPerS}} KDC requests/s; {{.Workers}} serving process(es), {{.CPUs}} CPU(s)), in KDC requests per second.</p>
<table id="capacity"><tr><th>Source</th><th>Request</th><th>Estimate/s</th><th>Measured/s</th><th>Estimate/measured</th><th>KDC own-time ceiling/s</th><th>Estimate/own-time</th></tr>
{{range .Rows}}<tr><td>{{.Source}}</td><td>{{.Request}}</td><td>{{estimate .}}</td><td>{{dash .MeasuredPerS}}</td><td>{{ratio .Ratio}}</td><td>{{dash .OwnCeilingPerS}}</td><td>{{ratio .OwnRatio}}</td></tr>
{{end}}</table>
{{end}}{{with .Baseline}}<h2>Compared with the baseline</h2>
<p>Old: {{.Old.Path}} ({{.Old.Started.UTC.Format "2006-01-02 15:04:05"}} UTC, {{.Old.Verdict}}); new: this run.{{if .Differ}} <strong>{{.Differ}} setting(s) differ</strong>: the runs answer different questions.{{end}}</p>
<table><tr><th>Test</th><th>Metric</th><th>Old</th><th>New</th><th>Change</th><th>{{pct .Confidence}} % interval</th><th>Verdict</th></tr>
{{range .Metrics}}<tr><td>{{.Test}}</td><td>{{.Label}}</td><td>{{num .Old}} {{.Unit}}</td><td>{{num .New}} {{.Unit}}</td><td>{{signed .ChangePct}} %</td><td>{{if .Tested}}[{{signed .LowPct}}, {{signed .HighPct}}] %{{end}}</td><td{{if .IsWorse}} class="FAIL"{{end}}>{{.Verdict}}{{if .Note}} ({{.Note}}){{end}}</td></tr>
{{end}}</table>
<table><tr><th>Setting</th><th>Old</th><th>New</th></tr>
{{range .Settings}}<tr{{if .Differ}} class="FAIL"{{end}}><td>{{.Name}}</td><td>{{.Old}}</td><td>{{.New}}</td></tr>
{{end}}</table>
<p>{{verdict $.Report.Baseline}}</p>
{{with $.BaselineChart}}<div class="chart" data-chart="{{.ID}}"><h2>{{.Title}}</h2>{{.SVG}}</div>{{end}}
{{end}}{{if .Warnings}}<h2>Warnings</h2><ul>{{range .Warnings}}<li>{{.}}</li>{{end}}</ul>
<p id="verdict-note">What they mean for the verdict: {{note $.Report}}.</p>{{end}}
<h2>Settings</h2>
<table id="settings"><tr><th>Setting</th><th>Value</th></tr>
{{range settings $.Report}}<tr><td>{{index . 0}}</td><td>{{index . 1}}</td></tr>
{{end}}</table>
{{range $.Charts}}<div class="chart" data-chart="{{.ID}}"><h2>{{.Title}}</h2>{{.SVG}}</div>
{{end}}</body></html>
`))

// chart is one inline SVG of report.html.
type chart struct {
	ID, Title string
	SVG       template.HTML
}

// HTML renders report.html: self-contained (no script, no network), the
// summary table and the charts as inline SVG.
func HTML(rep *Report) ([]byte, error) {
	var b bytes.Buffer
	var base *chart
	if rep.Baseline != nil {
		if f := comparisonChart(rep.Baseline); f != nil {
			base = &chart{ID: "baseline-change", Title: "Change from the baseline per metric, with its interval", SVG: f.svg()}
		}
	}
	err := pageTmpl.Execute(&b, struct {
		*Report
		Charts        []chart
		BaselineChart *chart
	}{rep, charts(rep), base})
	return b.Bytes(), err
}
