package collector

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsDocumented: every metric the collectors describe has a row in
// the "KDC host collectors" section of docs/metrics.md, with its labels.
func TestMetricsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)
	start := strings.Index(section, "## KDC host collectors")
	if start < 0 {
		t.Fatal(`docs/metrics.md has no "## KDC host collectors" section`)
	}
	section = section[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}

	c, err := New(nil, fixtureConfig(t, filepath.Join(fixtureDir, "proc")))
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan *prometheus.Desc, 100)
	c.Describe(ch)
	close(ch)
	descRE := regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)
	n := 0
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read %s", d)
		}
		n++
		name := m[1]
		row := ""
		for _, line := range strings.Split(section, "\n") {
			if strings.HasPrefix(line, "| `"+name+"` |") {
				row = line
			}
		}
		if row == "" {
			t.Errorf("%s is not documented in docs/metrics.md", name)
			continue
		}
		for _, l := range strings.Split(m[2], ",") {
			if l = strings.TrimSpace(l); l != "" && !strings.Contains(row, "`"+l+"`") {
				t.Errorf("%s: label %s not documented", name, l)
			}
		}
	}
	if n < 30 {
		t.Errorf("only %d descriptors described", n)
	}
}
