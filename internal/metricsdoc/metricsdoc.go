// Package metricsdoc lets each package's tests check its metrics against
// docs/metrics.md: every metric has a row in the package's section whose
// labels column names exactly its labels (and whose type column its type,
// where the test knows it), and every row is a metric the code has.
package metricsdoc

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Row is one metric's row of the table: | name | type | labels | meaning |.
type Row struct {
	Type string // first word of the type column

	Labels []string // sorted
}

var backticked = regexp.MustCompile("`([^`]+)`")

// Section returns the table rows of "## title" in docs/metrics.md, keyed
// by metric name. A "### " subsection belongs to its section. Tests run in
// their package directory, below the repository root (the nearest
// directory up with a go.mod).
func Section(t testing.TB, title string) map[string]Row {
	t.Helper()
	root := ".."
	for d := ".."; ; d = filepath.Join(d, "..") {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			root = d
			break
		}
		if abs, err := filepath.Abs(d); err != nil || abs == "/" {
			break
		}
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "metrics.md"))
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
	rows := map[string]Row{}
	for _, line := range strings.Split(text, "\n") {
		// The meaning, last, may hold a "|"; the first columns do not.
		cols := strings.SplitN(line, "|", 5)
		if !strings.HasPrefix(line, "| `") || len(cols) < 5 {
			continue
		}
		name := strings.Trim(strings.TrimSpace(cols[1]), "`")
		var labels []string
		for _, m := range backticked.FindAllStringSubmatch(cols[3], -1) {
			labels = append(labels, m[1])
		}
		slices.Sort(labels)
		typ, _, _ := strings.Cut(strings.TrimSpace(cols[2]), " ")
		rows[name] = Row{Type: typ, Labels: labels}
	}
	return rows
}

var descRE = regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)

// CheckDescs checks described metrics (which need no samples) against the
// section, both ways, and returns how many there were.
func CheckDescs(t testing.TB, title string, descs <-chan *prometheus.Desc) int {
	t.Helper()
	rows := Section(t, title)
	seen := map[string]bool{}
	for d := range descs {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read descriptor %s", d)
		}
		var labels []string
		for _, l := range strings.Split(m[2], ",") {
			if l = strings.TrimSpace(l); l != "" {
				labels = append(labels, l)
			}
		}
		check(t, title, rows, m[1], "", labels)
		seen[m[1]] = true
	}
	unmatched(t, title, rows, seen)
	return len(seen)
}

// CheckFamilies checks gathered metric families (labels from their
// samples, and their types) against the section, both ways.
func CheckFamilies(t testing.TB, title string, mfs []*dto.MetricFamily) {
	t.Helper()
	rows := Section(t, title)
	seen := map[string]bool{}
	for _, mf := range mfs {
		var labels []string
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName())
			}
		}
		check(t, title, rows, mf.GetName(), strings.ToLower(mf.GetType().String()), labels)
		seen[mf.GetName()] = true
	}
	unmatched(t, title, rows, seen)
}

func check(t testing.TB, title string, rows map[string]Row, name, typ string, labels []string) {
	t.Helper()
	row, ok := rows[name]
	if !ok {
		t.Errorf("%s is not documented in the %q section of docs/metrics.md", name, title)
		return
	}
	slices.Sort(labels)
	labels = slices.Compact(labels)
	if !slices.Equal(labels, row.Labels) {
		t.Errorf("%s: docs/metrics.md gives labels %v, the code has %v", name, row.Labels, labels)
	}
	if typ != "" && typ != row.Type {
		t.Errorf("%s: docs/metrics.md says %q, the code makes a %s", name, row.Type, typ)
	}
}

// unmatched reports rows for metrics the code no longer has.
func unmatched(t testing.TB, title string, rows map[string]Row, seen map[string]bool) {
	t.Helper()
	for name := range rows {
		if !seen[name] {
			t.Errorf("docs/metrics.md documents %s in %q, but the code has no such metric", name, title)
		}
	}
}
