package top

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/kdclog"
)

// TestTopTalkers: the daemon's top talkers show one line per kind, AS and
// TGS (and KDCs) added up, as requests a second over the window, the
// busiest three first and how many more, with what a terminal would act
// on escaped.
func TestTopTalkers(t *testing.T) {
	reg := prometheus.NewRegistry()
	req := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: kdclog.MetricTopRequests, Help: "h"}, []string{"by", "request", "name"})
	fail := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: kdclog.MetricTopFailures, Help: "h"}, []string{"by", "name"})
	win := prometheus.NewGauge(prometheus.GaugeOpts{Name: kdclog.MetricTopWindowSeconds, Help: "h"})
	reg.MustRegister(req, fail, win)
	win.Set(60)
	req.WithLabelValues("address", "as", "127.0.0.5").Set(3000)
	req.WithLabelValues("address", "tgs", "127.0.0.5").Set(600)
	req.WithLabelValues("address", "as", "127.0.0.1").Set(360)
	for _, a := range []string{"10.0.0.1", "10.0.0.2", "\x1b[2Jevil"} {
		req.WithLabelValues("address", "tgs", a).Set(6)
	}
	fail.WithLabelValues("client", "job@EXAMPLE.COM").Set(120)
	wantScreen(t, reg,
		`talkers requests by address: 127.0.0.5 (60.0/s) 127.0.0.1 (6.0/s) \x1b[2Jevil (0.1/s) and 2 more`+"\n",
		"talkers failures by client: job@EXAMPLE.COM (2.0/s)\n",
	)
}
