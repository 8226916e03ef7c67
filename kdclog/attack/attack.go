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
// services of an offender are counted with a fixed 512-bit linear-counting
// sketch, and offender names are stored cut to MaxName bytes. A spray from
// 100,000 forged addresses churns the k slots; it grows nothing.
//
// A wrong password is a PREAUTH_FAILED that no ISSUE for the same client
// and address follows within RecoveryWait (or within the next
// RecoverLines AS requests): a SPAKE group the KDC lacks, or a client
// falling back from one method to another, recovers at once and is not a
// guess. Failures of one attempt (no NEEDED_PREAUTH between them: a
// P-256-only client's SPAKE failure, then its encrypted timestamp one)
// count once.
package attack

import (
	"hash/maphash"
	"math"
	"math/bits"
	"sort"
	"strings"
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
)

// Request is one AS or TGS request line. The byte slices are only read
// during Observe.
type Request struct {
	TGS     bool
	Outcome Outcome
	Client  []byte // client principal as logged
	Addr    []byte // client address as logged
	Server  []byte // TGS: the service principal
	RC4     bool   // TGS ISSUE: the ticket or the reply is RC4 (etype 23)
}

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
	EventServiceTicket                 // TGS ISSUE
	EventRC4ServiceTicket              // TGS ISSUE with an RC4 ticket or reply
	EventNoPreauthTicket               // AS ISSUE with no pre-authentication step before it
	NumEvents
)

// EventNames are the events' label values.
var EventNames = [NumEvents]string{"wrong_password", "lockout", "unknown_client", "service_ticket", "rc4_service_ticket", "no_preauth_ticket"}

// MaxName is how many bytes of an offender's name are kept; a longer
// name is cut and shown with "..." after it.
const MaxName = 48

// RecoverLines bounds the recovery wait in AS requests as well as in
// time, so that a log read from its beginning at full speed pairs lines
// as they were written (kdclog's recovery window is the same).
const RecoverLines = 1024

const (
	pendingCap  = 256  // wrong-key failures awaiting recovery
	pendingIdx  = 1024 // their index by client and address, direct-mapped
	preauthSlot = 4096 // recent pre-authentication steps, direct-mapped
)

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
	zmax       [NumSignals]int // distinct thresholds as "at most this many zero bits"
	zmaxRC4    int

	pending    [pendingCap]pending
	head, tail uint64 // pending[head%cap] ... pending[(tail-1)%cap]
	idx        [pendingIdx]uint64
	preauth    [preauthSlot]struct{ key, seq uint64 }
}

type pending struct {
	pos       uint64 // absolute position in the ring, to check idx
	key       uint64
	seq       uint64
	at        time.Time
	recovered bool
	closed    bool // a NEEDED_PREAUTH began another attempt since
	client    name
	addr      name
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
	if c.TopK != d.cfg.TopK {
		for s := range d.top {
			d.top[s] = topK{e: make([]entry, 0, c.TopK)}
		}
	}
	d.cfg = c
	d.zmax[PasswordSpraying] = zeroBitsFor(c.SprayingPrincipals)
	d.zmax[UserEnumeration] = zeroBitsFor(c.EnumerationPrincipals)
	d.zmax[Kerberoasting] = zeroBitsFor(c.KerberoastingServices)
	d.zmax[ASREPRoasting] = zeroBitsFor(c.ASREPRoastingPrincipals)
	d.zmaxRC4 = zeroBitsFor(c.KerberoastingRC4Services)
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
			d.top[s].e = d.top[s].e[:0]
		}
	}
	d.expire()
}

// Observe counts one request.
func (d *Detector) Observe(r *Request) {
	if r.TGS {
		if r.Outcome == OutcomeIssue {
			d.serviceTicket(r)
		}
		return
	}
	d.asSeq++
	switch r.Outcome {
	case OutcomeIssue:
		key := d.key(r)
		// A pending failure of this client and address recovered.
		if p := d.lookup(key); p != nil {
			p.recovered = true
		}
		s := &d.preauth[key%preauthSlot]
		if s.key == key && s.seq != 0 && d.asSeq-s.seq <= RecoverLines {
			*s = struct{ key, seq uint64 }{}
		} else {
			d.events[EventNoPreauthTicket]++
			var a, c name
			a.set(d.seed, r.Addr)
			c.set(d.seed, r.Client)
			d.add(ASREPRoasting, &a, c.item, false)
		}
	case OutcomeNeededPreauth, OutcomeMorePreauth:
		key := d.key(r)
		d.preauth[key%preauthSlot] = struct{ key, seq uint64 }{key, d.asSeq}
		if r.Outcome == OutcomeNeededPreauth {
			if p := d.lookup(key); p != nil {
				p.closed = true
			}
		}
	case OutcomeWrongKey:
		key := d.key(r)
		d.preauth[key%preauthSlot] = struct{ key, seq uint64 }{key, d.asSeq}
		if p := d.lookup(key); p != nil && !p.closed && !p.recovered {
			// The same attempt failing with another method: one guess.
			p.seq, p.at = d.asSeq, d.now
			break
		}
		d.push(key, r)
	case OutcomeUnknownClient:
		d.events[EventUnknownClient]++
		var a, c name
		a.set(d.seed, r.Addr)
		c.set(d.seed, r.Client)
		d.add(UserEnumeration, &a, c.item, false)
	case OutcomeLockedOut:
		d.events[EventLockout]++
	}
	d.expire()
}

func (d *Detector) serviceTicket(r *Request) {
	d.events[EventServiceTicket]++
	if r.RC4 {
		d.events[EventRC4ServiceTicket]++
	}
	var c name
	c.set(d.seed, r.Client)
	d.add(Kerberoasting, &c, maphash.Bytes(d.seed, r.Server), r.RC4)
}

// key identifies a login by client and address.
func (d *Detector) key(r *Request) uint64 {
	k := maphash.Bytes(d.seed, r.Client) ^ bits.RotateLeft64(maphash.Bytes(d.seed, r.Addr), 17)
	if k == 0 {
		k = 1 // 0 marks an empty slot
	}
	return k
}

// lookup returns the live pending failure of key, if any.
func (d *Detector) lookup(key uint64) *pending {
	pos := d.idx[key%pendingIdx]
	if pos == 0 || pos-1 < d.head || pos-1 >= d.tail {
		return nil
	}
	p := &d.pending[(pos-1)%pendingCap]
	if p.pos != pos-1 || p.key != key {
		return nil
	}
	return p
}

func (d *Detector) push(key uint64, r *Request) {
	if d.tail-d.head == pendingCap {
		d.pop() // the oldest counts now, unrecovered so far
	}
	pos := d.tail
	p := &d.pending[pos%pendingCap]
	*p = pending{pos: pos, key: key, seq: d.asSeq, at: d.now}
	p.client.set(d.seed, r.Client)
	p.addr.set(d.seed, r.Addr)
	d.tail++
	d.idx[key%pendingIdx] = pos + 1
}

// expire counts the failures whose wait is over.
func (d *Detector) expire() {
	for d.head < d.tail {
		p := &d.pending[d.head%pendingCap]
		if !p.recovered && d.now.Sub(p.at) < d.cfg.RecoveryWait && d.asSeq-p.seq <= RecoverLines {
			return
		}
		d.pop()
	}
}

func (d *Detector) pop() {
	p := &d.pending[d.head%pendingCap]
	d.head++
	if p.recovered {
		return
	}
	d.events[EventWrongPassword]++
	d.add(PasswordSpraying, &p.addr, p.client.item, false)
	d.add(BruteForce, &p.client, p.addr.item, false)
}

// add counts one event of offender o with item (the principal, service or
// address it concerns) and records a detection when o crosses the
// signal's threshold in this window.
func (d *Detector) add(s Signal, o *name, item uint64, rc4 bool) {
	e := d.top[s].add(o)
	e.distinct.add(item)
	if rc4 {
		e.rc4.add(item)
	}
	if e.fired {
		return
	}
	var hit bool
	switch s {
	case BruteForce:
		hit = e.count-e.err >= uint64(d.cfg.BruteForceFailures)
	case Kerberoasting:
		hit = e.distinct.zeros() <= d.zmax[s] || e.rc4.zeros() <= d.zmaxRC4
	default:
		hit = e.distinct.zeros() <= d.zmax[s]
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
				o.Score = e.distinct.estimate()
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

// Config returns the configuration in effect, defaults filled in.
func (d *Detector) Config() config.AttackSignals { return d.cfg }

// name is an offender's or item's name: its first MaxName bytes, the hash
// of those (the offender's identity, so that names cut alike are one
// offender) and the hash of the whole (the item's identity in a sketch).
type name struct {
	id, item uint64
	n        uint8
	cut      bool
	b        [MaxName]byte
}

func (n *name) set(seed maphash.Seed, v []byte) {
	n.cut = len(v) > MaxName
	if n.cut {
		n.n = uint8(copy(n.b[:], v[:MaxName]))
		n.id = maphash.Bytes(seed, n.b[:n.n])
		n.item = maphash.Bytes(seed, v)
		return
	}
	n.n = uint8(copy(n.b[:], v))
	n.id = maphash.Bytes(seed, v)
	n.item = n.id
}

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

// sketch counts distinct items by linear counting over 512 bits: exact
// enough for the thresholds (up to config.MaxAttackThreshold), fixed size.
type sketch [8]uint64

const sketchBits = 512

func (s *sketch) add(h uint64) { b := h >> 55; s[b>>6] |= 1 << (b & 63) }

func (s *sketch) zeros() int {
	n := 0
	for _, w := range s {
		n += bits.OnesCount64(w)
	}
	return sketchBits - n
}

func (s *sketch) estimate() float64 {
	z := s.zeros()
	if z == 0 {
		z = 1 // saturated: the largest estimate it can give
	}
	return math.Round(-sketchBits*math.Log(float64(z)/sketchBits)*10) / 10
}

// zeroBitsFor is the largest number of zero bits at which the estimate
// reaches t distinct items.
func zeroBitsFor(t int) int {
	return int(math.Floor(sketchBits * math.Exp(-float64(t)/sketchBits)))
}

// entry is one offender of a Space-Saving summary.
type entry struct {
	name     name
	count    uint64 // events, over-counted by at most err
	err      uint64
	distinct sketch
	rc4      sketch
	fired    bool
}

// topK is a Space-Saving summary of at most cap(e) offenders. k is small
// (config.MaxAttackTopK): a linear scan beats a map and allocates nothing.
type topK struct{ e []entry }

// add counts one event of o and returns its entry: a new offender takes
// the slot of the one with the fewest events and inherits its count as
// its possible error.
func (t *topK) add(o *name) *entry {
	for i := range t.e {
		if t.e[i].name.id == o.id {
			t.e[i].count++
			return &t.e[i]
		}
	}
	if len(t.e) < cap(t.e) {
		t.e = append(t.e, entry{name: *o, count: 1})
		return &t.e[len(t.e)-1]
	}
	m := 0
	for i := range t.e {
		if t.e[i].count < t.e[m].count {
			m = i
		}
	}
	min := t.e[m].count
	t.e[m] = entry{name: *o, count: min + 1, err: min}
	return &t.e[m]
}
