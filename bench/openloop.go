package bench

import (
	"context"
	"sync"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// session is an engine client with its prepared services; one goroutine
// uses it at a time.
type session struct {
	c    *krb5.Client
	svcs []*krb5.Service
	next int
}

// openLoop schedules LoginRate sessions per second for dur. The first
// round trip of session i is due at start + i/rate; a session whose client
// is still busy waits for a free one (and the wait counts in its latency).
func (r *run) openLoop(ctx context.Context, rate float64, tgsPer int, dur time.Duration) (*OpenLoop, error) {
	n := int(rate * dur.Seconds())
	// A client per user, bounded: a session due while every client is
	// busy waits for one, and the wait counts in its latency.
	nc := max(4, min(maxClients, max(r.fleet.users(), 1)))
	if r.set.Generator == GeneratorBatched {
		return r.openLoopSessions(ctx, rate, tgsPer, n, nc)
	}
	free := make(chan *session, nc)
	var all []*session
	defer func() {
		for _, s := range all {
			s.c.Close()
		}
	}()
	for i := 1; i <= nc; i++ {
		c, err := r.fleet.client(i, krb5.UDP)
		if err != nil {
			return nil, err
		}
		s := &session{c: c}
		for k := 0; k < max(1, r.sys.Services) && tgsPer > 0; k++ {
			s.svcs = append(s.svcs, r.fleet.service(c, (i+k-1)%max(1, r.sys.Services)+1))
		}
		all = append(all, s)
		free <- s
	}
	var mu sync.Mutex
	var recs []record
	res := &OpenLoop{LoginRate: rate, TGSPerLogin: tgsPer}
	var behind []time.Duration
	var wg sync.WaitGroup
	r.resetErrors()
	a := r.sampler.read()
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
loop:
	for i := 0; i < n; i++ {
		due := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				break loop
			case <-timer.C:
			}
		}
		var s *session
		select {
		case s = <-free:
		case <-ctx.Done():
			break loop
		}
		late := time.Since(due)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { free <- s }()
			local := make([]record, 0, 1+tgsPer)
			rctx, cancel := context.WithTimeout(ctx, r.set.Timeout)
			lr, err := s.c.Login(rctx)
			cancel()
			if err == nil {
				r.method(lr.Method, 1)
			}
			done := time.Now()
			local = append(local, r.note(record{Start: due.Sub(start), Latency: done.Sub(due), Kind: kindAS, Class: krb5.Classify(err)}, err))
			for k := 0; k < tgsPer && err == nil; k++ {
				sent := time.Now()
				rctx, cancel := context.WithTimeout(ctx, r.set.Timeout)
				tr, terr := s.c.ServiceTicket(rctx, s.svcs[s.next%len(s.svcs)])
				cancel()
				s.next++
				local = append(local, r.note(record{Start: sent.Sub(start), Latency: tr.Duration, Kind: kindTGS, Class: krb5.Classify(terr)}, terr))
			}
			mu.Lock()
			recs = append(recs, local...)
			behind = append(behind, late)
			mu.Unlock()
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	b := r.sampler.read()
	res.Sessions = len(behind)
	for _, l := range behind {
		if l > time.Millisecond {
			res.Behind++
		}
		res.MaxBehindMS = max(res.MaxBehindMS, ms(l))
	}
	res.Logins = r.finish(summarizeLoad(recs, kindAS, nc, wall, krb5.UDP))
	res.Tickets = r.finish(summarizeLoad(recs, kindTGS, nc, wall, krb5.UDP))
	res.Logins.Records = recs
	res.Tickets.Records = nil
	total := res.Logins.Requests + res.Tickets.Requests
	if total > 0 {
		res.ErrorPct = 100 * float64(res.Logins.Errors+res.Tickets.Errors) / float64(total)
	}
	res.CPU = cpuUse(a, b, total)
	return res, ctx.Err()
}

// openLoopSessions is the open loop on the raw-socket generator
// (sessions.go).
func (r *run) openLoopSessions(ctx context.Context, rate float64, tgsPer, n, nc int) (*OpenLoop, error) {
	sr, err := r.runSessions(ctx, sessionPlan{n: n, rate: rate, tgsPer: tgsPer}, nc)
	if sr == nil {
		return nil, err
	}
	res := &OpenLoop{LoginRate: rate, TGSPerLogin: tgsPer, Sessions: len(sr.late)}
	for _, l := range sr.late {
		if l > time.Millisecond {
			res.Behind++
		}
		res.MaxBehindMS = max(res.MaxBehindMS, ms(l))
	}
	res.Logins = r.finish(summarizeLoad(sr.recs, kindAS, nc, sr.wall, krb5.UDP))
	res.Tickets = r.finish(summarizeLoad(sr.recs, kindTGS, nc, sr.wall, krb5.UDP))
	res.Logins.Records = sr.recs
	res.Logins.GeneratorWaits = sr.waits
	res.Tickets.Records = nil
	total := res.Logins.Requests + res.Tickets.Requests
	if total > 0 {
		res.ErrorPct = 100 * float64(res.Logins.Errors+res.Tickets.Errors) / float64(total)
	}
	res.CPU = sr.cpu
	return res, err
}

// finish attaches the first error text of each class seen.
func (r *run) finish(l *Load) *Load {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	for c := range l.ErrorClasses {
		if l.ErrorTexts == nil {
			l.ErrorTexts = map[string]string{}
		}
		l.ErrorTexts[c] = r.errTexts[l.Kind+"/"+c]
	}
	return l
}
