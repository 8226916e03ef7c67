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
	phase   int  // logins: 1 before PREAUTH_REQUIRED, 2 after
	send    bool // encoded (the second round trip of a login), to send now
}

// batchedTGS makes the tgs load with few goroutines: `inflight` requests
// in flight in total (the closed-loop clients' worth), spread over one
// goroutine per CPU, each with its own user (and TGT) and one connected
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
	g := max(1, min(inflight, runtime.GOMAXPROCS(0)))
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
			_, err = c.Login(lctx)
			cancel()
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
	recs := make([][]record, g)
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
	for _, rs := range recs {
		all = append(all, rs...)
	}
	l := r.finish(summarizeLoad(all, kind, inflight, wall, krb5.UDP))
	l.CPU = cpuUse(a, b, l.Requests)
	for err := range errc {
		return l, err
	}
	return l, ctx.Err()
}

// Bounds of the wait that lets replies gather between receives.
const (
	minBatchWait = 200 * time.Microsecond
	maxBatchWait = 20 * time.Millisecond
)

// rxTimestamp is the arrival time in a datagram's control messages, or
// def when there is none.
func rxTimestamp(oob []byte, def time.Time) time.Time {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return def
	}
	for _, m := range msgs {
		if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SCM_TIMESTAMPNS && len(m.Data) >= 16 {
			ts := (*unix.Timespec)(unsafe.Pointer(&m.Data[0]))
			return time.Unix(ts.Unix())
		}
	}
	return def
}

// batchedRetransmit is when an unanswered request is sent again (then
// after twice as long each time), as libkrb5 does.
const batchedRetransmit = time.Second

func (r *run) batchedWorker(ctx context.Context, kind string, c *krb5.Client, svcs []*krb5.Service, u *rawUDP, depth int,
	start, end time.Time, out *[]record, stop <-chan struct{}, succeeded func(int)) error {
	// The raw system calls below block this thread, not the scheduler.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	slots := make([]slot, depth)
	bySlot := make(map[int64]int, depth)
	next, answered := 0, 0
	finish := func(i int, now time.Time, err error) {
		s := &slots[i]
		delete(bySlot, s.nonce)
		s.busy = false
		*out = append(*out, r.note(record{Start: s.first.Sub(start), Latency: now.Sub(s.first), Kind: kind, Class: krb5.Classify(err)}, err))
	}
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return ctx.Err() != nil
		}
	}
	// A batch is a quarter of the slots: each cycle sends that many new
	// requests in one sendmmsg, sleeps while about as many replies come
	// in, and takes them with one recvmmsg; the other three quarters keep
	// the KDC's queue full meanwhile.
	batch := max(1, depth/4)
	for {
		now := time.Now()
		if !now.Before(end) || stopped() {
			return nil // requests still in flight are cut off, as in the closed loop
		}
		refill := depth-len(bySlot) >= batch
		for i := range slots {
			s := &slots[i]
			switch {
			case !s.busy && !refill:
				continue
			case !s.busy:
				var buf []byte
				var nonce int64
				var err error
				if kind == kindAS {
					buf, nonce, err = c.EncodeLogin(s.buf[:0], false)
				} else {
					buf, nonce, err = c.EncodeServiceTicket(s.buf[:0], svcs[next%len(svcs)])
				}
				if err != nil {
					return err
				}
				next++
				*s = slot{buf: buf, nonce: nonce, first: now, last: now, busy: true, phase: 1}
				bySlot[nonce] = i
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
		if answered > 0 && len(bySlot) > 0 {
			per := time.Since(start) / time.Duration(answered)
			rawSleep(min(max(per*time.Duration(batch), minBatchWait), maxBatchWait, time.Until(end)))
		}
		n, err := u.recv()
		if n == 0 && err == nil {
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
				var preauth bool
				nonce, preauth, err = c.OpenLoginReply(reply)
				if preauth && err == nil {
					// It answers a first round trip, any (one user per
					// socket): the oldest goes on to its second.
					if i := oldestSlot(slots, 1); i >= 0 {
						s := &slots[i]
						delete(bySlot, s.nonce)
						buf, nonce, err := c.EncodeLogin(s.buf[:0], true)
						if err != nil {
							finish(i, at, err)
							continue
						}
						s.buf, s.nonce, s.phase, s.send, s.resends = buf, nonce, 2, true, 0
						bySlot[nonce] = i
					}
					continue
				}
			} else {
				nonce, err = c.OpenServiceTicketReply(reply)
			}
			if err == nil {
				if i, found := bySlot[nonce]; found {
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

// oldestSlot is the busy slot sent first (of the phase, unless 0), or -1.
func oldestSlot(slots []slot, phase int) int {
	oldest := -1
	for i := range slots {
		if slots[i].busy && (phase == 0 || slots[i].phase == phase) && (oldest < 0 || slots[i].first.Before(slots[oldest].first)) {
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
