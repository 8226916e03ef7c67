package loadgen

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// The sessions on the blocking engine client: a goroutine per session in
// flight, one request at a time.

// session is an engine client with its prepared services; one goroutine
// uses it at a time.
type session struct {
	c    *krb5.Client
	svcs []*krb5.Service
	next int
}

// OpenLoopClients is how many clients (sessions in flight) the open loop
// simulates for users users: a client per user, bounded.
func OpenLoopClients(users int) int { return max(4, min(maxClients, max(users, 1))) }

// BlockingOpenLoop makes plan's sessions (plan.Rate > 0) on the blocking
// client: session i is due at start + i/rate; a session whose client is
// still busy waits for a free one (one of clients), and the wait counts
// in its login's latency.
func BlockingOpenLoop(ctx context.Context, cfg Config, plan SessionPlan, clients int) (*Result, error) {
	free := make(chan *session, clients)
	var all []*session
	defer func() {
		for _, s := range all {
			s.c.Close()
		}
	}()
	for i := 1; i <= clients; i++ {
		c, err := cfg.Client(i, krb5.UDP)
		if err != nil {
			return nil, err
		}
		s := &session{c: c}
		if plan.TGSPer > 0 {
			s.svcs = cfg.services(c, i)
		}
		all = append(all, s)
		free <- s
	}
	tl := newTally(&cfg)
	var mu sync.Mutex
	res := &Result{}
	var wg sync.WaitGroup
	cfg.measure()
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
loop:
	for i := 0; i < plan.N; i++ {
		due := start.Add(time.Duration(float64(i) / plan.Rate * float64(time.Second)))
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
			local := make([]Record, 0, 1+plan.TGSPer)
			rctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
			lr, err := s.c.Login(rctx)
			cancel()
			if err == nil {
				tl.method(lr.Method, 1)
			}
			done := time.Now()
			local = append(local, tl.note(Record{Start: due.Sub(start), Latency: done.Sub(due), Kind: KindAS, Class: krb5.Classify(err)}, err))
			failed := err != nil
			for k := 0; k < plan.TGSPer && err == nil; k++ {
				sent := time.Now()
				rctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
				tr, terr := s.c.ServiceTicket(rctx, s.svcs[s.next%len(s.svcs)])
				cancel()
				s.next++
				failed = failed || terr != nil
				local = append(local, tl.note(Record{Start: sent.Sub(start), Latency: tr.Duration, Kind: KindTGS, Class: krb5.Classify(terr)}, terr))
			}
			mu.Lock()
			res.Records = append(res.Records, local...)
			res.Late = append(res.Late, late)
			if failed {
				res.Failed++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.Wall = time.Since(start)
	cfg.measure()
	tl.result(res)
	return res, ctx.Err()
}

// BlockingSessions makes n sessions of a login and one ticket with
// `clients` goroutines on the blocking client, each starting its next
// session as soon as its last ended (a degradation round). It keeps no
// records: Wall, Failed, Methods and ErrorTexts.
func BlockingSessions(ctx context.Context, cfg Config, n, clients int) (*Result, error) {
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
		c, err := cfg.Client(i+1, krb5.UDP)
		if err != nil {
			return nil, err
		}
		cs[i], svcs[i] = c, cfg.Service(c, i+1)
	}
	tl := newTally(&cfg)
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	cfg.measure()
	start := time.Now()
	for w := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) && ctx.Err() == nil {
				rctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
				lr, err := cs[w].Login(rctx)
				if err == nil {
					tl.method(lr.Method, 1)
					_, err = cs[w].ServiceTicket(rctx, svcs[w])
				}
				cancel()
				tl.note(Record{Class: krb5.Classify(err)}, err)
				if err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	res := tl.result(&Result{Wall: time.Since(start), Failed: int(failed.Load())})
	cfg.measure()
	return res, ctx.Err()
}
