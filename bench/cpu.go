package bench

import (
	"context"
)

// cpu judges the KDC's CPU during latency's load.
func (r *run) cpu(context.Context) error {
	if err := r.needLatency(); err != nil {
		return err
	}
	u := r.rep.Latency.CPU
	r.metric("cpu", "kdc_cpu_ratio", "KDC CPU at the steady load", "% of one core", u.KDCBusyPct, "<=", r.set.Targets.CPUMaxPct, 1e-2)
	return nil
}
