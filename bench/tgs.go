package bench

import (
	"context"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// tgs is the service ticket rate, loaded as as is.
func (r *run) tgs(ctx context.Context) error {
	l, err := r.onGenerator(ctx, kindTGS, krb5.UDP, r.batchedTGS, r.set.BatchInflight, r.set.Clients, r.set.Duration)
	if err != nil {
		return err
	}
	r.rep.TGS = l
	r.checkLimits("tgs", l.CPU, true)
	if err := r.checkLoad("tgs", l); err != nil {
		return err
	}
	r.metric("tgs", "tgs_tickets_per_second", "Service tickets per second", "tickets/s", l.Rate, ">=", r.set.Targets.TGSMinRate, 1)
	return nil
}
