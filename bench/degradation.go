package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// degradation repeats the same work, DegradationLogins logins each
// followed by one service ticket, for DegradationRounds rounds, as in the
// krb5 1.9.1 report (each round slower than the last: a replay cache that
// grew without bound). FAIL when the last round is slower than the first
// by more than the target.
func (r *run) degradation(ctx context.Context) error {
	d := &Degradation{LoginsPerRound: r.set.DegradationLogins}
	r.rep.Degradation = d
	var err error
	if r.set.Generator == GeneratorBatched {
		err = r.degradationSessions(ctx, d)
	} else {
		err = r.degradationBlocking(ctx, d)
	}
	if err != nil {
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

// degradationSessions makes the rounds on the raw-socket generator
// (sessions.go): Clients sessions in flight, each started as soon as one
// ends.
func (r *run) degradationSessions(ctx context.Context, d *Degradation) error {
	for round := 0; round < r.set.DegradationRounds; round++ {
		r.prog.reset(fmt.Sprintf("degradation round %d", round+1))
		sr, err := r.runSessions(ctx, sessionPlan{n: d.LoginsPerRound, tgsPer: 1}, r.set.Clients)
		if err != nil {
			return err
		}
		d.RoundsS = append(d.RoundsS, sr.wall.Seconds())
		d.Errors += sr.failed
	}
	return nil
}

// degradationBlocking makes the rounds with Clients goroutines on the
// blocking client.
func (r *run) degradationBlocking(ctx context.Context, d *Degradation) error {
	clients := r.set.Clients
	cs := make([]*krb5.Client, clients)
	svcs := make([]*krb5.Service, clients)
	defer func() {
		for _, c := range cs {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i := range cs {
		c, err := r.fleet.client(i+1, krb5.UDP)
		if err != nil {
			return err
		}
		cs[i], svcs[i] = c, r.fleet.service(c, i+1)
	}
	for round := 0; round < r.set.DegradationRounds; round++ {
		r.prog.reset(fmt.Sprintf("degradation round %d", round+1))
		var next, failed atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for w := range cs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for next.Add(1) <= int64(d.LoginsPerRound) && ctx.Err() == nil {
					rctx, cancel := context.WithTimeout(ctx, r.set.Timeout)
					lr, err := cs[w].Login(rctx)
					if err == nil {
						r.method(lr.Method, 1)
						_, err = cs[w].ServiceTicket(rctx, svcs[w])
					}
					cancel()
					r.note(record{Class: krb5.Classify(err)}, err)
					if err != nil {
						failed.Add(1)
					}
				}
			}()
		}
		wg.Wait()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		d.RoundsS = append(d.RoundsS, time.Since(start).Seconds())
		d.Errors += int(failed.Load())
	}
	return nil
}
