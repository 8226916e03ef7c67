package top

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/kdclog"
)

// TestAttackOffenders: the daemon's attack offenders show one line per
// signal, worst first, three of them and how many more, with what a
// terminal would act on escaped (a daemon's label values are not trusted).
func TestAttackOffenders(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: kdclog.MetricAttackOffender, Help: "h"}, []string{"signal", "offender"})
	reg.MustRegister(g)
	for off, v := range map[string]float64{"10.0.0.1": 6, "10.0.0.2": 12, "10.0.0.3": 7, "10.0.0.4": 5, "\x1b[2Jevil": 9} {
		g.WithLabelValues("password_spraying", off).Set(v)
	}
	g.WithLabelValues("kerberoasting", "svc@EXAMPLE.COM").Set(4)
	wantScreen(t, reg,
		"attack kerberoasting: svc@EXAMPLE.COM (4)\n",
		`attack password_spraying: 10.0.0.2 (12) \x1b[2Jevil (9) 10.0.0.3 (7) and 2 more`+"\n",
	)
}
