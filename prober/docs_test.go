package prober

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Every metric of the continuous probes and of /probe has a row in the
// "Probes" section of docs/metrics.md, naming each of its labels.
func TestProbeMetricsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	section := string(doc)
	start := strings.Index(section, "\n## Probes\n")
	if start < 0 {
		t.Fatal(`docs/metrics.md has no "## Probes" section`)
	}
	section = section[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}

	reg := prometheus.NewRegistry()
	pm := newProbeMetrics(reg)
	pm.initTarget("t", true)
	o := Outcome{AS: ASResult{HasClockOffset: true, PreauthRequired: 1, ASRep: 1}, TGSRan: true}
	pm.record("t", UDP, &o)
	pm.worldReadable.WithLabelValues("t").Set(0)
	one := newOneShotMetrics(reg)
	one.record(&o)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) < 20 {
		t.Fatalf("only %d metric families gathered", len(mfs))
	}
	for _, mf := range mfs {
		row := ""
		for _, line := range strings.Split(section, "\n") {
			if strings.HasPrefix(line, "| `"+mf.GetName()+"` |") {
				row = line
			}
		}
		if row == "" {
			t.Errorf("%s is not documented in the Probes section of docs/metrics.md", mf.GetName())
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if !strings.Contains(row, "`"+l.GetName()+"`") {
					t.Errorf("%s: label %s not documented", mf.GetName(), l.GetName())
				}
			}
		}
	}
}
