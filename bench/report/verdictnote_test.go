package report

import (
	"bytes"
	"html/template"
	"regexp"
	"strings"
	"testing"
)

// VerdictNote: a FAIL in a test the environment held down is in doubt, a
// PASS there stands (a figure held down that met its target even so), and
// a FAIL elsewhere stands.
func TestVerdictNote(t *testing.T) {
	as := Metric{Test: "as", Name: "as_logins_per_second", Label: "Logins per second", Verdict: Pass}
	tcp := Metric{Test: "tcp", Name: "tcp_logins_per_second", Label: "Logins per second over TCP", Verdict: Pass}
	fail := func(m Metric) Metric { m.Verdict = Fail; return m }
	for _, c := range []struct {
		name    string
		rep     Report
		want    string // a regular expression; "" for no note
		doubted bool
	}{
		{"no warning", Report{Verdict: Pass, Metrics: []Metric{as}}, "^$", false},
		{"as held down and failed", Report{Verdict: Fail, Metrics: []Metric{fail(as), tcp}, Warnings: []string{"as: ..."}, EnvironmentLimited: []string{"as"}},
			`^the FAIL of as \(logins per second\) may be the environment's, not the KDC's: something else held as down`, true},
		{"as held down and passed", Report{Verdict: Pass, Metrics: []Metric{as, tcp}, Warnings: []string{"as: ..."}, EnvironmentLimited: []string{"as"}},
			`^the verdict stands: as ran below the KDC's limit`, false},
		{"tcp failed, as held down", Report{Verdict: Fail, Metrics: []Metric{as, fail(tcp)}, Warnings: []string{"as: ..."}, EnvironmentLimited: []string{"as"}},
			`^the verdict stands: no warning says the environment held a failed figure down$`, false},
		{"a warning of another kind", Report{Verdict: Pass, Metrics: []Metric{as}, Warnings: []string{"kadmin: removing ..."}},
			`^the verdict stands: no warning says the environment held a figure down$`, false},
	} {
		got := VerdictNote(&c.rep)
		if !regexp.MustCompile(c.want).MatchString(got) {
			t.Errorf("%s: %q, want %s", c.name, got, c.want)
		}
		if doubted := strings.Contains(got, "may be the environment's"); doubted != c.doubted {
			t.Errorf("%s: in doubt %v, want %v", c.name, doubted, c.doubted)
		}
	}
}

// The terminal's summary gives each target its unit, and a line on what
// the warnings mean for the verdict; report.md and report.html the same,
// and report.html the settings report.md lists and the charts' targets.
func TestOutputsSayUnitsNoteAndSettings(t *testing.T) {
	rep, _ := stored(t)
	rep.Warnings = append(rep.Warnings, "as: the hypervisor gave the CPU(s) ...")
	rep.EnvironmentLimited = []string{"as"}
	var sum bytes.Buffer
	WriteSummary(&sum, rep)
	for _, m := range rep.Metrics {
		row := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(m.Test) + ` +` + regexp.QuoteMeta(m.Label) + ` .*` + regexp.QuoteMeta(m.Op+" "+fmtNum(m.Target)+" "+m.Unit) + ` +(PASS|FAIL)$`)
		if !row.MatchString(sum.String()) {
			t.Errorf("summary: no row for %s %s with its target in %s:\n%s", m.Test, m.Label, m.Unit, sum.String())
		}
	}
	note := "warnings: " + VerdictNote(rep) + "\n"
	if !strings.Contains(sum.String(), note) {
		t.Errorf("summary lacks %q", note)
	}
	var md bytes.Buffer
	WriteMarkdown(&md, rep)
	if !strings.Contains(md.String(), "What they mean for the verdict: "+VerdictNote(rep)) {
		t.Error("report.md: no note on the warnings")
	}
	page, err := HTML(rep)
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	if !strings.Contains(html, `id="verdict-note"`) || !strings.Contains(html, `<table id="settings">`) {
		t.Error("report.html: no note on the warnings, or no settings")
	}
	for _, kv := range settingsRows(rep) {
		if !strings.Contains(md.String(), "- "+kv[0]+": `"+kv[1]+"`") {
			t.Errorf("report.md lacks the setting %s", kv[0])
		}
		if !strings.Contains(html, "<tr><td>"+template.HTMLEscapeString(kv[0])+"</td>") {
			t.Errorf("report.html lacks the setting %s", kv[0])
		}
	}
	for _, want := range []string{"target: ", `stroke-dasharray="4 4"`} {
		if !strings.Contains(html, want) {
			t.Errorf("report.html's charts lack %q", want)
		}
	}
	// Each chart over time marks where each test began.
	for _, id := range []string{"cpu-over-time", "rss-over-time"} {
		i := strings.Index(html, `data-chart="`+id+`"`)
		if i < 0 {
			t.Errorf("report.html has no %s chart", id)
			continue
		}
		chart := html[i:]
		chart = chart[:strings.Index(chart, "</svg>")]
		for _, test := range []string{"as", "tgs", "latency"} {
			if !strings.Contains(chart, ">"+test+"</text>") {
				t.Errorf("%s: no phase mark for %s", id, test)
			}
		}
	}
}
