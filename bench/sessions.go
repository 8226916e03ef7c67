package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// Sessions on the batched generator (pipeline.go): the latency load (open
// loop) and the degradation rounds. A session is a login (every round
// trip of a fresh kinit -k) followed at once by its tickets, one request
// at a time, each ticket with the TGT of the session's own login. One
// goroutine runs every session with one engine client (one user) and one
// connected raw UDP socket: the requests of all sessions in flight go out
// in one sendmmsg per cycle, every reply waiting comes in with one
// recvmmsg, and replies are matched to sessions as in the as and tgs
// loads: a KRB-ERROR asking for pre-authentication answers the login
// waiting longest for one (stage queues), an AS-REP names its login by the
// nonce inside, a TGS-REP by the nonce inside once opened with its
// session's TGT (the sessions waiting for a ticket are tried oldest first:
// the KDC answers in order, so the first try nearly always opens it).
//
// In the open loop session i is due at start + i/rate; it starts when due
// (waits are timed to the schedule) if one of the slots (the clients
// the load simulates) is free, else as soon as one is, and its login's
// latency counts from the schedule. Replies are taken as they come (no
// batching wait: a session's next request would wait with it, and the
// login's latency with it). The closed loop (degradation) starts each
// session as soon as a slot is free and lets replies gather as the as
// load does. Latencies use the kernel's arrival stamps.

// sessionPlan is what a run of sessions makes.
type sessionPlan struct {
	n      int     // sessions
	rate   float64 // per second; 0: each as soon as a client is free (closed loop)
	tgsPer int     // tickets per login
}

// sessionResult is what a run of sessions measured.
type sessionResult struct {
	recs   []record
	late   []time.Duration // per session started (open loop)
	failed int             // sessions with a failed request
	wall   time.Duration
	cpu    CPUUse
	waits  int // times the generator blocked
}

// runSessions makes plan's sessions with at most clients of them in
// flight.
func (r *run) runSessions(ctx context.Context, plan sessionPlan, clients int) (*sessionResult, error) {
	depth := max(1, clients)
	c, err := r.fleet.client(1, krb5.UDP)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var svcs []*krb5.Service
	for k := 0; k < max(1, r.sys.Services) && plan.tgsPer > 0; k++ {
		svcs = append(svcs, r.fleet.service(c, k+1))
	}
	// A receive batch for every reply in flight and a duplicate of each
	// (resends), at most 64 (8 KiB each; more wait for the next receive).
	u, err := dialRawUDP(r.sys.KDC, min(2*depth, 64))
	if err != nil {
		return nil, err
	}
	defer u.close()
	r.resetErrors()
	out := &sessionResult{}
	var log recordLog
	a := r.sampler.read()
	start := time.Now()
	err = r.sessionWorker(ctx, plan, c, svcs, u, depth, start, out, &log)
	out.wall = time.Since(start)
	b := r.sampler.read()
	out.recs = log.appendTo(nil)
	out.waits = log.waits
	out.cpu = cpuUse(a, b, len(out.recs))
	if err != nil {
		return out, err
	}
	return out, ctx.Err()
}

// sessionState is what a slot (slot.sess) keeps of its session.
type sessionState struct {
	login   bool      // in the login; else in its tickets
	due     time.Time // scheduled start: the login's latency counts from it
	tickets int       // tickets requested so far
	svc     int       // the next service
	failed  bool      // a request of the session failed
	rtFirst time.Time // first send of the request in flight
	tgt     krb5.TGT  // the session's TGT, once its login succeeded
}

func (r *run) sessionWorker(ctx context.Context, plan sessionPlan, c *krb5.Client, svcs []*krb5.Service, u *rawUDP, depth int,
	start time.Time, out *sessionResult, log *recordLog) error {
	// Not locked to its thread: see batchedWorker (raw system calls keep
	// the P; a scheduling point every yieldEvery).
	slots := make([]slot, depth)
	ss := make([]sessionState, depth)
	var methods [krb5.StageResponse + 1]int
	defer func() {
		for st, n := range methods {
			r.method(stageMethod(krb5.LoginStage(st)), n)
		}
	}()
	bySlot := make(map[int64]int, depth)
	q := newStageQueues(depth)  // logins in flight, by stage
	tq := newStageQueues(depth) // tickets in flight (stage StageFirst)
	var seq uint64
	// assign records that slot i has a new request in flight, to be sent.
	assign := func(i int) {
		seq++
		s := &slots[i]
		s.seq, s.send = seq, true
		if ss[i].login {
			q.push(slots, s.fl.Stage, i, seq)
		} else {
			tq.push(slots, krb5.StageFirst, i, seq)
		}
	}
	due := func(i int) time.Time {
		return start.Add(time.Duration(float64(i) / plan.rate * float64(time.Second)))
	}
	// ask puts a new request (buf, nonce) in flight in slot i: sent with
	// the next batch.
	ask := func(i int, buf []byte, nonce int64, now time.Time) {
		s := &slots[i]
		delete(bySlot, s.nonce)
		s.buf, s.nonce, s.resends, s.last = buf, nonce, 0, now
		ss[i].rtFirst = now
		bySlot[nonce] = i
		assign(i)
	}
	// done records slot i's request in flight as answered at `at` (err
	// nil) or failed, and moves its session on: after its login, to its
	// tickets (none when the login failed); after a ticket, to the next.
	var done func(i int, at time.Time, err error)
	endSession := func(i int) {
		s := &slots[i]
		delete(bySlot, s.nonce)
		if ss[i].failed {
			out.failed++
		}
		s.busy, s.send = false, false
	}
	done = func(i int, at time.Time, err error) {
		s, x := &slots[i], &ss[i]
		if err != nil {
			x.failed = true
		}
		if x.login {
			log.add(r.note(record{Start: x.due.Sub(start), Latency: at.Sub(x.due), Kind: kindAS, Class: krb5.Classify(err)}, err))
			x.login = false
			if err != nil {
				endSession(i)
				return
			}
		} else {
			log.add(r.note(record{Start: x.rtFirst.Sub(start), Latency: at.Sub(x.rtFirst), Kind: kindTGS, Class: krb5.Classify(err)}, err))
		}
		if x.tickets >= plan.tgsPer {
			endSession(i)
			return
		}
		x.tickets++
		now := time.Now()
		c.SwapTGT(&x.tgt)
		buf, nonce, err := c.EncodeServiceTicket(s.buf[:0], svcs[x.svc%len(svcs)])
		c.SwapTGT(&x.tgt)
		x.svc++
		if err != nil {
			x.rtFirst = now
			done(i, now, err)
			return
		}
		ask(i, buf, nonce, now)
	}
	// startSession begins a session due at d in free slot i: its first
	// AS-REQ.
	startSession := func(i int, d, now time.Time) {
		s, x := &slots[i], &ss[i]
		s.busy, s.first, s.fl = true, now, krb5.LoginFlight{}
		x.login, x.due, x.tickets, x.failed = true, d, 0, false
		buf, err := c.EncodeLoginFirst(s.buf[:0], &s.fl)
		if err != nil {
			x.rtFirst = now
			done(i, now, err)
			return
		}
		ask(i, buf, s.fl.Nonce, now)
	}
	// oldest is the slot whose request in flight was sent first, or -1.
	oldest := func() int {
		o := -1
		for i := range slots {
			if slots[i].busy && (o < 0 || ss[i].rtFirst.Before(ss[o].rtFirst)) {
				o = i
			}
		}
		return o
	}
	refused := func(err error) {
		if i := oldest(); i >= 0 {
			done(i, time.Now(), &krb5.Error{Class: krb5.ClassConnectionRefused, Phase: sessionPhase(&ss[i]), Err: err})
		}
	}
	open := plan.rate > 0
	batch := max(1, depth/2)
	next, answered, inflight := 0, 0, 0
	yielded := start
	for {
		if ctx.Err() != nil {
			return nil // the caller reports the interruption
		}
		now := time.Now()
		// Start every session that is due, while a slot is free.
		free := true
		for next < plan.n {
			d := now
			if open {
				if d = due(next); d.After(now) {
					break
				}
			}
			i := -1
			for k := range slots {
				if !slots[k].busy {
					i = k
					break
				}
			}
			if i < 0 {
				free = false
				break
			}
			if open {
				out.late = append(out.late, now.Sub(d))
			}
			next++
			startSession(i, d, now)
		}
		// Send what is new, resend the unanswered, end the timed out.
		inflight = 0
		for i := range slots {
			s := &slots[i]
			if !s.busy {
				continue
			}
			switch {
			case s.send:
				s.send, s.last = false, now
			case now.Sub(ss[i].rtFirst) >= r.set.Timeout: // per round trip, as the blocking client
				done(i, now, &krb5.Error{Class: krb5.ClassTimeout, Phase: sessionPhase(&ss[i]), Err: os.ErrDeadlineExceeded})
				if s.busy && s.send { // the session's next ticket
					s.send, s.last = false, now
					break
				}
				continue
			case now.Sub(s.last) >= batchedRetransmit<<s.resends:
				s.resends++
				s.last = now
			default:
				inflight++
				continue
			}
			inflight++
			u.queue(s.buf)
		}
		if err := u.send(); isRefused(err) {
			refused(err) // names no request: it ends the oldest
		} else if err != nil {
			return fmt.Errorf("send: %w", err)
		}
		if next >= plan.n && inflight == 0 {
			return nil
		}
		if now.Sub(yielded) >= yieldEvery {
			runtime.Gosched() // see batchedWorker
			yielded = now
		}
		// Closed loop with enough in flight: let a batch of replies
		// gather (see batchedWorker).
		if !open && answered > 0 && inflight > 0 && depth >= 8 {
			per := now.Sub(start) / time.Duration(answered)
			rawSleep(min(max(per*time.Duration(batch), minBatchWait), maxBatchWait))
			log.waits++
		}
		// The open loop takes replies as they come: one poll, then one
		// receive. The closed loop has slept: it receives first and polls
		// only when nothing came.
		n, err := 0, error(nil)
		if !open {
			n, err = u.recv()
		}
		if n == 0 && err == nil {
			// Block until a reply comes or the next session is due,
			// waking at least every 100 ms to resend and time out.
			wait := 100 * time.Millisecond
			if open && next < plan.n && free {
				wait = min(wait, time.Until(due(next)))
			}
			if wait > 0 {
				log.waits++
				if err := u.waitReadable(wait); err != nil {
					return fmt.Errorf("poll: %w", err)
				}
			}
			if wait > 0 || open {
				n, err = u.recv()
			}
		}
		if err != nil {
			if isRefused(err) {
				refused(err)
				continue
			}
			return fmt.Errorf("receive: %w", err)
		}
		answered += n
		now = time.Now()
		for j := range n {
			reply, at := u.msg(j, now)
			r.sessionReply(c, slots, ss, q, tq, bySlot, reply, at, assign, done, oldest, &methods)
		}
	}
}

// sessionReply handles one reply of the session load.
func (r *run) sessionReply(c *krb5.Client, slots []slot, ss []sessionState, q, tq *stageQueues, bySlot map[int64]int, reply []byte, at time.Time,
	assign func(int), done func(int, time.Time, error), oldest func() int, methods *[krb5.StageResponse + 1]int) {
	if len(reply) > 0 && reply[0] == tgsRepTag {
		// The sessions waiting for a ticket, oldest first, until one's
		// TGT opens it.
		for _, e := range tq.live(slots, krb5.StageFirst) {
			i := e.slot
			if s := &slots[i]; !s.busy || s.seq != e.seq || ss[i].login {
				continue // stale
			}
			c.SwapTGT(&ss[i].tgt)
			nonce, err := c.OpenServiceTicketReply(reply)
			c.SwapTGT(&ss[i].tgt)
			if err != nil && krb5.Classify(err) == krb5.ClassDecrypt {
				continue
			}
			if err == nil && (nonce != slots[i].nonce) {
				return // an answer to an earlier (resent) ticket of this session
			}
			done(i, at, err)
			return
		}
		return // a duplicate answer to a session already ended
	}
	// A login's answer, or a KRB-ERROR.
	nonce, more, err := r.loginReply(c, slots, q, bySlot, reply, func(i int) {
		// The login goes on: its next request, sent with the next batch.
		ss[i].rtFirst, slots[i].last = at, at
		assign(i)
	})
	if more {
		if err != nil {
			if i := q.oldest(slots, krb5.StageFirst, krb5.StageSupport); i >= 0 {
				done(i, at, err)
			}
		}
		return
	}
	if err == nil {
		i, found := bySlot[nonce]
		if !found || !ss[i].login {
			return // a duplicate answer to a resent request
		}
		c.SwapTGT(&ss[i].tgt) // the login's TGT, for its tickets
		methods[slots[i].fl.Stage]++
		done(i, at, nil)
		return
	}
	// An error names no request: it ends the oldest.
	if i := oldest(); i >= 0 {
		done(i, at, err)
	}
}

// tgsRepTag is the first octet of a TGS-REP ([APPLICATION 13]).
const tgsRepTag = 0x6d

func sessionPhase(x *sessionState) string {
	if x.login {
		return krb5.PhaseASRep
	}
	return krb5.PhaseTGSRep
}

// ppoll waits for any of fds to be readable, at most d, blocking the
// thread (see rawSleep); with no fds it sleeps.
func ppoll(fds []unix.PollFd, d time.Duration) error {
	ts := unix.NsecToTimespec(int64(d))
	var p unsafe.Pointer
	if len(fds) > 0 {
		p = unsafe.Pointer(&fds[0])
	}
	_, _, e := unix.RawSyscall6(unix.SYS_PPOLL, uintptr(p), uintptr(len(fds)), uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	if e != 0 && e != unix.EINTR {
		return e
	}
	return nil
}
