package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// Sessions on the raw-socket generator: the latency load (open loop) and
// the degradation rounds. A session is a login (every round trip of a
// fresh kinit -k) followed at once by its tickets, one request at a time,
// made by one engine client that owns one raw UDP socket while the
// session runs, so every datagram on that socket answers it. One
// goroutine per CPU, locked to its thread, starts the sessions due by
// the schedule (session i at start + i/rate; no goroutine per session),
// sends with raw system calls and waits for every socket of its sessions
// in flight and for the next due time in one ppoll. Latencies use the
// kernel's arrival stamps.

// sessionSlot is one engine client and its socket, with the session it
// runs.
type sessionSlot struct {
	c    *krb5.Client
	svcs []*krb5.Service
	next int // the next service
	u    *rawUDP

	busy    bool
	login   bool      // in the login; else in the tickets
	due     time.Time // scheduled start: the login's latency counts from it
	tickets int       // tickets requested so far
	fl      krb5.LoginFlight
	buf     []byte // the request in flight, kept for resends
	nonce   int64
	first   time.Time // first send of the request in flight
	last    time.Time // last send
	resends int
	failed  bool // a request of the session failed
}

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
}

// runSessions makes plan's sessions with clients engine clients spread
// over one locked goroutine per CPU (at most one per client); session i
// goes to goroutine i mod g.
func (r *run) runSessions(ctx context.Context, plan sessionPlan, clients int) (*sessionResult, error) {
	g := max(1, min(clients, runtime.GOMAXPROCS(0)))
	slots := make([][]*sessionSlot, g)
	defer func() {
		for _, ss := range slots {
			for _, s := range ss {
				s.c.Close()
				if s.u != nil {
					s.u.close()
				}
			}
		}
	}()
	for i := 1; i <= clients; i++ {
		c, err := r.fleet.client(i, krb5.UDP)
		if err != nil {
			return nil, err
		}
		s := &sessionSlot{c: c}
		w := (i - 1) % g
		slots[w] = append(slots[w], s)
		for k := 0; k < max(1, r.sys.Services) && plan.tgsPer > 0; k++ {
			s.svcs = append(s.svcs, r.fleet.service(c, (i+k-1)%max(1, r.sys.Services)+1))
		}
		// Room for a reply and a duplicate of it (a resent request).
		if s.u, err = dialRawUDP(r.sys.KDC, 4); err != nil {
			return nil, err
		}
	}
	res := make([]sessionResult, g)
	errs := make([]error, g)
	r.resetErrors()
	a := r.sampler.read()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = r.sessionWorker(ctx, plan, slots[w], w, g, start, &res[w])
		}()
	}
	wg.Wait()
	out := &sessionResult{wall: time.Since(start)}
	b := r.sampler.read()
	for w := range res {
		out.recs = append(out.recs, res[w].recs...)
		out.late = append(out.late, res[w].late...)
		out.failed += res[w].failed
	}
	out.cpu = cpuUse(a, b, len(out.recs))
	for _, err := range errs {
		if err != nil {
			return out, err
		}
	}
	return out, ctx.Err()
}

func (r *run) sessionWorker(ctx context.Context, plan sessionPlan, slots []*sessionSlot, first, step int, start time.Time, out *sessionResult) error {
	// The raw system calls below block this thread, not the scheduler.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var methods [krb5.StageResponse + 1]int
	defer func() {
		for st, n := range methods {
			r.method(stageMethod(krb5.LoginStage(st)), n)
		}
	}()
	due := func(i int) time.Time {
		return start.Add(time.Duration(float64(i) / plan.rate * float64(time.Second)))
	}
	// end closes the session in s.
	end := func(s *sessionSlot) {
		if s.failed {
			out.failed++
		}
		s.busy = false
	}
	pfds := make([]unix.PollFd, 0, len(slots))
	pslot := make([]*sessionSlot, 0, len(slots))
	next := first
	for {
		if err := ctx.Err(); err != nil {
			return nil // the caller reports the interruption
		}
		now := time.Now()
		// Start every session that is due, while a client is free.
		free := true
		for next < plan.n && free {
			d := now
			if plan.rate > 0 {
				if d = due(next); d.After(now) {
					break
				}
			}
			free = false
			for _, s := range slots {
				if s.busy {
					continue
				}
				free = true
				if plan.rate > 0 {
					out.late = append(out.late, now.Sub(d))
				}
				r.startSession(s, d, now, start, plan, out, end)
				next += step
				break
			}
		}
		// Resend the unanswered, end the timed out.
		busy := false
		for _, s := range slots {
			if !s.busy {
				continue
			}
			switch {
			case now.Sub(s.first) >= r.set.Timeout: // per round trip, as the blocking client
				r.requestDone(s, now, start, plan, out, end, &krb5.Error{Class: krb5.ClassTimeout, Phase: slotPhase(s), Err: os.ErrDeadlineExceeded})
			case now.Sub(s.last) >= batchedRetransmit<<s.resends:
				s.resends++
				r.sendSlot(s, now, false, start, plan, out, end)
			}
			busy = busy || s.busy
		}
		if next >= plan.n && !busy {
			return nil
		}
		// Wait for a reply to any session in flight, or until the next
		// session is due (when a client is free for it), waking at least
		// every 100 ms to resend and time out.
		wait := 100 * time.Millisecond
		if next < plan.n && free && plan.rate > 0 {
			wait = min(wait, time.Until(due(next)))
		}
		pfds, pslot = pfds[:0], pslot[:0]
		for _, s := range slots {
			if s.busy {
				pfds = append(pfds, unix.PollFd{Fd: int32(s.u.fd), Events: unix.POLLIN})
				pslot = append(pslot, s)
			}
		}
		if wait > 0 {
			if err := ppoll(pfds, wait); err != nil {
				return fmt.Errorf("poll: %w", err)
			}
		}
		for k, s := range pslot {
			if wait > 0 && pfds[k].Revents == 0 {
				continue
			}
			n, err := s.u.recv()
			if err != nil {
				if isRefused(err) {
					r.requestDone(s, time.Now(), start, plan, out, end, &krb5.Error{Class: krb5.ClassConnectionRefused, Phase: slotPhase(s), Err: err})
					continue
				}
				return fmt.Errorf("receive: %w", err)
			}
			now := time.Now()
			for j := 0; j < n && s.busy; j++ {
				reply, at := s.u.msg(j, now)
				r.sessionReply(s, reply, at, now, start, plan, out, end, &methods)
			}
		}
	}
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

func slotPhase(s *sessionSlot) string {
	if s.login {
		return krb5.PhaseASRep
	}
	return krb5.PhaseTGSRep
}

// startSession begins a session due at d in s: its first AS-REQ.
func (r *run) startSession(s *sessionSlot, d, now, start time.Time, plan sessionPlan, out *sessionResult, end func(*sessionSlot)) {
	s.busy, s.login, s.due, s.tickets, s.failed = true, true, d, 0, false
	s.fl = krb5.LoginFlight{}
	buf, err := s.c.EncodeLoginFirst(s.buf[:0], &s.fl)
	if err != nil {
		r.requestDone(s, now, start, plan, out, end, err)
		return
	}
	s.buf, s.nonce = buf, s.fl.Nonce
	r.sendSlot(s, now, true, start, plan, out, end)
}

// sendSlot (re)sends s's request; a refused send fails it.
func (r *run) sendSlot(s *sessionSlot, now time.Time, fresh bool, start time.Time, plan sessionPlan, out *sessionResult, end func(*sessionSlot)) {
	if fresh {
		s.first, s.resends = now, 0
	}
	s.last = now
	s.u.queue(s.buf)
	if err := s.u.send(); err != nil {
		r.requestDone(s, now, start, plan, out, end, &krb5.Error{Class: krb5.ClassConnectionRefused, Phase: slotPhase(s), Err: err})
	}
}

// requestDone records s's request in flight as answered at `at` (err nil)
// or failed, and moves the session on: after its login, to its tickets
// (none when the login failed); after a ticket, to the next.
func (r *run) requestDone(s *sessionSlot, at, start time.Time, plan sessionPlan, out *sessionResult, end func(*sessionSlot), err error) {
	if err != nil {
		s.failed = true
	}
	if s.login {
		out.recs = append(out.recs, r.note(record{Start: s.due.Sub(start), Latency: at.Sub(s.due), Kind: kindAS, Class: krb5.Classify(err)}, err))
		s.login = false
		if err != nil {
			end(s)
			return
		}
	} else {
		out.recs = append(out.recs, r.note(record{Start: s.first.Sub(start), Latency: at.Sub(s.first), Kind: kindTGS, Class: krb5.Classify(err)}, err))
	}
	if s.tickets >= plan.tgsPer {
		end(s)
		return
	}
	s.tickets++
	now := time.Now()
	buf, nonce, err := s.c.EncodeServiceTicket(s.buf[:0], s.svcs[s.next%len(s.svcs)])
	s.next++
	if err != nil {
		r.requestDone(s, now, start, plan, out, end, err)
		return
	}
	s.buf, s.nonce = buf, nonce
	r.sendSlot(s, now, true, start, plan, out, end)
}

// sessionReply handles a datagram on s's socket: the answer to its
// request in flight, or a late duplicate of an earlier answer (a resent
// request), which is dropped.
func (r *run) sessionReply(s *sessionSlot, reply []byte, at, now, start time.Time, plan sessionPlan, out *sessionResult, end func(*sessionSlot), methods *[krb5.StageResponse + 1]int) {
	if !s.login {
		nonce, err := s.c.OpenServiceTicketReply(reply)
		if err == nil && nonce != s.nonce {
			return // an answer to an earlier request
		}
		r.requestDone(s, at, start, plan, out, end, err)
		return
	}
	kind, err := s.c.ReadLoginReply(reply)
	if err != nil && s.fl.Stage == krb5.StageSupport {
		// PREAUTH_FAILED: the KDC shares no SPAKE group with us; under
		// auto, encrypted timestamp next, as kinit does.
		var fallback bool
		if fallback, err = s.c.SPAKERefused(err); fallback {
			kind = krb5.ReplyMoreData
		}
	}
	switch {
	case err != nil:
		r.requestDone(s, at, start, plan, out, end, err)
	case kind == krb5.ReplyPreauthRequired && s.fl.Stage != krb5.StageFirst,
		kind == krb5.ReplyMoreData && s.fl.Stage != krb5.StageSupport:
		// An answer to an earlier round trip of this login.
	case kind == krb5.ReplyPreauthRequired || kind == krb5.ReplyMoreData:
		buf, err := s.c.EncodeLoginNext(s.buf[:0], &s.fl)
		if err != nil {
			r.requestDone(s, at, start, plan, out, end, err)
			return
		}
		s.buf, s.nonce = buf, s.fl.Nonce
		r.sendSlot(s, now, true, start, plan, out, end)
	default: // an AS-REP
		stage := s.fl.Stage
		nonce, err := s.c.OpenLoginFlight(reply, &s.fl)
		switch {
		case err == nil && nonce != s.nonce,
			// A SPAKE AS-REP of an earlier login of this client (a resent
			// response): another K'[0]. Were it a KDC fault instead, the
			// login times out.
			err != nil && krb5.Classify(err) == krb5.ClassDecrypt && stage == krb5.StageResponse:
			return
		case err == nil:
			methods[stage]++
		}
		r.requestDone(s, at, start, plan, out, end, err)
	}
}
