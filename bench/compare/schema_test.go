package compare_test

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/bench/compare"
	"github.com/krb5-exporter/krb5-exporter/bench/report"
)

// A run from before report.json's capacity section (testdata/fast)
// against one with it (report's stored run), both ways: both read, and
// the comparison has the metrics both runs share and renders.
func TestComparesAcrossTheCapacitySection(t *testing.T) {
	old := load(t, "fast")
	cur, _, err := report.ReadRun(filepath.Join("..", "report", "testdata", "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if old.Capacity != nil || cur.Capacity == nil {
		t.Fatalf("fixtures: old capacity %v, new %v", old.Capacity != nil, cur.Capacity != nil)
	}
	for _, pair := range [][2]*report.Report{{old, cur}, {cur, old}} {
		c := compare.Compare(pair[0], pair[1], compare.Options{})
		shared := 0
		for _, m := range c.Metrics {
			if m.Missing == "" {
				shared++
			}
		}
		var b bytes.Buffer
		report.WriteComparison(&b, &c)
		if shared == 0 || !strings.Contains(b.String(), "as") {
			t.Errorf("%d metrics compared, of %d:\n%s", shared, len(c.Metrics), b.String())
		}
	}
}
