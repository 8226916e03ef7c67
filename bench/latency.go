package bench

import (
	"context"
	"errors"
	"fmt"
)

// latency is an open loop of LoginRate logins/s, each followed by
// TGSPerLogin service tickets, for Duration: the latencies and errors at
// a steady load, and the KDC's CPU and memory under it (cpu, memory).
func (r *run) latency(ctx context.Context) error {
	idle := r.sampler.read()
	// Each of n shards makes 1/n of the rate; together they make it.
	ol, err := r.openLoop(ctx, r.set.LoginRate/float64(max(1, r.fleet.shards)), r.set.TGSPerLogin, r.set.Duration)
	if err != nil {
		return err
	}
	r.rep.Latency = ol
	// The memory test reads the first repetition's.
	if r.rep.Memory == nil {
		r.rep.Memory = &Memory{IdleBytes: idle.KDCRSS}
		for _, smp := range r.sampler.all() {
			if smp.Test == "latency" {
				r.rep.Memory.PeakBytes = max(r.rep.Memory.PeakBytes, smp.KDCRSS)
			}
		}
	}
	r.checkLimits("latency", ol.CPU, false)
	if ol.Behind > 0 {
		r.warn("latency: the generator started %d of %d sessions more than 1 ms late (worst %.1f ms); latencies count from the scheduled time", ol.Behind, ol.Sessions, ol.MaxBehindMS)
		r.environmentLimited("latency")
	}
	if ol.Logins.Requests == 0 {
		return errors.New("no login was made")
	}
	if ol.Logins.Errors == ol.Logins.Requests {
		return fmt.Errorf("every login failed: %s", errorSummary(ol.Logins))
	}
	t := r.set.Targets
	r.metric("latency", "login_p95_seconds", "Login latency p95", "ms", ol.Logins.Latency.P95MS, "<=", t.LoginP95MaxMS, 1e-3)
	r.metric("latency", "login_p99_seconds", "Login latency p99", "ms", ol.Logins.Latency.P99MS, "<=", t.LoginP99MaxMS, 1e-3)
	if r.set.TGSPerLogin > 0 {
		r.metric("latency", "ticket_p95_seconds", "Service ticket latency p95", "ms", ol.Tickets.Latency.P95MS, "<=", t.TicketP95MaxMS, 1e-3)
		r.metric("latency", "ticket_p99_seconds", "Service ticket latency p99", "ms", ol.Tickets.Latency.P99MS, "<=", t.TicketP99MaxMS, 1e-3)
	}
	r.metric("latency", "error_ratio", "Errors at the steady load", "%", ol.ErrorPct, "<=", t.ErrorMaxPct, 1e-2)
	return nil
}

// needLatency is for cpu and memory, which read the latency load.
func (r *run) needLatency() error {
	if r.rep.Latency == nil {
		return skip("needs the latency test's load (add latency to --tests)")
	}
	if r.sys.KDCPids == nil {
		return skip("the KDC's processes are not on this machine")
	}
	return nil
}
