package loadgen

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// Batched makes the as or tgs load with few goroutines: `inflight`
// requests in flight in total (the closed-loop clients' worth), spread
// over one goroutine per batchedPerWorker of them (at most one per CPU),
// each with its own user (and, for tgs, TGT) and one connected UDP
// socket, on the UDP cycle (udp.go). A tgs request is matched to its
// reply by the nonce inside the reply's encrypted part. A login is still
// the two or three round trips of a fresh kinit -k: a PREAUTH_REQUIRED
// answers the oldest first round trip, which goes on to its next at
// once; an AS-REP is matched by its nonce. A KRB-ERROR that names no
// request ends the oldest in flight. The load ends at dur, or after
// limit successful requests when limit > 0 (benchmarks).
func Batched(ctx context.Context, cfg Config, kind string, inflight int, dur time.Duration, limit int64) (*Result, error) {
	// One goroutine per batchedPerWorker requests in flight, at most one
	// per CPU: a goroutine wakes once per half its requests, so fewer,
	// fuller goroutines wake less. One keeps a KDC core busy with a few %
	// of another core.
	cpus := cfg.CPUs
	if cpus <= 0 {
		cpus = runtime.GOMAXPROCS(0)
	}
	g := max(1, min((inflight+batchedPerWorker-1)/batchedPerWorker, cpus))
	tl := newTally(&cfg)
	var stop atomic.Bool
	var ok atomic.Int64
	ws := make([]*batchedLoad, g)
	defer func() {
		for _, w := range ws {
			if w != nil {
				w.c.Close()
				if w.cy != nil {
					w.cy.u.close()
				}
			}
		}
	}()
	for i := range ws {
		c, err := cfg.Client(i+1, krb5.UDP)
		if err != nil {
			return nil, err
		}
		w := &batchedLoad{c: c, kind: kind, tl: tl, limit: limit, ok: &ok, stop: &stop}
		ws[i] = w
		depth := inflight / g
		if i < inflight%g {
			depth++
		}
		if kind == KindTGS {
			if err := loginFirst(ctx, &cfg, c, tl); err != nil {
				return nil, err
			}
			w.svcs = cfg.services(c, i+1)
		}
		u, err := dialRawUDP(cfg.KDC, depth)
		if err != nil {
			return nil, err
		}
		w.cy = newUDPCycle(u, depth, cfg.Timeout, true, &w.out)
		w.q = newStageQueues(depth)
	}
	var done sync.WaitGroup
	cfg.measure()
	start := time.Now()
	tl.dl = newDeadline(start, dur, cfg.Timeout)
	errs := make([]error, g)
	for i, w := range ws {
		w.start, w.dl = start, tl.dl
		done.Add(1)
		go func() {
			defer done.Done()
			errs[i] = w.run(ctx)
		}()
	}
	done.Wait()
	res := &Result{Wall: time.Since(start)}
	cfg.measure()
	for _, w := range ws {
		res.Records = w.out.appendTo(res.Records)
		res.Waits += w.out.waits
		if w.cy != nil {
			res.Datagrams += w.cy.u.dgrams
			res.Messages += w.cy.u.msgs
		}
		if l := w.out.lowest; l > 0 && (res.Lowest == 0 || l < res.Lowest) {
			res.Lowest = l
		}
	}
	tl.result(res)
	for _, err := range errs {
		if err != nil {
			return res, err
		}
	}
	return res, ctx.Err()
}

// batchedPerWorker is how many requests in flight a batched goroutine
// takes before the load is spread over more (up to one per CPU).
const batchedPerWorker = 64

// batchedLoad is one goroutine of Batched: the as or tgs load on the
// UDP cycle.
type batchedLoad struct {
	c     *krb5.Client
	svcs  []*krb5.Service
	kind  string
	cy    *udpCycle
	q     *stageQueues // logins in flight, by stage
	next  int          // the next service
	start time.Time
	dl    *deadline
	out   recordLog
	tl    *tally
	// Successful logins by the stage that ended them, for the report.
	methods [krb5.StageResponse + 1]int
	limit   int64
	ok      *atomic.Int64 // successes of every goroutine, against limit
	stop    *atomic.Bool  // limit reached
	err     error         // a request that could not be encoded
}

func (b *batchedLoad) run(ctx context.Context) error {
	defer b.tl.stages(&b.methods)
	if err := b.cy.run(ctx, b, b.start); err != nil {
		return err
	}
	return b.err
}

func (b *batchedLoad) over(now time.Time) bool {
	return b.dl.over(now) || b.stop.Load() || b.err != nil
}

func (b *batchedLoad) more() bool      { return true }
func (b *batchedLoad) wake() time.Time { return b.dl.next() }

func (b *batchedLoad) fill(c *udpCycle, now time.Time) {
	for i := range c.slots {
		s := &c.slots[i]
		if s.busy {
			continue
		}
		var buf []byte
		var nonce int64
		var err error
		fl := s.fl
		if b.kind == KindAS {
			buf, err = b.c.EncodeLoginFirst(s.buf[:0], &fl)
			nonce = fl.Nonce
		} else {
			buf, nonce, err = b.c.EncodeServiceTicket(s.buf[:0], b.svcs[b.next%len(b.svcs)])
		}
		if err != nil {
			b.err = err
			return
		}
		b.next++
		s.fl, s.first = fl, now
		c.ask(i, buf, nonce)
	}
}

// sent: only logins wait in the stage queues; a TGS reply names its
// request by its nonce.
func (b *batchedLoad) sent(i int) {
	if b.kind == KindAS {
		s := &b.cy.slots[i]
		b.q.push(b.cy.slots, s.fl.Stage, i, s.seq)
	}
}

func (b *batchedLoad) phase(int) string { return kindPhase(b.kind) }

func (b *batchedLoad) finish(i int, at time.Time, err error) {
	s := &b.cy.slots[i]
	b.cy.end(i)
	if b.kind == KindAS {
		b.q.retire(&s.fl)
	}
	b.out.add(b.tl.note(Record{Start: s.first.Sub(b.start), Latency: at.Sub(s.first), Kind: b.kind, Class: krb5.Classify(err)}, err))
}

func (b *batchedLoad) reply(reply []byte, at time.Time) {
	var nonce int64
	var err error
	if b.kind == KindAS {
		var more bool
		if nonce, more, err = b.cy.loginReply(b.c, b.q, reply); more {
			if err != nil {
				// The error answers the oldest login waiting for this kind of answer.
				if i := b.q.oldest(b.cy.slots, krb5.StageFirst, krb5.StageSupport); i >= 0 {
					b.finish(i, at, err)
				}
			}
			return
		}
	} else {
		nonce, err = b.c.OpenServiceTicketReply(reply)
	}
	if err == nil {
		if i, found := b.cy.byNonce[nonce]; found {
			if b.kind == KindAS {
				b.methods[b.cy.slots[i].fl.Stage]++
			}
			b.finish(i, at, nil)
			if b.limit > 0 && b.ok.Add(1) >= b.limit {
				b.stop.Store(true)
			}
		}
		return // else a duplicate reply to a resent request
	}
	// An error names no request: it ends the oldest.
	if i := b.cy.oldest(); i >= 0 {
		b.finish(i, at, err)
	}
}

// kindPhase is the round trip a request of the load is in.
func kindPhase(kind string) string {
	if kind == KindAS {
		return krb5.PhaseASRep
	}
	return krb5.PhaseTGSRep
}
