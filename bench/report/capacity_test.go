package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The stored run's capacity rows (read here with encoding/json, not the
// Report type) are in report.md, report.html and the summary, each
// estimate beside the measured ceiling and their ratio; a report of a
// run before the section (the key removed) still reads, validates and
// renders, without it.
func TestCapacitySection(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	c, _ := raw["capacity"].(map[string]any)
	rows, _ := c["rows"].([]any)
	if len(rows) == 0 {
		t.Fatal("testdata/report.json has no capacity rows: regenerate it (testdata/README)")
	}
	rep, _ := stored(t)
	render := func(rep *Report) (md, html, sum string) {
		var m, s bytes.Buffer
		WriteMarkdown(&m, rep)
		WriteSummary(&s, rep)
		h, err := HTML(rep)
		if err != nil {
			t.Fatal(err)
		}
		return m.String(), string(h), s.String()
	}
	md, html, sum := render(rep)
	estimated := 0
	for _, x := range rows {
		r := x.(map[string]any)
		est, meas := r["estimate_per_s"].(float64), r["measured_per_s"].(float64)
		if est <= 0 {
			if !strings.Contains(md, fmt.Sprintf("| %s | %s | %.0f | – | – | none (%s) |", r["source"], r["request"], r["requests"], r["why"])) {
				t.Errorf("report.md has no row saying why %s %s has no estimate", r["source"], r["request"])
			}
			continue
		}
		estimated++
		cells := fmt.Sprintf("| %s | %s | %.2f |", fmtNum(est), fmtNum(meas), est/meas)
		if !strings.Contains(md, cells) {
			t.Errorf("report.md has no %s %s row with %q", r["source"], r["request"], cells)
		}
		if want := fmt.Sprintf("<td>%s</td><td>%s</td><td>%.2f</td>", fmtNum(est), fmtNum(meas), est/meas); !strings.Contains(html, want) {
			t.Errorf("report.html has no %s %s row with %q", r["source"], r["request"], want)
		}
		if want := fmt.Sprintf("capacity %s %s: estimate %s/s at the latency load, measured %s/s (%.2fx)", r["source"], r["request"], fmtNum(est), fmtNum(meas), est/meas); !strings.Contains(sum, want) {
			t.Errorf("the summary has no %q", want)
		}
	}
	if estimated == 0 {
		t.Error("the stored run has no estimate")
	}

	delete(raw, "capacity")
	old, err := json.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(file, old, 0o644); err != nil {
		t.Fatal(err)
	}
	prev, err := ReadSummary(file)
	if err != nil {
		t.Fatalf("a report without the capacity section: %v", err)
	}
	md, html, sum = render(prev)
	if prev.Capacity != nil || strings.Contains(md, "## capacity") || strings.Contains(html, `id="capacity"`) || strings.Contains(sum, "capacity ") {
		t.Error("a report without the capacity section renders one")
	}
}
