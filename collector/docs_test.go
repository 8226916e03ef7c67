package collector

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/internal/kdcbpf"
	"github.com/krb5-exporter/krb5-exporter/internal/metricsdoc"
)

// TestMetricsDocumented: every metric the collectors describe has a row in
// the "KDC host collectors" section of docs/metrics.md, with its labels.
func TestMetricsDocumented(t *testing.T) {
	c, err := New(nil, fixtureConfig(t, filepath.Join(fixtureDir, "proc")))
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan *prometheus.Desc, 100)
	c.Describe(ch)
	// The kdcservice collector is opt-in: its descriptors without its
	// program.
	newKDCServiceCollector(nil, nil, log.NewNopLogger(), func() (*kdcbpf.Tracer, error) {
		return nil, errors.New("not loaded in this test")
	}).describe(ch)
	close(ch)
	if n := metricsdoc.CheckDescs(t, "KDC host collectors", ch); n < 30 {
		t.Errorf("only %d descriptors described", n)
	}
}
