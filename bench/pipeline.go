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

// Generators of the as and tgs loads.
const (
	// GeneratorBatched keeps many TGS requests in flight per socket,
	// matches replies by nonce and batches the system calls.
	GeneratorBatched = "batched"
	// GeneratorBlocking is one goroutine per client, one request at a time.
	GeneratorBlocking = "blocking"
)

// slot is one request in flight on a batched socket.
type slot struct {
	buf     []byte // the encoded request, kept for resends
	nonce   int64
	first   time.Time // first send: the latency counts from here
	last    time.Time // last send
	resends int
	busy    bool
	seq     uint64           // of the request: its place in the stage queues
	fl      krb5.LoginFlight // logins: the stage and SPAKE key of the login
	send    bool             // encoded (the second round trip of a login), to send now
}

// batchedTGS makes the tgs load with few goroutines: `inflight` requests
// in flight in total (the closed-loop clients' worth), spread over one
// goroutine per batchedPerWorker of them (at most one per CPU), each with its own user (and TGT) and one connected
// UDP socket. A goroutine encodes every request it can send, hands them
// to the kernel in one sendmmsg, takes every reply waiting in one
// recvmmsg, and matches each reply to its request by the nonce inside its
// encrypted part. A lost datagram is resent after 1 s, 2 s, ... as libkrb5
// does; a KRB-ERROR (it carries no nonce) ends the oldest request in
// flight. The load ends at dur, or after limit successful tickets when
// limit > 0 (benchmarks).
func (r *run) batchedTGS(ctx context.Context, inflight int, dur time.Duration, limit int64) (*Load, error) {
	return r.batched(ctx, kindTGS, inflight, dur, limit)
}

// batchedAS is the as load made the same way: logins in flight on one
// socket per goroutine (one user each); a PREAUTH_REQUIRED answers the
// oldest first round trip, which goes on to its second at once; an AS-REP
// is matched by its nonce. Each login is still the two round trips of a
// fresh kinit -k.
func (r *run) batchedAS(ctx context.Context, inflight int, dur time.Duration, limit int64) (*Load, error) {
	return r.batched(ctx, kindAS, inflight, dur, limit)
}

func (r *run) batched(ctx context.Context, kind string, inflight int, dur time.Duration, limit int64) (*Load, error) {
	// One goroutine per batchedPerWorker requests in flight, at most one
	// per CPU: a goroutine wakes once per half its requests, so fewer,
	// fuller goroutines wake less. One keeps a KDC core busy with a few %
	// of another core.
	g := max(1, min((inflight+batchedPerWorker-1)/batchedPerWorker, runtime.GOMAXPROCS(0)))
	type worker struct {
		c     *krb5.Client
		svcs  []*krb5.Service
		conn  *rawUDP
		depth int
	}
	ws := make([]*worker, g)
	defer func() {
		for _, w := range ws {
			if w != nil {
				w.c.Close()
				if w.conn != nil {
					w.conn.close()
				}
			}
		}
	}()
	for i := range ws {
		c, err := r.fleet.client(i+1, krb5.UDP)
		if err != nil {
			return nil, err
		}
		w := &worker{c: c, depth: inflight / g}
		ws[i] = w
		if i < inflight%g {
			w.depth++
		}
		if kind == kindTGS {
			lctx, cancel := context.WithTimeout(ctx, r.set.Timeout)
			var res krb5.ASResult
			res, err = c.Login(lctx)
			cancel()
			r.method(res.Method, 1)
			if err != nil {
				return nil, fmt.Errorf("the login before the tickets failed: %w", err)
			}
		}
		for s := 1; kind == kindTGS && s <= max(1, r.sys.Services); s++ {
			w.svcs = append(w.svcs, r.fleet.service(c, (i+s-1)%max(1, r.sys.Services)+1))
		}
		if w.conn, err = dialRawUDP(r.sys.KDC, w.depth); err != nil {
			return nil, err
		}
	}
	r.resetErrors()
	recs := make([]recordLog, g)
	var done sync.WaitGroup
	var okCount int64
	var okMu sync.Mutex
	stopByLimit := func(n int) bool {
		if limit <= 0 {
			return false
		}
		okMu.Lock()
		defer okMu.Unlock()
		okCount += int64(n)
		return okCount >= limit
	}
	a := r.sampler.read()
	start := time.Now()
	end := start.Add(dur)
	errc := make(chan error, g)
	stop := make(chan struct{})
	var stopOnce sync.Once
	for i, w := range ws {
		done.Add(1)
		go func() {
			defer done.Done()
			err := r.batchedWorker(ctx, kind, w.c, w.svcs, w.conn, w.depth, start, end, &recs[i], stop, func(n int) {
				if stopByLimit(n) {
					stopOnce.Do(func() { close(stop) })
				}
			})
			if err != nil {
				errc <- err
			}
		}()
	}
	done.Wait()
	wall := time.Since(start)
	b := r.sampler.read()
	close(errc)
	var all []record
	for i := range recs {
		all = recs[i].appendTo(all)
	}
	l := r.finish(summarizeLoad(all, kind, inflight, wall, krb5.UDP))
	l.CPU = cpuUse(a, b, l.Requests)
	for i := range recs {
		l.GeneratorWaits += recs[i].waits
		if w := recs[i].lowest; w > 0 && (l.Lowest == 0 || w < l.Lowest) {
			l.Lowest = w
		}
	}
	for err := range errc {
		return l, err
	}
	return l, ctx.Err()
}

// yieldEvery is how often a batched goroutine yields to the scheduler.
const yieldEvery = 8 * time.Millisecond

// batchedPerWorker is how many requests in flight a batched goroutine
// takes before the load is spread over more (up to one per CPU).
const batchedPerWorker = 64

// Bounds of the wait that lets replies gather between receives.
const (
	minBatchWait = 200 * time.Microsecond
	maxBatchWait = 20 * time.Millisecond
)

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

// batchedRetransmit is when an unanswered request is sent again (then
// after twice as long each time), as libkrb5 does.
const batchedRetransmit = time.Second

func (r *run) batchedWorker(ctx context.Context, kind string, c *krb5.Client, svcs []*krb5.Service, u *rawUDP, depth int,
	start, end time.Time, out *recordLog, stop <-chan struct{}, succeeded func(int)) error {
	// The raw system calls below block this goroutine's thread and keep
	// its P (see rawSleep). The goroutine is not locked to the thread: the
	// runtime preempts a goroutine that has run 10 ms without a scheduling
	// point, which is every goroutine here, and a locked one is handed
	// from thread to thread through futex wake-ups each time.
	slots := make([]slot, depth)
	// Successful logins by the stage that ended them, for the report.
	var methods [krb5.StageResponse + 1]int
	defer func() {
		for st, n := range methods {
			r.method(stageMethod(krb5.LoginStage(st)), n)
		}
	}()
	bySlot := make(map[int64]int, depth)
	q := newStageQueues(depth)
	var seq uint64
	// assign records that slot i has a new request in flight (requests
	// are given out in the order they are sent). Only logins wait in the
	// queues: a TGS reply names its request by its nonce.
	assign := func(i int) {
		seq++
		slots[i].seq = seq
		if kind == kindAS {
			q.push(slots, slots[i].fl.Stage, i, seq)
		}
	}
	next, answered := 0, 0
	finish := func(i int, now time.Time, err error) {
		s := &slots[i]
		delete(bySlot, s.nonce)
		s.busy = false
		out.add(r.note(record{Start: s.first.Sub(start), Latency: now.Sub(s.first), Kind: kind, Class: krb5.Classify(err)}, err))
	}
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return ctx.Err() != nil
		}
	}
	// A batch is half the slots: each cycle sleeps while about that many
	// replies come in, takes them with one recvmmsg and sends the
	// requests they free (about as many) with one sendmmsg; the other
	// half keeps the KDC's queue full meanwhile. A wake-up costs the
	// generator 20-50 µs of CPU on a virtual machine, the Kerberos work
	// of several logins: the fewer per request, the cheaper the
	// generator.
	batch := max(1, depth/2)
	yielded := start
	for {
		now := time.Now()
		if !now.Before(end) || stopped() {
			return nil // requests still in flight are cut off, as in the closed loop
		}
		// Every free slot starts its next request at once, to go out in
		// this cycle's one sendmmsg: a cycle takes about a batch of
		// replies, so the sends are batched anyway, and the KDC's queue
		// stays full. (Refilling only once half the slots were free let
		// the queue run down to a batch while the generator slept for a
		// batch: the KDC idled 14-22 % of the time at 8 to 64 logins in
		// flight, 98-100 % busy at 2 and 4, which do not sleep.)
		for i := range slots {
			s := &slots[i]
			switch {
			case !s.busy:
				var buf []byte
				var nonce int64
				var err error
				fl := s.fl
				if kind == kindAS {
					buf, err = c.EncodeLoginFirst(s.buf[:0], &fl)
					nonce = fl.Nonce
				} else {
					buf, nonce, err = c.EncodeServiceTicket(s.buf[:0], svcs[next%len(svcs)])
				}
				if err != nil {
					return err
				}
				next++
				*s = slot{buf: buf, nonce: nonce, first: now, last: now, busy: true, fl: fl}
				bySlot[nonce] = i
				assign(i)
			case s.send:
				s.send, s.last = false, now
			case now.Sub(s.first) >= r.set.Timeout:
				finish(i, now, &krb5.Error{Class: krb5.ClassTimeout, Phase: kindPhase(kind), Err: os.ErrDeadlineExceeded})
				continue
			case now.Sub(s.last) >= batchedRetransmit<<s.resends:
				s.resends++
				s.last = now
			default:
				continue
			}
			u.queue(s.buf)
		}
		if err := u.send(); isRefused(err) {
			// The kernel reports an ICMP port unreachable on the next
			// call; it names no request: it ends the oldest.
			if i := oldestSlot(slots, 0); i >= 0 {
				finish(i, time.Now(), refusedError(kind, err))
			}
		} else if err != nil {
			return fmt.Errorf("send: %w", err)
		}
		// Let a batch of replies gather: the time the KDC took for a batch
		// so far. The kernel's arrival stamps keep the latencies exact.
		// With few in flight (a concurrency level of 1 or 2 clients) the
		// wait would only idle the KDC: take each reply as it comes.
		// A scheduling point every few ms: the runtime preempts a
		// goroutine that has had none for 10 ms with a signal, which also
		// cuts the sleep short. Not every cycle: with an idle P, a yield
		// wakes a thread to look for work.
		if now.Sub(yielded) >= yieldEvery {
			runtime.Gosched()
			yielded = now
		}
		if answered > 0 && len(bySlot) > 0 && depth >= 8 {
			per := now.Sub(start) / time.Duration(answered)
			rawSleep(min(max(per*time.Duration(batch), minBatchWait), maxBatchWait, end.Sub(now)))
			out.waited(len(bySlot))
		}
		n, err := u.recv()
		if n == 0 && err == nil {
			out.waits++
			// Nothing yet: block until a reply comes, waking at least
			// every 100 ms to resend and time out.
			if err := u.waitReadable(min(100*time.Millisecond, time.Until(end))); err != nil {
				return fmt.Errorf("poll: %w", err)
			}
			n, err = u.recv()
		}
		answered += n
		if err != nil {
			if isRefused(err) {
				if i := oldestSlot(slots, 0); i >= 0 {
					finish(i, time.Now(), refusedError(kind, err))
				}
				continue
			}
			return fmt.Errorf("receive: %w", err)
		}
		now = time.Now()
		ok := 0
		for j := range n {
			reply, at := u.msg(j, now)
			var nonce int64
			var err error
			if kind == kindAS {
				var more bool
				if nonce, more, err = r.loginReply(c, slots, q, bySlot, reply, assign); more {
					if err != nil {
						// The error answers the oldest login waiting for this kind of answer.
						if i := q.oldest(slots, krb5.StageFirst, krb5.StageSupport); i >= 0 {
							finish(i, at, err)
						}
					}
					continue
				}
			} else {
				nonce, err = c.OpenServiceTicketReply(reply)
			}
			if err == nil {
				if i, found := bySlot[nonce]; found {
					if kind == kindAS {
						methods[slots[i].fl.Stage]++
					}
					finish(i, at, nil)
					ok++
				}
				continue // a duplicate reply to a resent request
			}
			// An error names no request: it ends the oldest.
			if oldest := oldestSlot(slots, 0); oldest >= 0 {
				finish(oldest, at, err)
			}
		}
		if ok > 0 {
			succeeded(ok)
		}
	}
}

// stageQueues keeps the requests in flight of a batched worker in the
// order they were given to their slots, one queue per login stage, so
// that the oldest request waiting for a kind of answer is found without
// scanning every slot. An entry is stale once its slot has a newer
// request (or none); stale entries are dropped from the front lazily.
type stageQueues struct {
	q [krb5.StageResponse + 1]fifo
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
	s := &stageQueues{}
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

// oldest is the slot whose request, in one of the stages, was given out
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

func refusedError(kind string, err error) error {
	return &krb5.Error{Class: krb5.ClassConnectionRefused, Phase: kindPhase(kind), Err: err}
}

// kindPhase is the round trip a request of the load is in.
func kindPhase(kind string) string {
	if kind == kindAS {
		return krb5.PhaseASRep
	}
	return krb5.PhaseTGSRep
}

// loginReply handles a reply of the as load. A KRB-ERROR asking for more
// pre-authentication (more) answers the oldest login waiting for it,
// which goes on to its next request at once. An AS-REP is opened as the
// answer to a login waiting for one: a SPAKE AS-REP only opens with its
// own login's key, so the SPAKE logins are tried oldest first; any other
// opens with the long-term key. Its nonce names the request.
func (r *run) loginReply(c *krb5.Client, slots []slot, q *stageQueues, bySlot map[int64]int, reply []byte, assign func(int)) (nonce int64, more bool, err error) {
	kind, err := c.ReadLoginReply(reply)
	if err != nil && kind == krb5.ReplyASRep {
		// PREAUTH_FAILED to a SPAKE support message (the KDC shares no
		// group with us) answers the oldest login that sent one: under
		// auto it goes on with encrypted timestamp, as kinit does.
		if i := q.oldest(slots, krb5.StageSupport); i >= 0 {
			var fallback bool
			if fallback, err = c.SPAKERefused(err); fallback {
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
		buf, err := c.EncodeLoginNext(s.buf[:0], &s.fl)
		if err != nil {
			return 0, true, err
		}
		delete(bySlot, s.nonce)
		s.buf, s.nonce, s.send, s.resends = buf, s.fl.Nonce, true, 0
		bySlot[s.nonce] = i
		assign(i)
		return 0, true, nil
	}
	// An AS-REP: the SPAKE logins waiting for one, oldest first, until
	// one opens it; then the long-term key (encrypted timestamp, or a
	// user without pre-authentication).
	for _, e := range q.live(slots, krb5.StageResponse) {
		if s := &slots[e.slot]; !s.busy || s.seq != e.seq {
			continue // stale
		}
		nonce, err = c.OpenLoginFlight(reply, &slots[e.slot].fl)
		if err == nil || krb5.Classify(err) != krb5.ClassDecrypt {
			return nonce, false, err
		}
	}
	if len(q.live(slots, krb5.StageTimestamp)) > 0 || len(q.live(slots, krb5.StageFirst)) > 0 {
		lt := krb5.LoginFlight{Stage: krb5.StageTimestamp}
		nonce, err = c.OpenLoginFlight(reply, &lt)
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

// stageMask selects login stages for oldestSlot.
func stageMask(stages ...krb5.LoginStage) uint8 {
	var m uint8
	for _, st := range stages {
		m |= 1 << st
	}
	return m
}

// oldestSlot is the busy slot sent first (of the stages in mask, unless 0), or -1.
func oldestSlot(slots []slot, mask uint8) int {
	oldest := -1
	for i := range slots {
		if slots[i].busy && (mask == 0 || mask&(1<<slots[i].fl.Stage) != 0) && (oldest < 0 || slots[i].first.Before(slots[oldest].first)) {
			oldest = i
		}
	}
	return oldest
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
