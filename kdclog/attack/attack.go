// Package attack turns the requests a KDC logs into attack signals:
// password spraying, brute force against one account, user enumeration,
// Kerberoasting and AS-REP roasting. It knows nothing of log formats or
// Prometheus: kdclog feeds it one Request per AS or TGS line and exports
// its Snapshot.
//
// Memory is fixed at construction whatever the log holds: exact counters
// per kind of event, and per signal the worst offenders of the current
// window only, k of them, kept with the Space-Saving heavy-hitter
// algorithm (Metwally et al., 2005: any offender with more than 1/k of a
// signal's events in a window is kept). The distinct principals or
// services of an offender are counted exactly up to its signal's
// threshold (a table of their 64-bit hashes, O(k * threshold)) and
// estimated beyond it by a 512-bit linear-counting sketch; offender names
// are stored cut to MaxName bytes. A spray from
// 100,000 forged addresses churns the k slots; it grows nothing.
//
// The rule of recovery, one table for the attack signals and kdclog's
// request counters (krb5_kdc_preauth_failures_recovered_total): an
// attempt is a PREAUTH_FAILED, or a SPAKE failure together with the
// failure of another method right after it (a P-256-only client's group
// mismatch, then its encrypted timestamp); an ISSUE for principal P from
// address A recovers P's attempts from A of the same file that are at most
// RecoverLines AS lines and less than RecoveryWait old, at most
// MaxRecovered of them (the newest); every other attempt is a wrong
// password, decided when its wait ends or when a newer attempt of P from
// A pushes it out of the MaxRecovered. So a brute force that ends in a
// success leaves all but MaxRecovered of its failures wrong passwords.
package attack

import (
	"bytes"
	"hash/maphash"
	"math"
	"math/bits"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/krb5-exporter/krb5-exporter/config"
)

// Outcome is what the KDC answered, as far as the signals care.
type Outcome uint8

// Outcomes.
const (
	OutcomeOther         Outcome = iota
	OutcomeIssue                 // ISSUE
	OutcomeNeededPreauth         // NEEDED_PREAUTH: an attempt starts
	OutcomeMorePreauth           // MORE_PREAUTH_DATA_REQUIRED: a SPAKE round trip
	OutcomeWrongKey              // PREAUTH_FAILED "Preauthentication failed" (or "Decrypt integrity check failed"): a wrong key or a method fallback
	OutcomeUnknownClient         // CLIENT_NOT_FOUND
	OutcomeLockedOut             // LOCKED_OUT: the lockout policy's pw_max_fail reached
	OutcomePreauthFailed         // PREAUTH_FAILED for another reason (a clock skew): an attempt that may be recovered, never a wrong password
)

// Request is one AS or TGS request line. The byte slices are only read
// during Observe. An AS request carries its client's hash: the caller
// hashes the client for its own matching anyway (kdclog's recoveries),
// once for a login's several lines.
type Request struct {
	TGS     bool
	Outcome Outcome
	Client  []byte // client principal as logged
	Hash    uint64 // AS: maphash.Bytes(Seed(), Client), which the caller has at hand
	Addr    []byte // client address as logged
	Server  []byte // TGS: the service principal
	RC4     bool   // TGS ISSUE: the ticket or the reply is RC4 (etype 23)
	SPAKE   bool   // OutcomeWrongKey: the SPAKE module's verify failure preceded it

	// The pending-failure table's inputs (kdclog's request counters read
	// the same table): zero values let the detector derive them.
	Key       uint64   // AS: client and address hashed (KeyOf); 0: derived from Hash and Addr
	Source    uint32   // AS: the file the line came from; a failure recovers only in its own file
	Seq       uint64   // AS: the line's number among its file's AS lines; 0: the detector's own count of the AS lines it observed
	Method    uint8    // OutcomeWrongKey: the caller's method index of the failure
	Recovered []uint64 // OutcomeIssue: the failure lines this ISSUE recovers are added here, by Method
}

// KeyOf is the pending-failure table's key of a client (hashed with
// Seed) and an address (likewise).
func KeyOf(client, addr uint64) uint64 { return client ^ bits.RotateLeft64(addr, 17) }

// Signal is a kind of attack.
type Signal uint8

// Signals; label values in SignalNames.
const (
	PasswordSpraying Signal = iota // address: distinct principals with a wrong password
	BruteForce                     // principal: wrong passwords (from any address)
	UserEnumeration                // address: distinct unknown principals
	Kerberoasting                  // client: distinct services ticketed (RC4 apart)
	ASREPRoasting                  // address: distinct principals ticketed without pre-authentication
	NumSignals
)

// SignalNames are the signals' label values.
var SignalNames = [NumSignals]string{"password_spraying", "brute_force", "user_enumeration", "kerberoasting", "asrep_roasting"}

// OffenderKinds say what an offender of each signal is.
var OffenderKinds = [NumSignals]string{"address", "principal", "address", "principal", "address"}

// Event is a kind of event counted exactly.
type Event uint8

// Events; label values in EventNames.
const (
	EventWrongPassword    Event = iota // an attempt failed with a wrong key, not recovered
	EventLockout                       // LOCKED_OUT
	EventUnknownClient                 // CLIENT_NOT_FOUND
	EventRC4ServiceTicket              // TGS ISSUE with an RC4 ticket or reply
	EventNoPreauthTicket               // AS ISSUE with no pre-authentication step before it
	NumEvents
)

// EventNames are the events' label values.
var EventNames = [NumEvents]string{"wrong_password", "lockout", "unknown_client", "rc4_service_ticket", "no_preauth_ticket"}

// MaxName is how many bytes of an offender's name are kept; a longer
// name is cut and shown with "..." after it.
const MaxName = 48

// RecoverLines bounds the recovery wait in AS requests as well as in
// time, so that a log read from its beginning at full speed pairs lines
// as they were written (kdclog's recovery window is the same).
const RecoverLines = 1024

// MaxRecovered is how many attempts of one principal and address one
// ISSUE recovers at most: a user's typos, or two logins falling back from
// SPAKE at once; older ones are wrong passwords at once.
const MaxRecovered = 4

const (
	pendingCap  = 1024 // attempts awaiting recovery; a full table decides its oldest
	preauthSets = 1024 // recent pre-authentication steps, 4-way set-associative
	tgsSets     = 1024 // clients' recent services, 2-way set-associative
	tgsPromote  = 4    // distinct services at which a client enters the top k
)

// preauthSet holds the clients (32 bits of their hash, the low bits
// chose the set) that got a pre-authentication step lately, with the AS
// sequence number of it: half a cache line, and a login is wrongly taken
// for one without pre-authentication only when four others of the same
// set are in flight at once.
type preauthSet [4]struct{ key, seq uint32 }

func preauthKey(c uint64) uint32 { return uint32(c>>32) | 1 } // 0 marks a free way

func (p *preauthSet) mark(c, seq uint64) {
	k, w := preauthKey(c), -1
	for i := range p {
		switch {
		case p[i].key == k:
			p[i].seq = uint32(seq)
			return
		case w >= 0 && p[w].key == 0:
		case p[i].key == 0, w < 0, uint32(seq)-p[i].seq > uint32(seq)-p[w].seq:
			w = i // free, or the oldest
		}
	}
	p[w].key, p[w].seq = k, uint32(seq)
}

// take reports whether c had a step within RecoverLines AS lines and
// frees its way.
func (p *preauthSet) take(c, seq uint64) bool {
	k := preauthKey(c)
	for i := range p {
		if p[i].key == k {
			p[i].key = 0
			return uint32(seq)-p[i].seq <= RecoverLines
		}
	}
	return false
}

// steps are the clients' recent pre-authentication steps. A login's
// steps and its ISSUE mostly follow one another: the last step's client
// is kept apart, and only another client's step moves it into the
// set-associative table (a cache miss on a busy KDC). The table's sets
// that may hold a step younger than RecoverLines are marked, so that an
// ISSUE after its own step costs no look at the table; every
// RecoverLines AS lines the marks of sets without one are cleared.
type steps struct {
	last    uint64 // the last step's client hash, if lastOK
	lastSeq uint64
	lastOK  bool
	swept   uint64                   // the AS line of the last sweep
	live    [preauthSets / 64]uint64 // sets that may hold a step
	table   [preauthSets]preauthSet
}

func (t *steps) mark(c, seq uint64) {
	if seq-t.swept >= RecoverLines {
		t.sweep(seq)
	}
	if t.lastOK && t.last == c {
		t.lastSeq = seq
		return
	}
	if t.lastOK && seq-t.lastSeq <= RecoverLines {
		i := t.last % preauthSets
		t.table[i].mark(t.last, t.lastSeq)
		t.live[i/64] |= 1 << (i % 64)
	}
	t.last, t.lastSeq, t.lastOK = c, seq, true
}

// take reports whether c had a step within RecoverLines AS lines and
// forgets its steps.
func (t *steps) take(c, seq uint64) bool {
	ok := false
	if t.lastOK && t.last == c {
		t.lastOK = false
		ok = seq-t.lastSeq <= RecoverLines
	}
	if i := c % preauthSets; t.live[i/64]&(1<<(i%64)) != 0 {
		ok = t.table[i].take(c, seq) || ok // an older step of c goes too
	}
	return ok
}

// sweep frees the table's steps older than RecoverLines and unmarks the
// sets left empty.
func (t *steps) sweep(seq uint64) {
	t.swept = seq
	for w := range t.live {
		for m := t.live[w]; m != 0; m &= m - 1 {
			i := w*64 + bits.TrailingZeros64(m)
			empty := true
			for j := range t.table[i] {
				e := &t.table[i][j]
				if e.key != 0 && uint32(seq)-e.seq > RecoverLines {
					e.key = 0
				}
				empty = empty && e.key == 0
			}
			if empty {
				t.live[w] &^= 1 << (i % 64)
			}
		}
	}
}

// tgsSlot is a client's distinct services seen since it took the slot,
// their hashes. Most clients ask for a few services; only one with
// tgsPromote of them costs the top k's work (an offender name copied,
// the summary's slot taken), which keeps the TGS path cheap. Its services
// then go into its counts as they are, so none counts twice.
type tgsSlot struct {
	client uint64
	n      uint8 // services held, or tgsPromoted
	svc    [tgsPromote]uint64
}

const tgsPromoted = 255 // the n of a client handed to the top k

// add adds a service and reports whether it was new.
func (w *tgsSlot) add(h uint64) bool {
	for _, v := range w.svc[:w.n] {
		if v == h {
			return false
		}
	}
	w.svc[w.n] = h
	w.n++
	return true
}

// Detector holds every signal's state. It is not safe for concurrent use.
type Detector struct {
	cfg  config.AttackSignals
	seed maphash.Seed

	now         time.Time
	windowStart time.Time
	asSeq       uint64

	events     [NumEvents]uint64
	detections [NumSignals]uint64
	top        [NumSignals]topK
	limits     [NumSignals][2]int // distinct thresholds (and Kerberoasting's RC4 one)
	promote    int                // tgsPromote, or the Kerberoasting threshold if lower

	pending    [pendingCap]pending
	head, tail uint64       // pending[head%cap] ... pending[(tail-1)%cap]
	waiting    atomic.Int64 // tail-head, for Waiting
	idx        index        // key -> pos+1 of its newest attempt
	steps      steps
	tgs        [tgsSets][2]tgsSlot // clients' recent services, before the top k
}

// pending is one attempt awaiting its recovery.
type pending struct {
	pos      uint64 // absolute position in the ring
	key      uint64
	prev     uint64 // pos+1 of the key's next older attempt, if still undecided
	seq      uint64 // AS line of its source
	src      uint32
	at       time.Time
	done     bool     // recovered, or decided a wrong password already
	lines    uint8    // failure lines: 1, or 2 with a SPAKE fallback
	methods  [2]uint8 // their Method
	guess    bool     // a wrong key (OutcomeWrongKey): a wrong password unless recovered
	spake    bool     // the first failure was SPAKE's
	fellBack bool     // a failure of another method followed it, in the same attempt
	client   name
	addr     name
}

// New returns a detector configured by c (zero values take the defaults).
func New(c config.AttackSignals) *Detector {
	d := &Detector{seed: maphash.MakeSeed()}
	d.SetConfig(c)
	return d
}

// SetConfig changes the thresholds, the window and k; the counts stay,
// the offenders of the current window go if k changed.
func (d *Detector) SetConfig(c config.AttackSignals) {
	c = c.WithDefaults()
	limits := [NumSignals][2]int{
		PasswordSpraying: {c.SprayingPrincipals},
		UserEnumeration:  {c.EnumerationPrincipals},
		Kerberoasting:    {c.KerberoastingServices, c.KerberoastingRC4Services},
		ASREPRoasting:    {c.ASREPRoastingPrincipals},
	}
	if c.TopK != d.cfg.TopK || limits != d.limits {
		for s := range d.top {
			d.top[s] = newTopK(c.TopK, limits[s][0], limits[s][1])
		}
	}
	d.cfg, d.limits = c, limits
	d.promote = min(tgsPromote, c.KerberoastingServices)
}

// Tick sets the clock for the requests that follow: it starts a new
// window when the current one is over, and counts the failures whose
// recovery wait has passed. Call it before each batch of requests and
// before Snapshot.
func (d *Detector) Tick(now time.Time) {
	d.now = now
	if d.windowStart.IsZero() || now.Sub(d.windowStart) >= d.cfg.Window || now.Before(d.windowStart) {
		d.windowStart = now
		for s := range d.top {
			d.top[s].reset()
		}
		d.tgs = [tgsSets][2]tgsSlot{}
	}
	d.expire(noSource, 0)
}

// Waiting reports whether failures await their recovery: only then do a
// login's steps and its ISSUE matter to a detector that does not follow
// logins. Safe to call concurrently with the other methods.
func (d *Detector) Waiting() bool { return d.waiting.Load() != 0 }

// Observe counts one request.
func (d *Detector) Observe(r *Request) {
	if r.TGS {
		if r.Outcome == OutcomeIssue {
			d.serviceTicket(r)
		}
		return
	}
	d.asSeq++
	seq := r.Seq
	if seq == 0 {
		seq = d.asSeq
	}
	switch r.Outcome {
	case OutcomeIssue:
		c := r.Hash
		if d.tail > d.head {
			d.recover(d.key(r), r.Source, seq, r.Addr, r.Recovered)
		}
		if !d.cfg.FollowLogins {
			break
		}
		// Keyed by client alone: the KDC asks a principal that requires
		// pre-authentication for it whatever the address.
		if !d.steps.take(c, d.asSeq) {
			d.events[EventNoPreauthTicket]++
			d.add(ASREPRoasting, d.ref(r.Addr), c, false)
		}
	case OutcomeNeededPreauth, OutcomeMorePreauth:
		if d.cfg.FollowLogins {
			d.steps.mark(r.Hash, d.asSeq)
		}
	case OutcomeWrongKey, OutcomePreauthFailed:
		if d.cfg.FollowLogins {
			d.steps.mark(r.Hash, d.asSeq)
		}
		key := d.key(r)
		if p := d.newest(key, r.Source, r.Addr); r.Outcome == OutcomeWrongKey && p != nil && p.guess && p.spake && !p.fellBack && !r.SPAKE && seq-p.seq <= RecoverLines && d.now.Sub(p.at) < d.cfg.RecoveryWait {
			// A client without the KDC's SPAKE group falling back to
			// another method, with the same wrong password: one guess.
			p.seq, p.at, p.fellBack = seq, d.now, true
			p.methods[1], p.lines = r.Method, 2
			break
		}
		d.push(key, seq, r)
	case OutcomeUnknownClient:
		d.events[EventUnknownClient]++
		d.add(UserEnumeration, d.ref(r.Addr), r.Hash, false)
	case OutcomeLockedOut:
		d.events[EventLockout]++
	}
	if d.tail > d.head {
		d.expire(r.Source, seq)
	}
}

// key is r's pending-failure key, its source mixed in.
func (d *Detector) key(r *Request) uint64 {
	k := r.Key
	if k == 0 {
		k = KeyOf(r.Hash, maphash.Bytes(d.seed, r.Addr))
	}
	if k ^= uint64(r.Source) * 0x9e3779b97f4a7c15; k == 0 {
		k = 1 // 0 marks a free slot of the index
	}
	return k
}

// index maps the keys with attempts pending to the newest one's pos+1:
// linear probing over twice the ring's size (at most half full, as each
// key has an attempt in the ring), deletion by backward shift, so a
// look-up for a key without failures, most ISSUEs, ends at the first
// free slot.
type index struct {
	keys  [2 * pendingCap]uint64 // 0: free
	links [2 * pendingCap]uint64
}

func (x *index) slot(k uint64) int { return int(k>>32) & (2*pendingCap - 1) }

func (x *index) get(k uint64) uint64 {
	for i := x.slot(k); x.keys[i] != 0; i = (i + 1) & (2*pendingCap - 1) {
		if x.keys[i] == k {
			return x.links[i]
		}
	}
	return 0
}

func (x *index) put(k, link uint64) {
	i := x.slot(k)
	for x.keys[i] != 0 && x.keys[i] != k {
		i = (i + 1) & (2*pendingCap - 1)
	}
	x.keys[i], x.links[i] = k, link
}

func (x *index) del(k uint64) {
	const mask = 2*pendingCap - 1
	i := x.slot(k)
	for x.keys[i] != k {
		if x.keys[i] == 0 {
			return
		}
		i = (i + 1) & mask
	}
	// Move back each later key of the run that may live at i.
	for j := (i + 1) & mask; x.keys[j] != 0; j = (j + 1) & mask {
		if h := x.slot(x.keys[j]); (j-h)&mask >= (j-i)&mask {
			x.keys[i], x.links[i] = x.keys[j], x.links[j]
			i = j
		}
	}
	x.keys[i], x.links[i] = 0, 0
}

// noSource is no file's: expire by time alone.
const noSource = ^uint32(0)

func (d *Detector) serviceTicket(r *Request) {
	if r.RC4 {
		d.events[EventRC4ServiceTicket]++
	}
	if !r.RC4 && !d.cfg.FollowServiceTickets {
		return // the common case costs no hash
	}
	c, svc := maphash.Bytes(d.seed, r.Client), maphash.Bytes(d.seed, r.Server)
	if r.RC4 {
		d.add(Kerberoasting, d.ref(r.Client), svc, true)
		return
	}
	set := &d.tgs[c%tgsSets]
	w := &set[0]
	switch {
	case set[0].client == c:
	case set[1].client == c:
		w = &set[1]
	default:
		// The slot with fewer services goes: a client collecting
		// services holds on against ones asking for one or two.
		if set[1].n < set[0].n {
			w = &set[1]
		}
		*w = tgsSlot{client: c}
	}
	if w.n == tgsPromoted { // the top k counts it now
		d.add(Kerberoasting, d.ref(r.Client), svc, false)
		return
	}
	if !w.add(svc) || int(w.n) < d.promote {
		return
	}
	e := d.add(Kerberoasting, d.ref(r.Client), svc, false)
	for _, h := range w.svc[:w.n-1] { // the services seen before
		e.distinct.add(h)
		e.exact.add(h)
	}
	d.check(Kerberoasting, e)
	w.n = tgsPromoted
}

// at returns the undecided attempt at pos+1 (a link of idx or prev).
func (d *Detector) at(link uint64) *pending {
	if link == 0 || link-1 < d.head || link-1 >= d.tail {
		return nil
	}
	if p := &d.pending[(link-1)%pendingCap]; p.pos == link-1 && !p.done {
		return p
	}
	return nil
}

// same reports whether p is of the attempt's source and address (the key
// holds the client and address hashed; the address bytes and the source
// make a match exact).
func (p *pending) same(src uint32, addr []byte) bool {
	return p.src == src && bytes.Equal(p.addr.b[:p.addr.n], addr[:min(len(addr), MaxName)])
}

// newest returns key's newest undecided attempt in src from addr.
func (d *Detector) newest(key uint64, src uint32, addr []byte) *pending {
	if p := d.at(d.idx.get(key)); p != nil && p.key == key && p.same(src, addr) {
		return p
	}
	return nil
}

// recover marks the attempts of key in src from addr within the window
// at seq recovered, adding their failure lines to recovered by method.
func (d *Detector) recover(key uint64, src uint32, seq uint64, addr []byte, recovered []uint64) {
	link := d.idx.get(key)
	if link == 0 {
		return
	}
	for p := d.at(link); p != nil && p.key == key; p = d.at(p.prev) {
		if !p.same(src, addr) || seq-p.seq > RecoverLines || d.now.Sub(p.at) >= d.cfg.RecoveryWait {
			continue // expires as a wrong password
		}
		p.done = true
		for _, m := range p.methods[:p.lines] {
			if int(m) < len(recovered) {
				recovered[m]++
			}
		}
	}
	d.idx.del(key)
}

// push adds a new attempt of key; an attempt of the same client and
// address beyond the newest MaxRecovered is decided now.
func (d *Detector) push(key, seq uint64, r *Request) {
	if d.tail-d.head == pendingCap {
		d.pop() // the oldest counts now, unrecovered so far
	}
	pos := d.tail
	prev := d.idx.get(key)
	n := 1
	for q, last := d.at(prev), (*pending)(nil); q != nil && q.key == key; last, q = q, d.at(q.prev) {
		if !q.same(r.Source, r.Addr) {
			continue
		}
		if n == MaxRecovered {
			d.decide(q)
			if last != nil {
				last.prev = q.prev
			} else {
				prev = q.prev
			}
			break
		}
		n++
	}
	p := &d.pending[pos%pendingCap]
	*p = pending{pos: pos, key: key, prev: prev, seq: seq, src: r.Source, at: d.now, guess: r.Outcome == OutcomeWrongKey, spake: r.SPAKE, lines: 1}
	p.methods[0] = r.Method
	p.client.set(d.ref(r.Client))
	p.addr.set(d.ref(r.Addr))
	d.tail++
	d.waiting.Add(1)
	d.idx.put(key, pos+1)
}

// expire decides the attempts whose wait is over: by time, or when the
// next AS line of their source would be more than RecoverLines after
// them (src's line at hand is seq).
func (d *Detector) expire(src uint32, seq uint64) {
	for d.head < d.tail {
		p := &d.pending[d.head%pendingCap]
		if !p.done && d.now.Sub(p.at) < d.cfg.RecoveryWait && (p.src != src || seq-p.seq < RecoverLines) {
			return
		}
		d.pop()
	}
}

func (d *Detector) pop() {
	p := &d.pending[d.head%pendingCap]
	d.head++
	d.waiting.Add(-1)
	if d.idx.get(p.key) == p.pos+1 {
		d.idx.del(p.key)
	}
	d.decide(p)
}

// decide counts p a wrong password unless it was recovered or decided.
func (d *Detector) decide(p *pending) {
	if p.done {
		return
	}
	p.done = true
	if !p.guess {
		return
	}
	d.events[EventWrongPassword]++
	d.add(PasswordSpraying, p.addr.ref(), p.client.item, false)
	d.add(BruteForce, p.client.ref(), p.addr.item, false)
}

// add counts one event of offender o with item (the principal, service or
// address it concerns) and records a detection when o crosses the
// signal's threshold in this window.
func (d *Detector) add(s Signal, o ref, item uint64, rc4 bool) *entry {
	e := d.top[s].add(o)
	e.distinct.add(item)
	grew := e.exact.add(item)
	if rc4 {
		e.rc4.add(item)
		grew = e.exactRC4.add(item) || grew
	}
	if grew || s == BruteForce {
		d.check(s, e)
	}
	return e
}

// check records a detection when e reaches its signal's threshold.
func (d *Detector) check(s Signal, e *entry) {
	if e.fired {
		return
	}
	var hit bool
	switch s {
	case BruteForce:
		hit = e.count-e.err >= uint64(d.cfg.BruteForceFailures)
	case Kerberoasting:
		hit = e.exact.full() || e.exactRC4.full()
	default:
		hit = e.exact.full()
	}
	if hit {
		e.fired = true
		d.detections[s]++
	}
}

// Offender is one of a signal's top k in the current window.
type Offender struct {
	Name     string  // sanitized (Sanitize), at most 4*MaxName+3 bytes
	Score    float64 // what the threshold applies to: distinct principals/services, or failures (brute force)
	Events   uint64  // the offender's events in the window (Space-Saving: at most Error too many)
	Error    uint64
	Detected bool // crossed the threshold in this window
}

// Snapshot is the detector's state for export.
type Snapshot struct {
	Events      [NumEvents]uint64
	Detections  [NumSignals]uint64
	Offenders   [NumSignals][]Offender // best first, names unique per signal
	WindowStart time.Time
}

// Snapshot fills s (its slices are reused).
func (d *Detector) Snapshot(s *Snapshot) {
	s.Events, s.Detections, s.WindowStart = d.events, d.detections, d.windowStart
	for sig := range d.top {
		out := s.Offenders[sig][:0]
		seen := map[string]int{}
		for i := range d.top[sig].e {
			e := &d.top[sig].e[i]
			o := Offender{Name: e.name.String(), Events: e.count, Error: e.err, Detected: e.fired}
			if Signal(sig) == BruteForce {
				o.Score = float64(e.count - e.err)
			} else {
				o.Score = e.score()
			}
			if j, ok := seen[o.Name]; ok { // two names cut to the same prefix
				if o.Score > out[j].Score {
					out[j] = o
				}
				continue
			}
			seen[o.Name] = len(out)
			out = append(out, o)
		}
		sort.Slice(out, func(i, j int) bool {
			if out[i].Score != out[j].Score {
				return out[i].Score > out[j].Score
			}
			return out[i].Name < out[j].Name
		})
		s.Offenders[sig] = out
	}
}

// Seed is the seed of the hashes in a Request.
func (d *Detector) Seed() maphash.Seed { return d.seed }

// Config returns the configuration in effect, defaults filled in.
func (d *Detector) Config() config.AttackSignals { return d.cfg }

// ref is a name in a log line: its first MaxName bytes, the hash of
// those (the offender's identity, so that names cut alike are one
// offender) and the hash of the whole (the item's identity in a sketch).
type ref struct {
	id, item uint64
	b        []byte // at most MaxName bytes
	cut      bool
}

func (d *Detector) ref(v []byte) ref {
	if len(v) > MaxName {
		return ref{id: maphash.Bytes(d.seed, v[:MaxName]), item: maphash.Bytes(d.seed, v), b: v[:MaxName], cut: true}
	}
	h := maphash.Bytes(d.seed, v)
	return ref{id: h, item: h, b: v}
}

// name is a ref kept: its bytes copied.
type name struct {
	id, item uint64
	n        uint8
	cut      bool
	b        [MaxName]byte
}

func (n *name) set(r ref) {
	n.id, n.item, n.cut = r.id, r.item, r.cut
	n.n = uint8(copy(n.b[:], r.b))
}

func (n *name) ref() ref { return ref{id: n.id, item: n.item, b: n.b[:n.n], cut: n.cut} }

func (n *name) String() string { return sanitize(n.b[:n.n], n.cut) }

// Sanitize makes a log field a label value: printable ASCII as it is,
// every other byte and the backslash escaped (\xNN, \\), cut to MaxName
// bytes with "..." after. Distinct inputs of at most MaxName bytes give
// distinct outputs.
func Sanitize(v []byte) string {
	if len(v) > MaxName {
		return sanitize(v[:MaxName], true)
	}
	return sanitize(v, false)
}

func sanitize(v []byte, cut bool) string {
	var b strings.Builder
	b.Grow(len(v) + 3)
	const hex = "0123456789abcdef"
	for _, c := range v {
		switch {
		case c == '\\':
			b.WriteString(`\\`)
		case c < 0x20 || c >= 0x7f:
			b.WriteString(`\x`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		default:
			b.WriteByte(c)
		}
	}
	if cut {
		b.WriteString("...")
	}
	return b.String()
}

// sketch estimates distinct items by linear counting over 512 bits, for
// an offender's score beyond its threshold (the threshold itself is
// counted exactly: set).
type sketch struct {
	w    [8]uint64
	ones int
}

const sketchBits = 512

func sketchIndex(h uint64) uint64 { return h >> 55 }

// add sets h's bit and reports whether it was clear.
func (s *sketch) add(h uint64) bool { return s.set(sketchIndex(h)) }

// set sets bit b and reports whether it was clear.
func (s *sketch) set(b uint64) bool {
	w, m := &s.w[b>>6], uint64(1)<<(b&63)
	if *w&m != 0 {
		return false
	}
	*w |= m
	s.ones++
	return true
}

func (s *sketch) zeros() int { return sketchBits - s.ones }

func (s *sketch) estimate() float64 {
	z := s.zeros()
	if z == 0 {
		z = 1 // saturated: the largest estimate it can give
	}
	return math.Round(-sketchBits*math.Log(float64(z)/sketchBits)*10) / 10
}

// entry is one offender of a Space-Saving summary. Its distinct items
// are counted exactly up to the threshold (exact, exactRC4), so that a
// tracked offender fires at N distinct items and never at N-1; the
// sketches estimate the score beyond.
type entry struct {
	name     name
	count    uint64 // events, over-counted by at most err
	err      uint64
	distinct sketch
	rc4      sketch
	exact    set
	exactRC4 set
	fired    bool
}

// score is the distinct items: exact up to half the set's table (at
// least the threshold), the sketch's estimate beyond.
func (e *entry) score() float64 {
	if e.exact.n < len(e.exact.h)/2 {
		return float64(e.exact.n)
	}
	return max(float64(e.exact.n), e.distinct.estimate())
}

// renew makes e a new offender's, keeping its sets' memory.
func (e *entry) renew(count, err uint64) {
	x, r := e.exact, e.exactRC4
	x.reset()
	r.reset()
	*e = entry{count: count, err: err, exact: x, exactRC4: r}
}

// set counts distinct item hashes exactly up to limit (and on while its
// table is at most half full): an open-addressing table of at least twice
// limit, allocated once (memory O(k * limit),
// whatever the log holds). Two items are one only if their 64-bit seeded
// hashes are equal.
type set struct {
	h        []uint64 // 0: free
	n, limit int
}

func newSet(limit int) set {
	size := 0
	if limit > 0 {
		size = 2
		for size < 2*limit {
			size *= 2
		}
	}
	return set{h: make([]uint64, size), limit: limit}
}

func (s *set) reset() {
	if s.n > 0 {
		clear(s.h)
	}
	s.n = 0
}

func (s *set) full() bool { return s.limit > 0 && s.n >= s.limit }

// add adds h and reports whether it was new. It counts on past the
// limit while the table is at most half full (the score stays exact a
// little beyond the threshold), then no more.
func (s *set) add(h uint64) bool {
	if s.n >= len(s.h)/2 {
		return false
	}
	if h == 0 {
		h = 1
	}
	mask := len(s.h) - 1
	for i := int(h>>40) & mask; ; i = (i + 1) & mask {
		switch s.h[i] {
		case 0:
			s.h[i] = h
			s.n++
			return true
		case h:
			return false
		}
	}
}

// topK is a Space-Saving summary of at most cap(e) offenders. k is small
// (config.MaxAttackTopK): a linear scan of their ids (apart, in a few
// cache lines) beats a map and allocates nothing.
type topK struct {
	e      []entry
	ids    []uint64 // e[i].name.id
	counts []uint64 // e[i].count
}

func newTopK(k, limit, limitRC4 int) topK {
	t := topK{e: make([]entry, k), ids: make([]uint64, 0, k), counts: make([]uint64, 0, k)}
	for i := range t.e {
		t.e[i].exact, t.e[i].exactRC4 = newSet(limit), newSet(limitRC4)
	}
	t.e = t.e[:0]
	return t
}

func (t *topK) reset() { t.e, t.ids, t.counts = t.e[:0], t.ids[:0], t.counts[:0] }

// add counts one event of o and returns its entry: a new offender takes
// the slot of the one with the fewest events and inherits its count as
// its possible error.
func (t *topK) add(o ref) *entry {
	for i, id := range t.ids {
		if id == o.id {
			t.e[i].count++
			t.counts[i]++
			return &t.e[i]
		}
	}
	if len(t.e) < cap(t.e) {
		t.e = t.e[:len(t.e)+1]
		t.ids = append(t.ids, o.id)
		t.counts = append(t.counts, 1)
		e := &t.e[len(t.e)-1]
		e.renew(1, 0)
		e.name.set(o)
		return e
	}
	m := 0
	for i, c := range t.counts {
		if c < t.counts[m] {
			m = i
		}
	}
	min := t.counts[m]
	t.e[m].renew(min+1, min)
	t.e[m].name.set(o)
	t.ids[m], t.counts[m] = o.id, min+1
	return &t.e[m]
}
