package report

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/internal/metricsdoc"
)

// Every krb5_bench_* metric is in docs/metrics.md with its labels, and
// every row there is a metric the collector has.
func TestMetricsDocumented(t *testing.T) {
	ch := make(chan *prometheus.Desc)
	go func() {
		NewCollector().Describe(ch)
		close(ch)
	}()
	if n := metricsdoc.CheckDescs(t, "Bench", ch); n != 15 {
		t.Errorf("%d metrics", n)
	}
}
