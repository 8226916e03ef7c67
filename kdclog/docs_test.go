package kdclog

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/internal/metricsdoc"
)

// TestMetricsDocumented: every metric the log collector describes has a
// row in the "KDC log collector" section of docs/metrics.md, with its labels.
func TestMetricsDocumented(t *testing.T) {
	ch := make(chan *prometheus.Desc, 100)
	collector{}.Describe(ch)
	close(ch)
	if n := metricsdoc.CheckDescs(t, "KDC log collector", ch); n != 53 {
		t.Errorf("%d descriptors described, want 53", n)
	}
}
