package kdclog

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsDocumented: every metric the log collector describes has a
// row in the "KDC log collector" section of docs/metrics.md, with its labels.
func TestMetricsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)
	start := strings.Index(section, "## KDC log collector")
	if start < 0 {
		t.Fatal(`docs/metrics.md has no "## KDC log collector" section`)
	}
	section = section[start:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	ch := make(chan *prometheus.Desc, 100)
	collector{}.Describe(ch)
	close(ch)
	descRE := regexp.MustCompile(`fqName: "([^"]+)".*variableLabels: \{([^}]*)\}`)
	n := 0
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read %s", d)
		}
		n++
		row := ""
		for _, line := range strings.Split(section, "\n") {
			if strings.HasPrefix(line, "| `"+m[1]+"` |") {
				row = line
			}
		}
		if row == "" {
			t.Errorf("%s is not documented in docs/metrics.md", m[1])
			continue
		}
		for _, l := range strings.Split(m[2], ",") {
			if l = strings.TrimSpace(l); l != "" && !strings.Contains(row, "`"+l+"`") {
				t.Errorf("%s: label %s not documented", m[1], l)
			}
		}
	}
	if n != 26 {
		t.Errorf("%d descriptors described, want 26", n)
	}
}
