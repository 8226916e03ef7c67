package loadgen

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// The UDP request cycle shared by the batched as and tgs loads
// (batched.go) and the sessions (sessions.go). One goroutine drives one
// connected raw socket (rawudp.go) with many requests in flight, each in
// a slot, and loops:
//
//  1. the load fills its free slots (new logins, tickets, sessions due);
//  2. every request not sent yet goes out, an unanswered one is resent
//     after 1 s, 2 s, ... as libkrb5 does, and one unanswered for Timeout
//     since its round trip's first send times out: the timeout is per
//     round trip, as report.Settings.Timeout documents and as the
//     blocking client's engine applies it, so a login of two or three
//     round trips is not held to one round trip's budget;
//  3. one sendmmsg for all of them;
//  4. in a closed loop with enough in flight, a sleep while a batch of
//     replies gathers (the time the KDC took for a batch so far; the
//     kernel's arrival stamps keep the latencies exact);
//  5. recvmmsg for the replies waiting, 32 at a time (rawUDP.recv), or a
//     poll until one comes (or the load's next event, or 100 ms, to
//     resend and time out);
//  6. the load matches each reply to its request (each chunk's before
//     the next is read).

// slot is one request in flight on the cycle.
type slot struct {
	buf     []byte // the encoded request, kept for resends
	nonce   int64
	first   time.Time // the login's first send (batched loads: its latency counts from here)
	sent    time.Time // this round trip's first send: its timeout counts from here
	last    time.Time // last send
	resends int
	busy    bool
	send    bool             // encoded, to go out with the next batch
	seq     uint64           // the order of first sends (0: not sent yet)
	fl      krb5.LoginFlight // logins: the stage and SPAKE key of the login
}

// udpLoad is what a load does on the cycle.
type udpLoad interface {
	// over: stop now (requests in flight are cut off).
	over(now time.Time) bool
	// fill gives free slots their next request (udpCycle.ask).
	fill(c *udpCycle, now time.Time)
	// more: requests are still to be started; when none is and none is
	// in flight, the load is done.
	more() bool
	// wake is when the load must act next without a reply (its end, the
	// next session due), zero for never.
	wake() time.Time
	// sent: slot i's request went out for the first time (seq given).
	sent(i int)
	// finish ends slot i's request in flight (err nil: answered) or with err: a timeout, a send
	// refused, an error reply that names no request.
	finish(i int, at time.Time, err error)
	// phase is the round trip slot i's request is (krb5.Phase*).
	phase(i int) string
	// reply handles one datagram that arrived at `at`.
	reply(b []byte, at time.Time)
}

// udpCycle is the shared state of the cycle: the socket, the slots and
// the requests in flight by nonce.
type udpCycle struct {
	u       *rawUDP
	slots   []slot
	byNonce map[int64]int
	timeout time.Duration
	// gather: a closed loop, which lets replies gather between receives;
	// an open loop takes each as it comes (a session's next request, and
	// its latency, would wait with it).
	gather bool
	seq    uint64
	out    *recordLog
	fresh  []int // scratch: the slots whose request goes out for the first time
}

func newUDPCycle(u *rawUDP, depth int, timeout time.Duration, gather bool, out *recordLog) *udpCycle {
	return &udpCycle{u: u, slots: make([]slot, depth), fresh: make([]int, 0, depth), byNonce: make(map[int64]int, depth), timeout: timeout, gather: gather, out: out}
}

// ask puts the request buf (nonce) in slot i, to go out with the next
// batch; the slot's earlier request, if any, is no longer in flight.
func (c *udpCycle) ask(i int, buf []byte, nonce int64) {
	s := &c.slots[i]
	if j, ok := c.byNonce[s.nonce]; ok && j == i {
		delete(c.byNonce, s.nonce)
	}
	s.buf, s.nonce, s.busy, s.send, s.seq, s.resends = buf, nonce, true, true, 0, 0
	c.byNonce[nonce] = i
}

// end frees slot i.
func (c *udpCycle) end(i int) {
	s := &c.slots[i]
	if j, ok := c.byNonce[s.nonce]; ok && j == i {
		delete(c.byNonce, s.nonce)
	}
	s.busy, s.send = false, false
}

// oldest is the slot whose request in flight went out first, or -1. An
// answer that names no request (an error without a nonce, an ICMP port
// unreachable) most likely answers it: the KDC takes datagrams in the
// order they arrive, and they arrive in the order they were sent. Not the
// order requests were encoded in: a login's next request is encoded when
// its last answer is read and goes out with the next batch, and a request
// the full send buffer held back goes out with the resends. seq numbers
// the first sends; the stage queues keep the same order.
func (c *udpCycle) oldest() int {
	o := -1
	for i := range c.slots {
		if s := &c.slots[i]; s.busy && s.seq != 0 && (o < 0 || s.seq < c.slots[o].seq) {
			o = i
		}
	}
	return o
}

func (c *udpCycle) refused(l udpLoad, err error) {
	if i := c.oldest(); i >= 0 {
		l.finish(i, time.Now(), &krb5.Error{Class: krb5.ClassConnectionRefused, Phase: l.phase(i), Err: err})
	}
}

// run loops until the load is over or done, or ctx ends (the caller
// reports that).
func (c *udpCycle) run(ctx context.Context, l udpLoad, start time.Time) error {
	// The raw system calls below block this goroutine's thread and keep
	// its P (see rawSleep). The goroutine is not locked to the thread: the
	// runtime preempts a goroutine that has run 10 ms without a scheduling
	// point, which is every goroutine here, and a locked one is handed
	// from thread to thread through futex wake-ups each time.
	depth := len(c.slots)
	// A batch is half the slots: each cycle sleeps while about that many
	// replies come in, takes them with one recvmmsg and sends the
	// requests they free (about as many) with one sendmmsg; the other
	// half keeps the KDC's queue full meanwhile. A wake-up costs the
	// generator 20-50 µs of CPU on a virtual machine, the Kerberos work
	// of several logins: the fewer per request, the cheaper the
	// generator.
	batch := max(1, depth/2)
	answered := 0
	yielded := start
	for {
		now := time.Now()
		if ctx.Err() != nil || l.over(now) {
			return nil // requests still in flight are cut off
		}
		// Every free slot starts its next request at once, to go out in
		// this cycle's one sendmmsg: a cycle takes about a batch of
		// replies, so the sends are batched anyway, and the KDC's queue
		// stays full. (Refilling only once half the slots were free let
		// the queue run down to a batch while the generator slept for a
		// batch: the KDC idled 14-22 % of the time at 8 to 64 logins in
		// flight, 98-100 % busy at 2 and 4, which do not sleep.)
		l.fill(c, now)
		inflight := 0
		for i := range c.slots {
			s := &c.slots[i]
			if !s.busy {
				continue
			}
			switch {
			case s.send:
			case now.Sub(s.sent) >= c.timeout: // per round trip
				l.finish(i, now, &krb5.Error{Class: krb5.ClassTimeout, Phase: l.phase(i), Err: os.ErrDeadlineExceeded})
				if !s.busy || !s.send {
					continue
				}
				// The session's next request goes out now.
			case now.Sub(s.last) >= retransmit<<s.resends:
				s.resends++
				s.last = now
				inflight++
				c.u.queue(s.buf)
				continue
			default:
				inflight++
				continue
			}
			inflight++
			c.fresh = append(c.fresh, i)
		}
		// First sends in order of length (stable), so that runs of one
		// length go out as one message each (rawUDP.batch); they are
		// numbered in the order they go out.
		slices.SortStableFunc(c.fresh, func(a, b int) int { return len(c.slots[a].buf) - len(c.slots[b].buf) })
		for _, i := range c.fresh {
			s := &c.slots[i]
			c.seq++
			s.send, s.seq, s.sent, s.last = false, c.seq, now, now
			l.sent(i)
			c.u.queue(s.buf)
		}
		c.fresh = c.fresh[:0]
		if err := c.u.send(); isRefused(err) {
			// The kernel reports an ICMP port unreachable on the next
			// call; it names no request.
			c.refused(l, err)
		} else if err != nil {
			return fmt.Errorf("send: %w", err)
		}
		if inflight == 0 && !l.more() {
			return nil
		}
		// A scheduling point every few ms: the runtime preempts a
		// goroutine that has had none for 10 ms with a signal, which also
		// cuts the sleep short. Not every cycle: with an idle P, a yield
		// wakes a thread to look for work.
		if now.Sub(yielded) >= yieldEvery {
			runtime.Gosched()
			yielded = now
		}
		// With few in flight (a concurrency level of 1 or 2 clients) the
		// wait would only idle the KDC: take each reply as it comes.
		if c.gather && answered > 0 && inflight > 0 && depth >= 8 {
			per := now.Sub(start) / time.Duration(answered)
			rawSleep(until(min(max(per*time.Duration(batch), minBatchWait), maxBatchWait), now, l.wake()))
			c.out.waited(inflight)
		}
		// A closed loop has slept: it receives first and polls only when
		// nothing came. An open loop polls, then receives.
		n, err := 0, error(nil)
		if c.gather {
			n, err = c.u.recv()
		}
		if n == 0 && err == nil {
			// Block until a reply comes or the load's next event, waking
			// at least every 100 ms to resend and time out.
			wait := until(100*time.Millisecond, time.Now(), l.wake())
			if wait > 0 {
				c.out.waits++
				if err := c.u.waitReadable(wait); err != nil {
					return fmt.Errorf("poll: %w", err)
				}
			}
			if wait > 0 || !c.gather {
				n, err = c.u.recv()
			}
		}
		// The replies, a chunk at a time (rawUDP.recv): a full chunk may
		// have more behind it.
		for ; err == nil && n > 0; n, err = c.u.recv() {
			answered += n
			now = time.Now()
			for j := range n {
				b, at := c.u.msg(j, now)
				l.reply(b, at)
			}
			if n < c.u.chunk {
				break
			}
		}
		if err != nil {
			if isRefused(err) {
				c.refused(l, err)
				continue
			}
			return fmt.Errorf("receive: %w", err)
		}
	}
}

// until is d, or less when t (not zero) comes sooner after now.
func until(d time.Duration, now, t time.Time) time.Duration {
	if t.IsZero() {
		return d
	}
	return min(d, t.Sub(now))
}

// yieldEvery is how often a cycle yields to the scheduler.
const yieldEvery = 8 * time.Millisecond

// Bounds of the wait that lets replies gather between receives.
const (
	minBatchWait = 200 * time.Microsecond
	maxBatchWait = 20 * time.Millisecond
)

// retransmit is when an unanswered request is sent again (then after
// twice as long each time), as libkrb5 does.
const retransmit = time.Second

// rxTimestamp is the arrival time in a datagram's control messages, or
// def when there is none.
func rxTimestamp(oob []byte, def time.Time) time.Time {
	// Walk the control messages in place (unix.ParseSocketControlMessage
	// allocates a slice per datagram).
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		if h.Len < unix.SizeofCmsghdr || int(h.Len) > len(oob) {
			return def
		}
		data := oob[unix.CmsgLen(0):h.Len]
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_TIMESTAMPNS && len(data) >= int(unsafe.Sizeof(unix.Timespec{})) {
			ts := (*unix.Timespec)(unsafe.Pointer(&data[0]))
			return time.Unix(ts.Unix())
		}
		oob = oob[min(len(oob), unix.CmsgSpace(int(h.Len)-unix.CmsgLen(0))):]
	}
	return def
}

// stageQueues keeps the requests in flight of a cycle in the order they
// were first sent, one queue per login stage, so that the oldest request
// waiting for a kind of answer is found without scanning every slot. An
// entry is stale once its slot has a newer request (or none); stale
// entries are dropped from the front lazily.
type stageQueues struct {
	q [krb5.StageResponse + 1]fifo
	// ended keeps the last SPAKE logins ended (their K'[0] and nonce), to
	// know a second answer to one: a duplicated datagram, or a resent
	// response whose first answer came late and ended it. The KDC answers
	// in order, so that answer comes at most about the requests then in
	// flight after the first: two per slot are kept.
	ended []krb5.LoginFlight
	endAt int
}

type queued struct {
	slot int
	seq  uint64
}

// fifo is buf[head:]; the room before head is reused when buf is full.
type fifo struct {
	buf  []queued
	head int
}

func newStageQueues(depth int) *stageQueues {
	s := &stageQueues{ended: make([]krb5.LoginFlight, 2*max(1, depth))}
	for i := range s.q {
		s.q[i].buf = make([]queued, 0, 4*depth)
	}
	return s
}

func (s *stageQueues) push(slots []slot, st krb5.LoginStage, slot int, seq uint64) {
	f := &s.q[st]
	if len(f.buf) == cap(f.buf) {
		// Full: keep the live entries, in order, at the start.
		n := 0
		for _, e := range f.buf[f.head:] {
			if slots[e.slot].busy && slots[e.slot].seq == e.seq {
				f.buf[n] = e
				n++
			}
		}
		f.buf, f.head = f.buf[:n], 0
	}
	f.buf = append(f.buf, queued{slot, seq})
}

// retire keeps *f, a login just ended, when it was waiting for a SPAKE
// AS-REP; f gets the flight it replaces (its K'[0] reused by the slot's
// next SPAKE login).
func (s *stageQueues) retire(f *krb5.LoginFlight) {
	if f.Stage != krb5.StageResponse {
		return
	}
	s.ended[s.endAt], *f = *f, s.ended[s.endAt]
	s.endAt = (s.endAt + 1) % len(s.ended)
}

// duplicate reports whether reply, an AS-REP no login in flight opens,
// opens with the K'[0] of a SPAKE login ended lately and carries its
// nonce: a second answer to it, which names no request.
func (s *stageQueues) duplicate(cl *krb5.Client, reply []byte) bool {
	for i := range s.ended {
		f := &s.ended[(s.endAt+len(s.ended)-1-i)%len(s.ended)] // newest first
		if f.Stage != krb5.StageResponse {
			break // no older one kept yet
		}
		if nonce, err := cl.OpenLoginFlight(reply, f); err == nil {
			return nonce == f.Nonce
		}
	}
	return false
}

// live drops the stale entries at the front of stage st's queue and
// returns the queue, oldest first.
func (s *stageQueues) live(slots []slot, st krb5.LoginStage) []queued {
	f := &s.q[st]
	for f.head < len(f.buf) {
		if e := f.buf[f.head]; slots[e.slot].busy && slots[e.slot].seq == e.seq {
			break
		}
		f.head++
	}
	if f.head == len(f.buf) {
		f.buf, f.head = f.buf[:0], 0
	}
	return f.buf[f.head:]
}

// oldest is the slot whose request, in one of the stages, was sent
// first, or -1.
func (s *stageQueues) oldest(slots []slot, stages ...krb5.LoginStage) int {
	best, bestSeq := -1, uint64(0)
	for _, st := range stages {
		if q := s.live(slots, st); len(q) > 0 && (best < 0 || q[0].seq < bestSeq) {
			best, bestSeq = q[0].slot, q[0].seq
		}
	}
	return best
}

// loginReply handles a reply to a login on the cycle. A KRB-ERROR asking
// for more pre-authentication (more) answers the oldest login waiting
// for it, which goes on to its next request at once. An AS-REP is opened
// as the answer to a login waiting for one: a SPAKE AS-REP only opens
// with its own login's key, so the SPAKE logins are tried oldest first;
// any other opens with the long-term key. Its nonce names the request.
func (c *udpCycle) loginReply(cl *krb5.Client, q *stageQueues, reply []byte) (nonce int64, more bool, err error) {
	slots := c.slots
	kind, err := cl.ReadLoginReply(reply)
	if err != nil && kind == krb5.ReplyASRep {
		// PREAUTH_FAILED to a SPAKE support message (the KDC shares no
		// group with us) answers the oldest login that sent one: under
		// auto it goes on with encrypted timestamp, as kinit does.
		if i := q.oldest(slots, krb5.StageSupport); i >= 0 {
			var fallback bool
			if fallback, err = cl.SPAKERefused(err); fallback {
				kind, err = krb5.ReplyMoreData, nil
			} else if krb5.Classify(err) == krb5.ClassPreauthUnsupported {
				return 0, true, err // ends the oldest support message
			}
		}
	}
	switch {
	case err != nil && kind == krb5.ReplyASRep:
		return 0, false, err
	case kind == krb5.ReplyPreauthRequired || kind == krb5.ReplyMoreData:
		if err != nil {
			return 0, true, err
		}
		want := krb5.StageFirst
		if kind == krb5.ReplyMoreData {
			want = krb5.StageSupport
		}
		i := q.oldest(slots, want)
		if i < 0 {
			return 0, true, nil // a late answer to a request already ended
		}
		s := &slots[i]
		buf, err := cl.EncodeLoginNext(s.buf[:0], &s.fl)
		if err != nil {
			return 0, true, err
		}
		c.ask(i, buf, s.fl.Nonce)
		return 0, true, nil
	}
	// An AS-REP: the SPAKE logins waiting for one, oldest first, until
	// one opens it; then the long-term key (encrypted timestamp, or a
	// user without pre-authentication).
	for _, e := range q.live(slots, krb5.StageResponse) {
		if s := &slots[e.slot]; !s.busy || s.seq != e.seq {
			continue // stale
		}
		nonce, err = cl.OpenLoginFlight(reply, &slots[e.slot].fl)
		if err == nil || krb5.Classify(err) != krb5.ClassDecrypt {
			return nonce, false, err
		}
	}
	// A second answer to a SPAKE login already ended (a datagram
	// duplicated, or both copies of a resent response answered): tried
	// with the long-term key below, it failed the integrity check and
	// ended the oldest request in flight as failed.
	if q.duplicate(cl, reply) {
		return 0, true, nil
	}
	if len(q.live(slots, krb5.StageTimestamp)) > 0 || len(q.live(slots, krb5.StageFirst)) > 0 {
		lt := krb5.LoginFlight{Stage: krb5.StageTimestamp}
		nonce, err = cl.OpenLoginFlight(reply, &lt)
		return nonce, false, err
	}
	// No login in flight opens it: the second answer to a resent SPAKE
	// response whose login has ended (its K'[0] is gone), as an
	// encrypted-timestamp duplicate whose nonce names no request. Were it
	// a KDC fault instead, its login times out and counts as failed.
	return 0, true, nil
}

// stageMethod is the pre-authentication of a login answered at stage st.
func stageMethod(st krb5.LoginStage) string {
	switch st {
	case krb5.StageTimestamp:
		return krb5.MethodEncTimestamp
	case krb5.StageResponse:
		return krb5.MethodSPAKE
	}
	return krb5.MethodNone
}
