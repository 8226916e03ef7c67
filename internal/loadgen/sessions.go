package loadgen

import (
	"context"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// Sessions on the UDP cycle (udp.go): the latency load (open loop) and
// the degradation rounds. A session is a login (every round trip of a
// fresh kinit -k) followed at once by its tickets, one request at a time,
// each ticket with the TGT of the session's own login. One goroutine runs
// every session with one engine client (one user) and one connected raw
// UDP socket: the requests of all sessions in flight go out in one
// sendmmsg per cycle, every reply waiting comes in with one recvmmsg, and
// replies are matched to sessions as in the as and tgs loads: a
// KRB-ERROR asking for pre-authentication answers the login waiting
// longest for one (stage queues), an AS-REP names its login by the nonce
// inside, a TGS-REP by the nonce inside once opened with its session's
// TGT (the sessions waiting for a ticket are tried oldest first: the KDC
// answers in order, so the first try nearly always opens it).
//
// In the open loop session i is due at start + i/rate; it starts when due
// (waits are timed to the schedule) if one of the slots (the clients
// the load simulates) is free, else as soon as one is, and its login's
// latency counts from the schedule. Replies are taken as they come (no
// batching wait: a session's next request would wait with it, and the
// login's latency with it). The closed loop (degradation) starts each
// session as soon as a slot is free and lets replies gather as the as
// load does. Latencies use the kernel's arrival stamps.

// SessionPlan is what a run of sessions makes.
type SessionPlan struct {
	N      int     // sessions
	Rate   float64 // per second; 0: each as soon as a client is free (closed loop)
	TGSPer int     // tickets per login
}

// Sessions makes plan's sessions with at most clients of them in flight.
// The result has a record per request, Late (open loop), Failed and
// Waits.
func Sessions(ctx context.Context, cfg Config, plan SessionPlan, clients int) (*Result, error) {
	depth := max(1, clients)
	c, err := cfg.Client(1, krb5.UDP)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var svcs []*krb5.Service
	if plan.TGSPer > 0 {
		svcs = cfg.services(c, 1)
	}
	// A receive batch for every reply in flight and a duplicate of each
	// (resends), at most 64 (8 KiB each; more wait for the next receive).
	u, err := dialRawUDP(cfg.KDC, min(2*depth, 64))
	if err != nil {
		return nil, err
	}
	defer u.close()
	s := &sessionLoad{c: c, svcs: svcs, plan: plan, tl: newTally(&cfg),
		ss: make([]sessionState, depth), q: newStageQueues(depth), tq: newStageQueues(depth)}
	s.cy = newUDPCycle(u, depth, cfg.Timeout, plan.Rate <= 0, &s.out)
	cfg.measure()
	s.start = time.Now()
	err = s.cy.run(ctx, s, s.start)
	res := &Result{Wall: time.Since(s.start)}
	cfg.measure()
	s.tl.stages(&s.methods)
	res.Records = s.out.appendTo(nil)
	res.Waits, res.Late, res.Failed = s.out.waits, s.late, s.failed
	s.tl.result(res)
	if err != nil {
		return res, err
	}
	return res, ctx.Err()
}

// sessionState is what a slot keeps of its session.
type sessionState struct {
	login   bool      // in the login; else in its tickets
	due     time.Time // scheduled start: the login's latency counts from it
	tickets int       // tickets requested so far
	svc     int       // the next service
	failed  bool      // a request of the session failed
	rtFirst time.Time // the ticket in flight was asked for: its latency counts from here
	tgt     krb5.TGT  // the session's TGT, once its login succeeded
}

// sessionLoad is the sessions on the UDP cycle.
type sessionLoad struct {
	c     *krb5.Client
	svcs  []*krb5.Service
	plan  SessionPlan
	cy    *udpCycle
	ss    []sessionState
	q     *stageQueues // logins in flight, by stage
	tq    *stageQueues // tickets in flight (stage StageFirst)
	start time.Time
	next  int  // the next session to start
	free  bool // the last fill found a free slot for every session due
	late  []time.Duration
	// failed counts the sessions with a failed request.
	failed  int
	out     recordLog
	tl      *tally
	methods [krb5.StageResponse + 1]int
}

func (s *sessionLoad) open() bool { return s.plan.Rate > 0 }

func (s *sessionLoad) due(i int) time.Time {
	return s.start.Add(time.Duration(float64(i) / s.plan.Rate * float64(time.Second)))
}

func (s *sessionLoad) over(time.Time) bool { return false }
func (s *sessionLoad) more() bool          { return s.next < s.plan.N }

// wake: the next session's schedule, when a slot will be free for it.
func (s *sessionLoad) wake() time.Time {
	if s.open() && s.next < s.plan.N && s.free {
		return s.due(s.next)
	}
	return time.Time{}
}

// fill starts every session that is due, while a slot is free.
func (s *sessionLoad) fill(c *udpCycle, now time.Time) {
	s.free = true
	for s.next < s.plan.N {
		d := now
		if s.open() {
			if d = s.due(s.next); d.After(now) {
				break
			}
		}
		i := -1
		for k := range c.slots {
			if !c.slots[k].busy {
				i = k
				break
			}
		}
		if i < 0 {
			s.free = false
			break
		}
		if s.open() {
			s.late = append(s.late, now.Sub(d))
		}
		s.next++
		s.startSession(i, d, now)
	}
}

// startSession begins a session due at d in free slot i: its first
// AS-REQ.
func (s *sessionLoad) startSession(i int, d, now time.Time) {
	sl, x := &s.cy.slots[i], &s.ss[i]
	// The slot's flight keeps its K'[0] (or the one retire gave it) for
	// reuse; EncodeLoginFirst sets the rest.
	sl.busy, sl.first, sl.fl.Stage = true, now, krb5.StageFirst
	x.login, x.due, x.tickets, x.failed = true, d, 0, false
	buf, err := s.c.EncodeLoginFirst(sl.buf[:0], &sl.fl)
	if err != nil {
		s.finish(i, now, err)
		return
	}
	s.cy.ask(i, buf, sl.fl.Nonce)
}

func (s *sessionLoad) sent(i int) {
	sl := &s.cy.slots[i]
	if s.ss[i].login {
		s.q.push(s.cy.slots, sl.fl.Stage, i, sl.seq)
	} else {
		s.tq.push(s.cy.slots, krb5.StageFirst, i, sl.seq)
	}
}

func (s *sessionLoad) phase(i int) string {
	if s.ss[i].login {
		return krb5.PhaseASRep
	}
	return krb5.PhaseTGSRep
}

// endSession frees slot i.
func (s *sessionLoad) endSession(i int) {
	if s.ss[i].failed {
		s.failed++
	}
	s.cy.end(i)
}

// finish records slot i's request in flight as answered at `at` (err
// nil) or failed, and moves its session on: after its login, to its
// tickets (none when the login failed); after a ticket, to the next.
func (s *sessionLoad) finish(i int, at time.Time, err error) {
	sl, x := &s.cy.slots[i], &s.ss[i]
	if err != nil {
		x.failed = true
	}
	if x.login {
		s.out.add(s.tl.note(Record{Start: x.due.Sub(s.start), Latency: at.Sub(x.due), Kind: KindAS, Class: krb5.Classify(err)}, err))
		x.login = false
		s.q.retire(&sl.fl)
		if err != nil {
			s.endSession(i)
			return
		}
	} else {
		s.out.add(s.tl.note(Record{Start: x.rtFirst.Sub(s.start), Latency: at.Sub(x.rtFirst), Kind: KindTGS, Class: krb5.Classify(err)}, err))
	}
	if x.tickets >= s.plan.TGSPer {
		s.endSession(i)
		return
	}
	x.tickets++
	now := time.Now()
	x.rtFirst = now
	s.c.SwapTGT(&x.tgt)
	buf, nonce, err := s.c.EncodeServiceTicket(sl.buf[:0], s.svcs[x.svc%len(s.svcs)])
	s.c.SwapTGT(&x.tgt)
	x.svc++
	if err != nil {
		s.finish(i, now, err)
		return
	}
	s.cy.ask(i, buf, nonce)
}

// reply handles one reply of the session load.
func (s *sessionLoad) reply(reply []byte, at time.Time) {
	slots := s.cy.slots
	if len(reply) > 0 && reply[0] == tgsRepTag {
		// The sessions waiting for a ticket, oldest first, until one's
		// TGT opens it.
		for _, e := range s.tq.live(slots, krb5.StageFirst) {
			i := e.slot
			if sl := &slots[i]; !sl.busy || sl.seq != e.seq || s.ss[i].login {
				continue // stale
			}
			s.c.SwapTGT(&s.ss[i].tgt)
			nonce, err := s.c.OpenServiceTicketReply(reply)
			s.c.SwapTGT(&s.ss[i].tgt)
			if err != nil && krb5.Classify(err) == krb5.ClassDecrypt {
				continue
			}
			if err == nil && nonce != slots[i].nonce {
				return // an answer to an earlier (resent) ticket of this session
			}
			s.finish(i, at, err)
			return
		}
		return // a duplicate answer to a session already ended
	}
	// A login's answer, or a KRB-ERROR.
	nonce, more, err := s.cy.loginReply(s.c, s.q, reply)
	if more {
		if err != nil {
			if i := s.q.oldest(slots, krb5.StageFirst, krb5.StageSupport); i >= 0 {
				s.finish(i, at, err)
			}
		}
		return
	}
	if err == nil {
		i, found := s.cy.byNonce[nonce]
		if !found || !s.ss[i].login {
			return // a duplicate answer to a resent request
		}
		s.c.SwapTGT(&s.ss[i].tgt) // the login's TGT, for its tickets
		s.methods[slots[i].fl.Stage]++
		s.finish(i, at, nil)
		return
	}
	// An error names no request: it ends the oldest.
	if i := s.cy.oldest(); i >= 0 {
		s.finish(i, at, err)
	}
}

// tgsRepTag is the first octet of a TGS-REP ([APPLICATION 13]).
const tgsRepTag = 0x6d
