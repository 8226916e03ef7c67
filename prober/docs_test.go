package prober

import (
	"testing"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/internal/metricsdoc"
)

// Every metric of the continuous probes and of /probe has a row in the
// "Probes" section of docs/metrics.md, naming each of its labels.
func TestProbeMetricsDocumented(t *testing.T) {
	reg := prometheus.NewRegistry()
	pm := newProbeMetrics(reg)
	pm.initTarget("t", []string{ExchangeAS, ExchangeTGS, ExchangeReferral, ExchangeRemoteTGS}, "EXAMPLE.COM", "OTHER.EXAMPLE", krb5.HTTPS)
	o := Outcome{AS: krb5.ASResult{HasClockOffset: true, PreauthRequired: 1, SPAKEChallenge: 1, ASRep: 1, Method: krb5.MethodSPAKE}, TGSRan: true, CrossRan: true}
	pm.record("t", krb5.UDP, &o)
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
	metricsdoc.CheckFamilies(t, "Probes", mfs)
}
