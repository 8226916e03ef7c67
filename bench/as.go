package bench

import (
	"context"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// as is the login rate: logins on UDP for Duration, on the batched
// generator (BatchInflight in flight) or Clients closed-loop clients.
func (r *run) as(ctx context.Context) error {
	l, err := r.onGenerator(ctx, kindAS, krb5.UDP, r.batchedAS, r.set.BatchInflight, r.set.Clients, r.set.Duration)
	if err != nil {
		return err
	}
	r.rep.AS = l
	r.checkLimits("as", l.CPU, true)
	if err := r.checkLoad("as", l); err != nil {
		return err
	}
	r.metric("as", "as_logins_per_second", "Logins per second", "logins/s", l.Rate, ">=", r.set.Targets.ASMinRate, 1)
	return nil
}
