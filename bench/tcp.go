package bench

import (
	"context"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// tcp is the login rate over TCP, loaded as as is, beside as's UDP rate.
func (r *run) tcp(ctx context.Context) error {
	l, err := r.onGenerator(ctx, kindAS, krb5.TCP, r.batchedTCP, r.set.BatchInflight, r.set.Clients, r.set.Duration)
	if err != nil {
		return err
	}
	t := &TCP{Load: l}
	if r.rep.AS != nil && r.rep.AS.Rate > 0 {
		t.UDPRateRef = r.rep.AS.Rate
		t.PctOfUDP = 100 * l.Rate / r.rep.AS.Rate
	}
	r.rep.TCP = t
	r.checkLimits("tcp", l.CPU, false)
	if err := r.checkLoad("tcp", l); err != nil {
		return err
	}
	r.metric("tcp", "tcp_logins_per_second", "Logins per second over TCP", "logins/s", l.Rate, ">=", r.set.Targets.TCPMinRate, 1)
	return nil
}
