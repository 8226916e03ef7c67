package loadgen

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/record"
)

// Request kinds in records: package record's.
const (
	KindAS  = record.KindAS
	KindTGS = record.KindTGS
)

// Record is one request: when it started (from the load's start), how
// long it took, its kind and krb5.ClassSuccess or its error class.
// Package record's type, so bench/report keeps it without this package.
type Record = record.Record

// Config is what every load is given.
type Config struct {
	// KDC is the KDC's address (host:port).
	KDC string
	// Client makes an engine client for the i-th user (1-based; the
	// factory wraps i over its Users) on transport t.
	Client func(i int, t krb5.Transport) (*krb5.Client, error)
	// Users is how many users Client serves: a load makes no more
	// clients than it needs to use each once.
	Users int
	// Service prepares the i-th of Services services (1-based, wrapped)
	// for c.
	Service  func(c *krb5.Client, i int) *krb5.Service
	Services int
	// Timeout bounds one round trip (a login's round trips count apart;
	// the blocking loads give it to each engine call).
	Timeout time.Duration
	// CPUs bounds the goroutines of a batched load (0: GOMAXPROCS).
	CPUs int
	// Pace pauses each blocking client after each request: a generator
	// that throttles itself.
	Pace time.Duration
	// Progress, when set, counts the requests as they end.
	Progress *Progress
	// Measure, when set, is called just before a load's first request
	// and again after its last, so that the caller's CPU readings leave
	// out the set-up (clients, the logins before tickets).
	Measure func()
}

// Progress counts a load's requests as they end (a live progress line).
type Progress struct {
	OK, Failed atomic.Int64
}

// Result is what a load measured.
type Result struct {
	Records []Record
	Wall    time.Duration
	// Waits is how often the generator blocked (sleep or poll); Lowest
	// the fewest requests in flight when a batch wait began (0: none).
	Waits, Lowest int
	// Sockets the tcp load opened.
	Sockets int
	// Datagrams the batched UDP loads sent, in Messages (runs of one
	// length go out as one UDP_SEGMENT message).
	Datagrams, Messages int
	// Late is, per session started, how late after its schedule (open
	// loop); Failed the sessions with a failed request.
	Late   []time.Duration
	Failed int
	// Methods counts the successful logins by pre-authentication method
	// (krb5.Method*).
	Methods map[string]int
	// ErrorTexts is the first text of each error, by kind/class.
	ErrorTexts map[string]string
}

func (c *Config) services(cl *krb5.Client, first int) []*krb5.Service {
	var svcs []*krb5.Service
	for s := 0; s < max(1, c.Services); s++ {
		svcs = append(svcs, c.Service(cl, (first+s-1)%max(1, c.Services)+1))
	}
	return svcs
}

func (c *Config) measure() {
	if c.Measure != nil {
		c.Measure()
	}
}

// tally keeps what the requests of a load have in common: progress, the
// first text of each error, logins by method. Safe for several
// goroutines.
type tally struct {
	prog *Progress
	dl   *deadline // set when the measured load starts

	mu      sync.Mutex
	texts   map[string]string
	methods map[string]int
}

func newTally(cfg *Config) *tally { return &tally{prog: cfg.Progress} }

// note counts rec and keeps the first text of each error.
func (t *tally) note(rec Record, err error) Record {
	if t.dl != nil {
		t.dl.ended()
	}
	if err == nil {
		if t.prog != nil {
			t.prog.OK.Add(1)
		}
		return rec
	}
	if t.prog != nil {
		t.prog.Failed.Add(1)
	}
	t.mu.Lock()
	if t.texts == nil {
		t.texts = map[string]string{}
	}
	if k := rec.Kind + "/" + rec.Class; t.texts[k] == "" {
		t.texts[k] = err.Error()
	}
	t.mu.Unlock()
	return rec
}

// method counts n logins with pre-authentication method m.
func (t *tally) method(m string, n int) {
	if m == "" || n <= 0 {
		return
	}
	t.mu.Lock()
	if t.methods == nil {
		t.methods = map[string]int{}
	}
	t.methods[m] += n
	t.mu.Unlock()
}

// stages counts logins by the stage that ended them.
func (t *tally) stages(methods *[krb5.StageResponse + 1]int) {
	for st, n := range methods {
		t.method(stageMethod(krb5.LoginStage(st)), n)
	}
}

func (t *tally) result(res *Result) *Result {
	t.mu.Lock()
	defer t.mu.Unlock()
	res.ErrorTexts, res.Methods = t.texts, t.methods
	return res
}

// maxClients bounds engine clients alive at once (each holds a socket and
// a 64 KiB receive buffer).
const maxClients = 256

// errLimit ends a load stopped after a number of requests.
var errLimit = errors.New("request limit reached")

// ClosedLoop runs `clients` goroutines on the blocking engine client that
// each send their next request as soon as the last is answered, for dur
// or, when limit > 0, until about limit requests have ended. kind as:
// full logins over the worker's share of the users; kind tgs: one login
// per worker (not counted), then tickets for the services in turn.
func ClosedLoop(ctx context.Context, cfg Config, kind string, t krb5.Transport, clients int, dur time.Duration, limit int64) (*Result, error) {
	perWorker := 1
	if kind == KindAS {
		perWorker = max(1, min((cfg.Users+clients-1)/clients, maxClients/clients))
	}
	type worker struct {
		cs   []*krb5.Client
		svcs []*krb5.Service
	}
	ws := make([]worker, clients)
	defer func() {
		for _, w := range ws {
			for _, c := range w.cs {
				c.Close()
			}
		}
	}()
	tl := newTally(&cfg)
	for w := range ws {
		for j := 0; j < perWorker; j++ {
			c, err := cfg.Client(w+1+j*clients, t)
			if err != nil {
				return nil, err
			}
			ws[w].cs = append(ws[w].cs, c)
		}
		if kind == KindTGS {
			c := ws[w].cs[0]
			if err := loginFirst(ctx, &cfg, c, tl); err != nil {
				return nil, err
			}
			ws[w].svcs = cfg.services(c, w+1)
		}
	}
	recs := make([][]Record, clients)
	var ended atomic.Int64
	cfg.measure()
	start := time.Now()
	end := start.Add(dur)
	tl.dl = newDeadline(start, dur, cfg.Timeout)
	ctx, cancel := context.WithDeadline(ctx, tl.dl.last)
	defer cancel()
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	// The load ends at end if a request has ended by then, else when the
	// first one ends (see deadline).
	atEnd := time.AfterFunc(dur, func() {
		if tl.dl.any.Load() {
			stop(context.DeadlineExceeded)
		}
	})
	defer atEnd.Stop()
	var wg sync.WaitGroup
	for w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wk := &ws[w]
			for i := 0; ctx.Err() == nil; i++ {
				sent := time.Now()
				rctx, rcancel := context.WithTimeout(ctx, cfg.Timeout)
				var err error
				var d time.Duration
				if kind == KindAS {
					var res krb5.ASResult
					res, err = wk.cs[i%len(wk.cs)].Login(rctx)
					d = res.Duration
					if err == nil {
						tl.method(res.Method, 1)
					}
				} else {
					var res krb5.TGSResult
					res, err = wk.cs[0].ServiceTicket(rctx, wk.svcs[i%len(wk.svcs)])
					d = res.Duration
				}
				rcancel()
				if err != nil && (ctx.Err() != nil || !time.Now().Before(end)) {
					// Cut off by the end of the load (the engine may see
					// the deadline before the context's timer fires), not
					// a KDC failure.
					return
				}
				recs[w] = append(recs[w], tl.note(Record{Start: sent.Sub(start), Latency: d, Kind: kind, Class: krb5.Classify(err)}, err))
				if limit > 0 && ended.Add(1) >= limit {
					stop(errLimit)
				}
				if !time.Now().Before(end) {
					stop(context.DeadlineExceeded) // the first request to end, past the end
				}
				if cfg.Pace > 0 {
					select {
					case <-ctx.Done():
					case <-time.After(cfg.Pace):
					}
				}
			}
		}()
	}
	wg.Wait()
	res := &Result{Wall: time.Since(start)}
	cfg.measure()
	for _, rs := range recs {
		res.Records = append(res.Records, rs...)
	}
	tl.result(res)
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, errLimit) {
		return res, err
	}
	if ctx.Err() != nil && res.Wall < dur && !errors.Is(context.Cause(ctx), errLimit) {
		return res, ctx.Err()
	}
	return res, nil
}

// A deadline ends a load at its duration, or, while none of its requests
// has ended yet, up to one request timeout later: a rate needs an answer,
// and a KDC starved of CPU may give none within a short load (a 500 ms
// as load on a loaded 2-core CI machine, its KDC waiting for a CPU 88 %
// of the time, ended with "no request completed"). A KDC that is down
// ends requests at once (refused) or at their timeout, so the load still
// ends within one timeout of its duration.
type deadline struct {
	end, last time.Time
	any       atomic.Bool // a request ended
}

func newDeadline(start time.Time, dur, timeout time.Duration) *deadline {
	end := start.Add(dur)
	return &deadline{end: end, last: end.Add(timeout)}
}

func (d *deadline) ended() {
	if !d.any.Load() { // a load, not a store, per request: no cache line bouncing between goroutines
		d.any.Store(true)
	}
}

// over: the load ends at now.
func (d *deadline) over(now time.Time) bool {
	return !now.Before(d.end) && (d.any.Load() || !now.Before(d.last))
}

// next is the moment over may next become true without a request
// ending (which comes with a reply the load is woken for anyway): the end
// once a request has ended, else the last moment.
func (d *deadline) next() time.Time {
	if d.any.Load() {
		return d.end
	}
	return d.last
}

// loginFirst makes the login whose TGT a tgs load's tickets use (not
// counted as a request of the load).
func loginFirst(ctx context.Context, cfg *Config, c *krb5.Client, tl *tally) error {
	lctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	res, err := c.Login(lctx)
	cancel()
	tl.method(res.Method, 1)
	if err != nil {
		return fmt.Errorf("the login before the tickets failed: %w", err)
	}
	return nil
}

// recordLog collects the records of one load goroutine in fixed chunks:
// appending never copies what is there (a growing slice of tens of
// thousands of records would copy and fault in fresh pages while the
// load's CPU is measured).
type recordLog struct {
	chunks  [][]Record
	waits   int // times the goroutine blocked (Result.Waits)
	sockets int // sockets it opened
	// lowest is the fewest requests in flight when the goroutine began a
	// batch wait (0: it never did): the KDC's queue during its sleeps.
	lowest int
}

// waited counts a batch wait begun with n requests in flight.
func (l *recordLog) waited(n int) {
	l.waits++
	if l.lowest == 0 || n < l.lowest {
		l.lowest = n
	}
}

const recordChunk = 4096

func (l *recordLog) add(rec Record) {
	if n := len(l.chunks); n == 0 || len(l.chunks[n-1]) == cap(l.chunks[n-1]) {
		l.chunks = append(l.chunks, make([]Record, 0, recordChunk))
	}
	c := &l.chunks[len(l.chunks)-1]
	*c = append(*c, rec)
}

// appendTo appends every record to dst.
func (l *recordLog) appendTo(dst []Record) []Record {
	for _, c := range l.chunks {
		dst = append(dst, c...)
	}
	return dst
}
