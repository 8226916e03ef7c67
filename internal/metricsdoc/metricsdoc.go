// Package metricsdoc lets each package's tests check its metrics against
// docs/metrics.md: every metric has a row in the package's section, and
// the row names each of its labels.
package metricsdoc

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Section returns the table rows of "## title" in docs/metrics.md, keyed
// by metric name. Tests run in their package directory, one level below
// the repository root.
func Section(t testing.TB, title string) map[string]string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start := strings.Index(text, "\n## "+title+"\n")
	if start < 0 {
		t.Fatalf("docs/metrics.md has no %q section", "## "+title)
	}
	text = text[start+1:]
	if end := strings.Index(text, "\n## "); end >= 0 {
		text = text[:end]
	}
	rows := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, "| `"); ok {
			if name, _, ok := strings.Cut(rest, "` |"); ok {
				rows[name] = line
			}
		}
	}
	return rows
}

var descRE = regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)

// CheckDescs checks described metrics (which need no samples) and
// returns how many there were.
func CheckDescs(t testing.TB, title string, descs <-chan *prometheus.Desc) int {
	t.Helper()
	rows := Section(t, title)
	n := 0
	for d := range descs {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read descriptor %s", d)
		}
		n++
		var labels []string
		for _, l := range strings.Split(m[2], ",") {
			if l = strings.TrimSpace(l); l != "" {
				labels = append(labels, l)
			}
		}
		check(t, title, rows, m[1], labels)
	}
	return n
}

// CheckFamilies checks gathered metric families, labels from their samples.
func CheckFamilies(t testing.TB, title string, mfs []*dto.MetricFamily) {
	t.Helper()
	rows := Section(t, title)
	for _, mf := range mfs {
		var labels []string
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName())
			}
		}
		check(t, title, rows, mf.GetName(), labels)
	}
}

func check(t testing.TB, title string, rows map[string]string, name string, labels []string) {
	t.Helper()
	row, ok := rows[name]
	if !ok {
		t.Errorf("%s is not documented in the %q section of docs/metrics.md", name, title)
		return
	}
	for _, l := range labels {
		if !strings.Contains(row, "`"+l+"`") {
			t.Errorf("%s: label %s is not documented in docs/metrics.md", name, l)
		}
	}
}
