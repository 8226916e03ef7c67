package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/krb5-exporter/krb5-exporter/bench/report"
	"github.com/krb5-exporter/krb5-exporter/internal/kdcbpf"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5/spake"
	"github.com/krb5-exporter/krb5-exporter/internal/loadgen"
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
	counts  loadgen.Progress
}

func (p *progress) reset(test string) {
	p.test.Store(&test)
	p.started.Store(time.Now().UnixNano())
	p.counts.OK.Store(0)
	p.counts.Failed.Store(0)
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

// window is a load's CPU readings: one just before its first request and
// one after its last (each also a resource sample of the report).
type window struct {
	s     *sampler
	marks []Sample
	// The KDC's own counts at the first and last mark (Settings.KDCService).
	kdc     *kdcTracer
	kdcSnap [2]kdcbpf.Snapshot
	kdcOK   [2]bool
}

func (w *window) mark() {
	w.marks = append(w.marks, w.s.read())
	if w.kdc != nil {
		i := min(len(w.marks)-1, 1)
		w.kdcOK[i] = w.kdc.mark(&w.kdcSnap[i])
	}
}

func (w *window) use(requests int) CPUUse {
	if len(w.marks) < 2 {
		return CPUUse{}
	}
	return cpuUse(w.marks[0], w.marks[len(w.marks)-1], requests)
}

// gen is the generator's configuration for a load of this run; w (if
// not nil) takes its CPU readings.
func (r *run) gen(w *window) loadgen.Config {
	cfg := loadgen.Config{
		KDC: r.sys.KDC, Client: r.fleet.client, Users: r.fleet.users(),
		Service: r.fleet.service, Services: r.sys.Services,
		Timeout: r.set.Timeout, Pace: r.pace, Progress: &r.prog.counts,
	}
	if w != nil {
		cfg.Measure = w.mark
	}
	return cfg
}

func (r *run) window() *window { return &window{s: r.sampler, kdc: r.kdc} }

// load is the report's account of a load of kind on one transport.
func (r *run) load(res *loadgen.Result, kind string, clients int, t krb5.Transport, w *window) *Load {
	r.took(res)
	l := summarizeLoad(res.Records, kind, clients, res.Wall, t)
	errorTexts(l, res)
	l.CPU = w.use(l.Requests)
	l.KDCService = w.kdcService(kind, t)
	l.GeneratorWaits, l.Lowest, l.Sockets = res.Waits, res.Lowest, res.Sockets
	if n := res.Methods[krb5.MethodSPAKE]; kind == kindAS && n > 0 && l.Requests > 0 {
		l.CPU.SPAKEFloorUS = float64(spakeFloor().Nanoseconds()) / 1e3 * float64(n) / float64(l.Requests)
	}
	return l
}

// spakeFloor is the CPU of one SPAKE login's two scalar multiplications
// (spake.Multiplications) on this thread, now: the median of 5 rounds of
// 40, about 10 ms, right after the load, on the generator's CPU.
func spakeFloor() time.Duration {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const rounds, per = 5, 40
	var d [rounds]time.Duration
	for i := range d {
		t0 := threadCPU()
		spake.Multiplications(per)
		d[i] = (threadCPU() - t0) / per
	}
	slices.Sort(d[:])
	return d[rounds/2]
}

// threadCPU is the CPU time of the calling thread.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// errorTexts attaches the first error text of each class seen.
func errorTexts(l *Load, res *loadgen.Result) {
	for c := range l.ErrorClasses {
		if l.ErrorTexts == nil {
			l.ErrorTexts = map[string]string{}
		}
		l.ErrorTexts[c] = res.ErrorTexts[l.Kind+"/"+c]
	}
}

// batched is the as or tgs load on the batched generator.
func (r *run) batched(ctx context.Context, kind string, inflight int, dur time.Duration, limit int64) (*Load, error) {
	w := r.window()
	res, err := loadgen.Batched(ctx, r.gen(w), kind, inflight, dur, limit)
	if res == nil {
		return nil, err
	}
	return r.load(res, kind, inflight, krb5.UDP, w), err
}

func (r *run) batchedAS(ctx context.Context, inflight int, dur time.Duration, limit int64) (*Load, error) {
	return r.batched(ctx, kindAS, inflight, dur, limit)
}

func (r *run) batchedTGS(ctx context.Context, inflight int, dur time.Duration, limit int64) (*Load, error) {
	return r.batched(ctx, kindTGS, inflight, dur, limit)
}

// onGenerator is a load on the chosen generator (Settings.Generator):
// batched with inflight requests in flight, or clients closed-loop
// clients on the blocking one, of kind over t for dur.
func (r *run) onGenerator(ctx context.Context, kind string, t krb5.Transport, batched func(context.Context, int, time.Duration, int64) (*Load, error), inflight, clients int, dur time.Duration) (*Load, error) {
	if r.set.Generator == GeneratorBatched {
		return batched(ctx, inflight, dur, 0)
	}
	return r.closedLoop(ctx, kind, t, clients, dur)
}

// closedLoop is the as or tgs load on the blocking generator: clients
// goroutines for dur.
func (r *run) closedLoop(ctx context.Context, kind string, t krb5.Transport, clients int, dur time.Duration) (*Load, error) {
	return r.closedLoopLimit(ctx, kind, t, clients, dur, 0)
}

// closedLoopN is closedLoop stopped after about n requests instead of
// after a duration (benchmarks).
func (r *run) closedLoopN(kind string, t krb5.Transport, clients, n int) (*Load, error) {
	return r.closedLoopLimit(context.Background(), kind, t, clients, time.Hour, int64(n))
}

func (r *run) closedLoopLimit(ctx context.Context, kind string, t krb5.Transport, clients int, dur time.Duration, limit int64) (*Load, error) {
	w := r.window()
	res, err := loadgen.ClosedLoop(ctx, r.gen(w), kind, t, clients, dur, limit)
	if res == nil {
		return nil, err
	}
	return r.load(res, kind, clients, t, w), err
}

// batchedTCP is the tcp load on the batched generator.
func (r *run) batchedTCP(ctx context.Context, inflight int, dur time.Duration, limit int64) (*Load, error) {
	w := r.window()
	res, err := loadgen.TCP(ctx, r.gen(w), inflight, dur, limit)
	if res == nil {
		return nil, err
	}
	return r.load(res, kindAS, max(1, min(inflight, loadgen.TCPMaxInflight)), krb5.TCP, w), err
}

// openLoop schedules rate sessions per second for dur, each a login and
// tgsPer tickets, on the chosen generator.
func (r *run) openLoop(ctx context.Context, rate float64, tgsPer int, dur time.Duration) (*OpenLoop, error) {
	plan := loadgen.SessionPlan{N: int(rate * dur.Seconds()), Rate: rate, TGSPer: tgsPer}
	nc := loadgen.OpenLoopClients(r.fleet.users())
	w := r.window()
	var res *loadgen.Result
	var err error
	if r.set.Generator == GeneratorBatched {
		res, err = loadgen.Sessions(ctx, r.gen(w), plan, nc)
	} else {
		res, err = loadgen.BlockingOpenLoop(ctx, r.gen(w), plan, nc)
	}
	if res == nil {
		return nil, err
	}
	r.took(res)
	recs := res.Records
	ol := &OpenLoop{LoginRate: rate, TGSPerLogin: tgsPer, Sessions: len(res.Late)}
	for _, l := range res.Late {
		if l > time.Millisecond {
			ol.Behind++
		}
		ol.MaxBehindMS = max(ol.MaxBehindMS, ms(l))
	}
	ol.Logins = summarizeLoad(recs, kindAS, nc, res.Wall, krb5.UDP)
	ol.Tickets = summarizeLoad(recs, kindTGS, nc, res.Wall, krb5.UDP)
	errorTexts(ol.Logins, res)
	errorTexts(ol.Tickets, res)
	ol.Logins.Records = recs
	ol.Logins.GeneratorWaits = res.Waits
	ol.Tickets.Records = nil
	total := ol.Logins.Requests + ol.Tickets.Requests
	if total > 0 {
		ol.ErrorPct = 100 * float64(ol.Logins.Errors+ol.Tickets.Errors) / float64(total)
	}
	ol.CPU = w.use(total)
	ol.Logins.KDCService = w.kdcService(kindAS, krb5.UDP)
	ol.Tickets.KDCService = w.kdcService(kindTGS, krb5.UDP)
	r.keepCapWindow(ol, w)
	return ol, err
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

// checkLoad warns about failed requests and fails a load in which
// nothing succeeded (a KDC that is down).
func (r *run) checkLoad(test string, l *Load) error {
	if l.Requests == 0 {
		return errors.New("no request completed")
	}
	if l.Errors == l.Requests {
		return fmt.Errorf("all %d requests failed: %s", l.Requests, errorSummary(l))
	}
	if l.Errors > 0 {
		cls := make([]string, 0, len(l.ErrorClasses))
		for c := range l.ErrorClasses {
			cls = append(cls, c)
		}
		slices.Sort(cls)
		r.warn("%s: %d of %d requests failed (%v); first error: %s", test, l.Errors, l.Requests, cls, l.ErrorTexts[cls[0]])
	}
	return nil
}

// errorSummary names every error class with its count, most frequent
// first, and the first text of the most frequent: a KDC that is down shows
// as connection_refused even when most requests timed out after it.
func errorSummary(l *Load) string {
	if len(l.ErrorClasses) == 0 {
		return "no error text"
	}
	cls := make([]string, 0, len(l.ErrorClasses))
	for c := range l.ErrorClasses {
		cls = append(cls, c)
	}
	slices.SortFunc(cls, func(a, b string) int {
		if d := l.ErrorClasses[b] - l.ErrorClasses[a]; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(cls))
	for i, c := range cls {
		parts[i] = fmt.Sprintf("%s %d", c, l.ErrorClasses[c])
	}
	return strings.Join(parts, ", ") + "; first: " + l.ErrorTexts[cls[0]]
}
