package bench

import (
	"context"
	"fmt"

	"github.com/krb5-exporter/krb5-exporter/internal/loadgen"
)

// degradation repeats the same work, DegradationLogins logins each
// followed by one service ticket, for DegradationRounds rounds, as in the
// krb5 1.9.1 report (each round slower than the last: a replay cache that
// grew without bound). FAIL when the last round is slower than the first
// by more than the target.
func (r *run) degradation(ctx context.Context) error {
	d := &Degradation{LoginsPerRound: r.set.DegradationLogins}
	r.rep.Degradation = d
	if err := r.degradationRounds(ctx, d); err != nil {
		return err
	}
	if d.Errors == d.LoginsPerRound*len(d.RoundsS) {
		return fmt.Errorf("every login failed")
	}
	if d.Errors > 0 {
		r.warn("degradation: %d logins or tickets failed", d.Errors)
	}
	first := d.RoundsS[0]
	d.LastVsFirstPct = 100 * (d.RoundsS[len(d.RoundsS)-1] - first) / first
	d.SlopePctRound = 100 * slope(d.RoundsS) / first
	r.metric("degradation", "last_round_slowdown_ratio", "Last round slower than the first by", "%", d.LastVsFirstPct, "<=", r.set.Targets.DegradationMaxPct, 1e-2)
	return nil
}

// degradationRounds makes the rounds: Clients sessions in flight, each
// started as soon as one ends, on the batched generator (as the latency
// load's sessions) or the blocking one (a goroutine per client).
func (r *run) degradationRounds(ctx context.Context, d *Degradation) error {
	for round := 0; round < r.set.DegradationRounds; round++ {
		r.prog.reset(fmt.Sprintf("degradation round %d", round+1))
		var res *loadgen.Result
		var err error
		if r.set.Generator == GeneratorBatched {
			w := r.window()
			res, err = loadgen.Sessions(ctx, r.gen(w), loadgen.SessionPlan{N: d.LoginsPerRound, TGSPer: 1}, r.set.Clients)
		} else {
			res, err = loadgen.BlockingSessions(ctx, r.gen(nil), d.LoginsPerRound, r.set.Clients)
		}
		if err != nil {
			return err
		}
		r.took(res)
		d.RoundsS = append(d.RoundsS, res.Wall.Seconds())
		d.Errors += res.Failed
	}
	return nil
}
