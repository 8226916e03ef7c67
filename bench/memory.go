package bench

import (
	"context"
	"errors"
)

// memory judges the KDC's peak RSS during latency's load.
func (r *run) memory(context.Context) error {
	if err := r.needLatency(); err != nil {
		return err
	}
	m := r.rep.Memory
	if m.PeakBytes == 0 {
		return errors.New("no KDC process was found during the latency load")
	}
	r.metric("memory", "kdc_rss_peak_bytes", "KDC memory (RSS) at peak", "MB", float64(m.PeakBytes)/(1<<20), "<=", r.set.Targets.MemoryMaxMB, 1<<20)
	return nil
}
