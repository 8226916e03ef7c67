// Package attack turns the requests a KDC logs into attack signals:
// password spraying, brute force against one account, user enumeration,
// Kerberoasting and AS-REP roasting. It knows nothing of log formats or
// Prometheus: kdclog feeds it one Request per AS or TGS line and exports
// its Snapshot.
//
// Every offender of a window is counted exactly, up to a bound on memory
// (config.AttackSignals.TrackedOffenders; MaxBytes): its events, and its
// distinct principals or services through a set of the window's distinct
// (offender, item) pairs, both tables of hashes keyed with the process's
// random seed. Nothing pushes an offender out, so decoys below a
// threshold cannot hide one above it; offenders beyond the bound go to a
// count-min sketch that never counts too few. The k exported per signal
// are the window's highest scores; their names are stored cut to MaxName
// bytes.
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
	"hash/maphash"
	"math/bits"
	"sort"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

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
	tgsPromote  = 4    // distinct services at which a client enters the offender table
)

// tgsSlot is a client's distinct services seen since it took the slot,
// their hashes. Most clients ask for a few services; only one with
// tgsPromote of them costs the offender table's work (its slot, its
// pairs), which keeps the TGS path cheap. Its services
// then go into its counts as they are, so none counts twice.
type tgsSlot struct {
	client uint64
	n      uint8 // services held, or tgsPromoted
	svc    [tgsPromote]uint64
}

const tgsPromoted = 255 // the n of a client handed to the offender table

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
	untracked  [NumSignals]uint64 // events of offenders beyond the table
	sig        [NumSignals]offenders
	spread     [NumSpreads]distinct
	limits     [NumSignals][2]int // thresholds (and Kerberoasting's RC4 one)
	tracked    int                // offenders a signal tracks per window
	promote    int                // tgsPromote, or the Kerberoasting threshold if lower

	pending    [pendingCap]pending
	head, tail uint64       // pending[head%cap] ... pending[(tail-1)%cap]
	waiting    atomic.Int64 // tail-head, for Waiting
	idx        index        // key -> pos+1 of its newest attempt
	steps      steps
	tgs        [tgsSets][2]tgsSlot // clients' recent services, before the offender table
}

// New returns a detector configured by c (zero values take the defaults).
func New(c config.AttackSignals) *Detector {
	d := &Detector{seed: maphash.MakeSeed()}
	for k := range d.spread {
		d.spread[k].exact.reset()
	}
	d.SetConfig(c)
	return d
}

// SetConfig changes the thresholds, the window and k; the counts stay,
// the offenders of the current window go if k changed.
func (d *Detector) SetConfig(c config.AttackSignals) {
	c = c.WithDefaults()
	limits := [NumSignals][2]int{
		PasswordSpraying: {c.SprayingPrincipals},
		BruteForce:       {c.BruteForceFailures},
		UserEnumeration:  {c.EnumerationPrincipals},
		Kerberoasting:    {c.KerberoastingServices, c.KerberoastingRC4Services},
		ASREPRoasting:    {c.ASREPRoastingPrincipals},
	}
	if c.TopK != d.cfg.TopK || limits != d.limits || c.TrackedOffenders != d.tracked {
		for s := range d.sig {
			d.sig[s] = offenders{top: newTop(c.TopK)}
			d.sig[s].reset()
		}
	}
	d.cfg, d.limits, d.tracked = c, limits, c.TrackedOffenders
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
		for s := range d.sig {
			d.sig[s].reset()
		}
		for k := range d.spread {
			d.spread[k].next()
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
		d.spread[SpreadUnknownClient].add(r.Hash)
		d.add(UserEnumeration, d.ref(r.Addr), r.Hash, false)
	case OutcomeLockedOut:
		d.events[EventLockout]++
	}
	if d.tail > d.head {
		d.expire(r.Source, seq)
	}
}

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
	if w.n == tgsPromoted { // the offender table counts it now
		d.add(Kerberoasting, d.ref(r.Client), svc, false)
		return
	}
	if !w.add(svc) || int(w.n) < d.promote {
		return
	}
	o := d.ref(r.Client)
	for _, h := range w.svc[:w.n-1] { // the services seen before, no event each
		d.count(Kerberoasting, o, h, false, false)
	}
	d.add(Kerberoasting, o, svc, false)
	w.n = tgsPromoted
}

// add counts one event of offender o with item (the principal, service or
// address it concerns) and records a detection when o crosses the
// signal's threshold in this window.
func (d *Detector) add(s Signal, o ref, item uint64, rc4 bool) { d.count(s, o, item, rc4, true) }

// count adds item to o's distinct ones, and counts an event if event.
func (d *Detector) count(s Signal, o ref, item uint64, rc4, event bool) {
	st := &d.sig[s]
	e := st.tab.get(o.id, d.tracked)
	if e == nil { // beyond the table: the overflow sketch counts its events
		if !event {
			return
		}
		d.untracked[s]++
		limit := d.limits[s][0]
		if rc4 {
			limit = d.limits[s][1]
		}
		if st.over.add(o.id, limit) {
			d.detections[s]++
		}
		return
	}
	if event && e.count < ^uint32(0) {
		e.count++
	}
	score := e.count
	if s != BruteForce {
		grew := st.pair(o.id, item, 0, d.tracked)
		if grew {
			e.distinct++
		}
		if rc4 && st.pair(o.id, item, rc4Pair, d.tracked) {
			e.rc4++
			grew = true
		}
		if !grew {
			return
		}
		score = e.distinct
	}
	st.top.offer(e, o, score, &st.tab)
	d.check(s, e)
}

// rc4Pair sets an RC4 service's pairs apart from the same service's.
const rc4Pair = 0x9e3779b97f4a7c15

// pair adds (id, item) to the signal's pairs and reports whether it was
// new; with no room left it counts as new (never one too few).
func (st *offenders) pair(id, item, kind uint64, tracked int) bool {
	h := mix(id ^ mix(item^kind))
	if h == 0 {
		h = 1
	}
	isNew, _ := st.pairs.add(h, pairsPerOffender*tracked)
	return isNew
}

// check records a detection when e reaches its signal's threshold.
func (d *Detector) check(s Signal, e *tracked) {
	if e.fired {
		return
	}
	l := d.limits[s]
	var hit bool
	switch s {
	case BruteForce:
		hit = int(e.count) >= l[0]
	case Kerberoasting:
		hit = int(e.distinct) >= l[0] || int(e.rc4) >= l[1]
	default:
		hit = int(e.distinct) >= l[0]
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
	Events   uint64  // the offender's events in the window
	Detected bool    // crossed the threshold in this window
}

// Snapshot is the detector's state for export.
type Snapshot struct {
	Events      [NumEvents]uint64
	Detections  [NumSignals]uint64
	Untracked   [NumSignals]uint64     // events of offenders beyond the table (TrackedOffenders), all windows
	Tracked     [NumSignals]int        // offenders in the current window's table
	Principals  [NumSpreads]uint64     // principals across all addresses, each once a window
	Offenders   [NumSignals][]Offender // best first, names unique per signal
	WindowStart time.Time
}

// Snapshot fills s (its slices are reused).
func (d *Detector) Snapshot(s *Snapshot) {
	s.Events, s.Detections, s.Untracked, s.WindowStart = d.events, d.detections, d.untracked, d.windowStart
	for k := range d.spread {
		s.Principals[k] = d.spread[k].total()
	}
	for sig := range d.sig {
		st := &d.sig[sig]
		s.Tracked[sig] = st.tab.n
		out := s.Offenders[sig][:0]
		for i, id := range st.top.ids {
			if e := st.tab.find(id); e != nil {
				out = append(out, Offender{Name: st.top.names[i].String(), Score: float64(st.top.scores[i]), Events: uint64(e.count), Detected: e.fired})
			}
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

// Bytes is the memory the offender tables hold now; MaxBytes the most
// they can (config.AttackSignals.TrackedOffenders).
func (d *Detector) Bytes() int {
	n := 0
	for s := range d.sig {
		n += d.sig[s].bytes()
	}
	for k := range d.spread {
		n += sizeofDistinct - 24 + 8*len(d.spread[k].exact.h)
	}
	return n
}

// MaxBytes is what Bytes can reach: every signal's table and pairs full.
func (d *Detector) MaxBytes() int {
	return MaxBytes(d.cfg)
}

// MaxBytes is the most memory the offender tables of a detector
// configured with c hold: per signal, TrackedOffenders offenders and
// (brute force apart, which counts no items) eight times as many
// distinct pairs, each table at most 7/8 full with a power of two of
// slots; the overflow sketch and the top k's names.
func MaxBytes(c config.AttackSignals) int {
	c = c.WithDefaults()
	pairs := 8 * max(pairsPerOffender*initialSlots, slotsFor(pairsPerOffender*c.TrackedOffenders))
	per := slotsFor(c.TrackedOffenders)*sizeofTracked + sizeofOverflow + c.TopK*(8+4+sizeofName)
	spread := int(NumSpreads) * (sizeofDistinct - 24 + 8*pairsPerOffender*initialSlots)
	return int(NumSignals)*per + int(NumSignals-1)*pairs + 8*pairsPerOffender*initialSlots + spread
}

const (
	sizeofTracked  = int(unsafe.Sizeof(tracked{}))
	sizeofName     = int(unsafe.Sizeof(name{}))
	sizeofOverflow = int(unsafe.Sizeof(overflow{}))
	sizeofDistinct = int(unsafe.Sizeof(distinct{})) // its pairSet's slice header (24 bytes) apart
)

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
