package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/krb5-exporter/krb5-exporter/bench/report"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// Request kinds in records and raw CSVs.
const (
	kindAS  = report.KindAS
	kindTGS = report.KindTGS
)

// progress is what the live line shows; the load loops update it.
type progress struct {
	test    atomic.Pointer[string]
	started atomic.Int64 // unix ns
	ok      atomic.Int64
	failed  atomic.Int64
}

func (p *progress) reset(test string) {
	p.test.Store(&test)
	p.started.Store(time.Now().UnixNano())
	p.ok.Store(0)
	p.failed.Store(0)
}

// fleet makes engine clients for the users of the system, sharing each
// user's credentials across tests.
type fleet struct {
	sys *System
	// shard (1-based) of shards: this generator uses users shard,
	// shard+shards, shard+2*shards, ...
	shard, shards int
	preauth       krb5.PreauthMode

	mu    sync.Mutex
	creds map[int]*krb5.Credentials
}

func (f *fleet) credentials(user int) (*krb5.Credentials, krb5.Principal, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.creds == nil {
		// Every user's keys from one read of the keytab.
		ps := make([]krb5.Principal, f.sys.Users)
		for i := range ps {
			ps[i] = f.principal(i + 1)
		}
		cs, err := krb5.NewKeytabCredentialsFor(f.sys.UserKeytab, ps)
		if err != nil {
			return nil, krb5.Principal{}, fmt.Errorf("load-test users: %w", err)
		}
		f.creds = map[int]*krb5.Credentials{}
		for i, c := range cs {
			f.creds[i+1] = c
		}
	}
	return f.creds[user], f.principal(user), nil
}

func (f *fleet) principal(user int) krb5.Principal {
	return krb5.Principal{Components: strings.Split(f.sys.UserName(user), "/"), Realm: f.sys.Realm}
}

// users is how many users this generator's shard has.
func (f *fleet) users() int {
	k, n := max(1, f.shard), max(1, f.shards)
	if f.sys.Users < k {
		return 0
	}
	return (f.sys.Users-k)/n + 1
}

// client returns a new engine client for the i-th user of the shard
// (1-based, wrapped).
func (f *fleet) client(i int, t krb5.Transport) (*krb5.Client, error) {
	m := f.users()
	if m <= 0 {
		return nil, errors.New("the system has no load-test users (users keytab) for this shard")
	}
	user := max(1, f.shard) + ((i-1)%m)*max(1, f.shards)
	creds, p, err := f.credentials(user)
	if err != nil {
		return nil, err
	}
	// Resend an unanswered UDP request after 1 s, as libkrb5 does: a lost
	// datagram is a slow request, not an error (the seed's rule).
	return krb5.NewClient(krb5.Options{KDC: f.sys.KDC, Transport: t, Client: p, Credentials: creds, UDPRetransmit: time.Second, Preauth: f.preauth})
}

func (f *fleet) service(c *krb5.Client, i int) *krb5.Service {
	n := (i-1)%max(1, f.sys.Services) + 1
	p, _ := krb5.ParsePrincipal(f.sys.ServiceName(n), f.sys.Realm)
	return c.PrepareService(p)
}

// maxClients bounds engine clients alive at once (each holds a socket and
// a 64 KiB receive buffer).
const maxClients = 256

// closedLoop runs `clients` goroutines that each send their next request
// as soon as the last is answered, for dur. kind as: full logins over the
// worker's share of the users; kind tgs: one login per worker (not
// counted), then tickets for the services in turn.
func (r *run) closedLoop(ctx context.Context, kind string, t krb5.Transport, clients int, dur time.Duration) (*Load, error) {
	perWorker := 1
	if kind == kindAS {
		perWorker = max(1, min((r.fleet.users()+clients-1)/clients, maxClients/clients))
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
	for w := range ws {
		for j := 0; j < perWorker; j++ {
			c, err := r.fleet.client(w+1+j*clients, t)
			if err != nil {
				return nil, err
			}
			ws[w].cs = append(ws[w].cs, c)
		}
		if kind == kindTGS {
			c := ws[w].cs[0]
			lctx, cancel := context.WithTimeout(ctx, r.set.Timeout)
			res, err := c.Login(lctx)
			cancel()
			r.method(res.Method, 1)
			if err != nil {
				return nil, fmt.Errorf("the login before the tickets failed: %w", err)
			}
			for s := 1; s <= max(1, r.sys.Services); s++ {
				ws[w].svcs = append(ws[w].svcs, r.fleet.service(c, (w+s-1)%max(1, r.sys.Services)+1))
			}
		}
	}
	recs := make([][]record, clients)
	r.resetErrors()
	a := r.sampler.read()
	start := time.Now()
	end := start.Add(dur)
	ctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	var wg sync.WaitGroup
	for w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wk := &ws[w]
			for i := 0; ctx.Err() == nil; i++ {
				sent := time.Now()
				rctx, rcancel := context.WithTimeout(ctx, r.set.Timeout)
				var err error
				var d time.Duration
				if kind == kindAS {
					var res krb5.ASResult
					res, err = wk.cs[i%len(wk.cs)].Login(rctx)
					d = res.Duration
					if err == nil {
						r.method(res.Method, 1)
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
				recs[w] = append(recs[w], r.note(record{Start: sent.Sub(start), Latency: d, Kind: kind, Class: krb5.Classify(err)}, err))
				if r.pace > 0 {
					select {
					case <-ctx.Done():
					case <-time.After(r.pace):
					}
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	b := r.sampler.read()
	var all []record
	for _, rs := range recs {
		all = append(all, rs...)
	}
	l := summarizeLoad(all, kind, clients, wall, t)
	l.CPU = cpuUse(a, b, l.Requests)
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return l, err
	}
	if ctx.Err() != nil && time.Since(start) < dur {
		return l, ctx.Err()
	}
	return l, nil
}

// resetErrors starts the error texts of a new load.
func (r *run) resetErrors() {
	r.errMu.Lock()
	r.errTexts = nil
	r.errMu.Unlock()
}

// note updates the live progress and keeps the first text of each error.
func (r *run) note(rec record, err error) record {
	if err == nil {
		r.prog.ok.Add(1)
		return rec
	}
	r.prog.failed.Add(1)
	r.errMu.Lock()
	if r.errTexts == nil {
		r.errTexts = map[string]string{}
	}
	if k := rec.Kind + "/" + rec.Class; r.errTexts[k] == "" {
		r.errTexts[k] = err.Error()
	}
	r.errMu.Unlock()
	return rec
}

func summarizeLoad(recs []record, kind string, clients int, wall time.Duration, t krb5.Transport) *Load {
	l := &Load{Transport: t.String(), Clients: clients, Wall: wall, Records: recs, Kind: kind}
	var ds []time.Duration
	for _, rc := range recs {
		if rc.Kind != kind {
			continue
		}
		l.Requests++
		if rc.Class != krb5.ClassSuccess {
			l.Errors++
			if l.ErrorClasses == nil {
				l.ErrorClasses = map[string]int{}
			}
			l.ErrorClasses[rc.Class]++
			continue
		}
		ds = append(ds, rc.Latency)
	}
	l.Latency = summarize(ds)
	if wall > 0 {
		l.Rate = float64(len(ds)) / wall.Seconds()
	}
	if l.Requests > 0 {
		l.FailedPct = 100 * float64(l.Errors) / float64(l.Requests)
	}
	return l
}

// closedLoopN is closedLoop stopped after about n requests instead of
// after a duration (benchmarks).
func (r *run) closedLoopN(kind string, t krb5.Transport, clients, n int) (*Load, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.prog.ok.Store(0)
	r.prog.failed.Store(0)
	go func() {
		for ctx.Err() == nil && r.prog.ok.Load()+r.prog.failed.Load() < int64(n) {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	l, err := r.closedLoop(ctx, kind, t, clients, time.Hour)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return l, err
}

// recordLog collects the records of one load goroutine in fixed chunks:
// appending never copies what is there (a growing slice of tens of
// thousands of records would copy and fault in fresh pages while the
// load's CPU is measured).
type recordLog struct {
	chunks  [][]record
	waits   int // times the goroutine blocked (Load.GeneratorWaits)
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

func (l *recordLog) add(rec record) {
	if n := len(l.chunks); n == 0 || len(l.chunks[n-1]) == cap(l.chunks[n-1]) {
		l.chunks = append(l.chunks, make([]record, 0, recordChunk))
	}
	c := &l.chunks[len(l.chunks)-1]
	*c = append(*c, rec)
}

func (l *recordLog) len() int {
	n := 0
	for _, c := range l.chunks {
		n += len(c)
	}
	return n
}

// appendTo appends every record to dst.
func (l *recordLog) appendTo(dst []record) []record {
	for _, c := range l.chunks {
		dst = append(dst, c...)
	}
	return dst
}
