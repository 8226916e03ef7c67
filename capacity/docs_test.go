package capacity

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/internal/metricsdoc"
)

// TestMetricsDocumented: every series of the estimate has its row in the
// "Capacity" section of docs/metrics.md, and every row is a series.
func TestMetricsDocumented(t *testing.T) {
	ch := make(chan *prometheus.Desc, 10)
	Describe(ch)
	DescribeBench(ch)
	close(ch)
	if n := metricsdoc.CheckDescs(t, "Capacity", ch); n < 7 {
		t.Errorf("only %d descriptors", n)
	}
}
