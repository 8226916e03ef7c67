package bench

import (
	"context"
	"fmt"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// concurrency runs a closed loop of logins at each of ClientLevels, for
// LevelDuration each, and judges the rate at the top level against the
// peak.
func (r *run) concurrency(ctx context.Context) error {
	c := &Concurrency{}
	for _, n := range r.set.ClientLevels {
		r.prog.reset(fmt.Sprintf("concurrency %d clients", n))
		// n logins in flight (a closed loop of n clients) on the cheap
		// generator, so that it is not the limit at 64 either.
		l, err := r.onGenerator(ctx, kindAS, krb5.UDP, r.batchedAS, n, n, r.set.LevelDuration)
		if err != nil {
			return err
		}
		c.Levels = append(c.Levels, l)
		c.PeakRate = max(c.PeakRate, l.Rate)
		r.checkLimits(fmt.Sprintf("concurrency (%d clients)", n), l.CPU, false)
	}
	r.rep.Concurrency = c
	if c.PeakRate > 0 {
		c.TopPct = 100 * c.Levels[len(c.Levels)-1].Rate / c.PeakRate
	}
	r.metric("concurrency", "top_level_peak_ratio", fmt.Sprintf("Rate at %d clients, of the peak", r.set.ClientLevels[len(r.set.ClientLevels)-1]), "%", c.TopPct, ">=", r.set.Targets.ConcurrencyMinPct, 1e-2)
	return nil
}
