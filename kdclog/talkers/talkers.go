// Package talkers counts who loads the KDC: the client addresses, client
// principals and services with the most requests in a tumbling window,
// for all requests, for failed ones apart, and the addresses of
// retransmitted requests. It knows nothing of log formats or Prometheus:
// kdclog feeds it one call per request line and exports its Snapshot.
//
// Memory is fixed by k whatever the log holds. Each list is a
// Space-Saving summary (Metwally, Agrawal and El Abbadi, 2005) of
// Slack*k counters over the current window: a name already counted costs
// a hash and a probe of a small open-addressing index, no allocation; a
// new name takes a free counter, or the one with the fewest requests,
// whose count it inherits as its possible error. So, of a window of N
// requests in a list, every name with more than N/(Slack*k) of them is
// held, and a name held is over-counted by at most its error (at most
// N/(Slack*k)); its count less that error, what Snapshot gives as Count,
// is a lower bound, exact (error 0) for every name held since its first
// request of the window, which is all of them while the window saw at
// most Slack*k distinct names. Names are stored cut to attack.MaxName
// bytes and exported escaped as the attack offenders are.
package talkers

import (
	"hash/maphash"
	"sort"
	"time"

	"github.com/krb5-exporter/krb5-exporter/kdclog/attack"
)

// List is one of the ranked lists.
type List uint8

// The lists; their labels in ListBy and ListRequest.
const (
	RequestsAddressAS  List = iota // AS requests by client address
	RequestsAddressTGS             // TGS requests by client address
	RequestsClientAS               // AS requests by client principal
	RequestsClientTGS              // TGS requests by client principal
	RequestsServiceTGS             // TGS requests by service (server principal)
	FailuresAddress                // failed requests (AS and TGS) by client address
	FailuresClient                 // by client principal
	FailuresService                // failed TGS requests by service
	RetransmitsAddress             // retransmitted requests by client address
	NumLists
)

// ListBy is what a list ranks: address, client or service.
var ListBy = [NumLists]string{"address", "address", "client", "client", "service", "address", "client", "service", "address"}

// ListRequest is the request type of a requests list ("" for the others).
var ListRequest = [NumLists]string{"as", "tgs", "as", "tgs", "tgs", "", "", "", ""}

// Slack is how many counters a list keeps per name it exports: the
// error bound is N/(Slack*k).
const Slack = 4

// EmptyName is the name shown for an empty field.
const EmptyName = "<empty>"

// cutMark tells a cut name's id from that of a name of exactly
// attack.MaxName bytes.
const cutMark = 0x9e3779b97f4a7c15

// Talker is one name of a list in the last complete window.
type Talker struct {
	Name  string // escaped and cut (attack.Sanitize)
	Count uint64 // requests, at most Error too few
	Error uint64 // 0: exact
}

// Snapshot is the last complete window.
type Snapshot struct {
	Start       time.Time // the window's start; zero before the first window ended
	Window      time.Duration
	Requests    [2]uint64 // every request line of the window: AS, TGS
	Failures    uint64
	Retransmits uint64
	Lists       [NumLists][]Talker // best first, at most k, names unique per list
}

// Tracker holds the current window's lists and the last complete one's
// snapshot. It is not safe for concurrent use.
type Tracker struct {
	k      int
	window time.Duration
	seed   maphash.Seed

	start       time.Time // the current window's
	requests    [2]uint64
	failures    uint64
	retransmits uint64
	lists       [NumLists]summary
	last        Snapshot
}

// New returns a tracker exporting k names a list over windows of w.
func New(k int, w time.Duration) *Tracker {
	t := &Tracker{seed: maphash.MakeSeed()}
	t.SetConfig(k, w)
	return t
}

// SetConfig changes k and the window; a change starts over.
func (t *Tracker) SetConfig(k int, w time.Duration) {
	if k == t.k && w == t.window {
		return
	}
	t.k, t.window = k, w
	for i := range t.lists {
		t.lists[i] = newSummary(Slack * k)
	}
	t.start, t.requests, t.failures, t.retransmits = time.Time{}, [2]uint64{}, 0, 0
	t.last = Snapshot{Window: w}
}

// Tick sets the clock for the requests that follow: when the current
// window is over it becomes the last complete one (or, when a whole
// window passed without a tick, an empty one does). Windows are aligned
// to multiples of their length. Call it before each batch of requests and
// before Last.
func (t *Tracker) Tick(now time.Time) {
	switch {
	case t.start.IsZero():
	case now.Before(t.start): // the clock stepped back: start over
		t.last = Snapshot{Window: t.window}
	case now.Sub(t.start) < t.window:
		return
	case now.Sub(t.start) < 2*t.window:
		t.snapshot()
	default:
		t.last = Snapshot{Start: now.Truncate(t.window).Add(-t.window), Window: t.window}
	}
	t.start = now.Truncate(t.window)
	t.requests, t.failures, t.retransmits = [2]uint64{}, 0, 0
	for i := range t.lists {
		t.lists[i].reset()
	}
}

// Request counts one request line: its client address, client
// principal and, for TGS, its service; failed says it was refused (not
// ISSUE, nor the steps of a login that go on: NEEDED_PREAUTH, a SPAKE
// round trip).
func (t *Tracker) Request(tgs, failed bool, addr, client, service []byte) {
	a, c := t.ref(addr), t.ref(client)
	r := RequestsAddressAS
	if tgs {
		r = RequestsAddressTGS
		t.requests[1]++
	} else {
		t.requests[0]++
	}
	t.lists[r].add(a)
	t.lists[r+RequestsClientAS-RequestsAddressAS].add(c)
	var s ref
	if tgs {
		s = t.ref(service)
		t.lists[RequestsServiceTGS].add(s)
	}
	if !failed {
		return
	}
	t.failures++
	t.lists[FailuresAddress].add(a)
	t.lists[FailuresClient].add(c)
	if tgs {
		t.lists[FailuresService].add(s)
	}
}

// Retransmit counts a retransmitted request from addr.
func (t *Tracker) Retransmit(addr []byte) {
	t.retransmits++
	t.lists[RetransmitsAddress].add(t.ref(addr))
}

// Last returns the last complete window; its slices are never changed
// after.
func (t *Tracker) Last() Snapshot { return t.last }

// Window is the window in effect.
func (t *Tracker) Window() time.Duration { return t.window }

func (t *Tracker) snapshot() {
	s := &t.last
	s.Start, s.Window = t.start, t.window
	s.Requests, s.Failures, s.Retransmits = t.requests, t.failures, t.retransmits
	for i := range t.lists {
		s.Lists[i] = t.lists[i].top(t.k, nil) // new slices: a Snapshot handed out stays as it was
	}
}

// ref is a name in a log line: its id (the hash of its first MaxName
// bytes, so that names cut alike are one) and the bytes kept, one more
// than MaxName when cut, so that attack.Sanitize marks it cut.
type ref struct {
	id uint64
	b  []byte
}

func (t *Tracker) ref(v []byte) ref {
	if len(v) > attack.MaxName {
		return ref{id: maphash.Bytes(t.seed, v[:attack.MaxName]) ^ cutMark, b: v[:attack.MaxName+1]}
	}
	return ref{id: maphash.Bytes(t.seed, v), b: v}
}

type slot struct {
	id         uint64
	count, err uint64
	n          uint8
	b          [attack.MaxName + 1]byte
}

// summary is a Space-Saving summary of cap(slots) counters, with an
// open-addressing index of twice as many entries from id to slot.
type summary struct {
	slots  []slot
	idx    []int32 // slot+1; 0 free
	minVal uint64  // at most the smallest count: the victim search's guess
	cursor int
}

func newSummary(m int) summary {
	size := 2
	for size < 2*m {
		size *= 2
	}
	return summary{slots: make([]slot, 0, m), idx: make([]int32, size)}
}

func (s *summary) reset() {
	if len(s.slots) > 0 {
		clear(s.idx)
	}
	s.slots, s.minVal, s.cursor = s.slots[:0], 0, 0
}

func (s *summary) home(id uint64) int { return int(id>>32) & (len(s.idx) - 1) }

func (s *summary) add(r ref) {
	mask := len(s.idx) - 1
	for i := s.home(r.id); s.idx[i] != 0; i = (i + 1) & mask {
		if e := &s.slots[s.idx[i]-1]; e.id == r.id {
			e.count++
			return
		}
	}
	v := len(s.slots)
	if v < cap(s.slots) {
		s.slots = s.slots[:v+1]
		s.slots[v] = slot{id: r.id, count: 1}
	} else {
		v = s.victim()
		e := &s.slots[v]
		s.del(e.id)
		e.id, e.err, e.count = r.id, e.count, e.count+1
	}
	s.slots[v].n = uint8(copy(s.slots[v].b[:], r.b))
	s.put(r.id, int32(v)+1)
}

// victim is a slot with the fewest requests. Counts only grow within a
// window and the victim's grows by one, so the next one is mostly found
// at once from where the last search stopped; a full round without one
// at minVal raises minVal to the true minimum.
func (s *summary) victim() int {
	for {
		for range len(s.slots) {
			i := s.cursor
			if s.cursor++; s.cursor == len(s.slots) {
				s.cursor = 0
			}
			if s.slots[i].count == s.minVal {
				return i
			}
		}
		s.minVal = s.slots[0].count
		for i := range s.slots {
			s.minVal = min(s.minVal, s.slots[i].count)
		}
	}
}

func (s *summary) put(id uint64, v int32) {
	mask := len(s.idx) - 1
	i := s.home(id)
	for s.idx[i] != 0 {
		i = (i + 1) & mask
	}
	s.idx[i] = v
}

// del removes id from the index by backward shift, so probes for the ids
// after it in its run still find them.
func (s *summary) del(id uint64) {
	mask := len(s.idx) - 1
	i := s.home(id)
	for s.slots[s.idx[i]-1].id != id {
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; s.idx[j] != 0; j = (j + 1) & mask {
		if h := s.home(s.slots[s.idx[j]-1].id); (j-h)&mask >= (j-i)&mask {
			s.idx[i] = s.idx[j]
			i = j
		}
	}
	s.idx[i] = 0
}

// top returns the k names with the most requests (counts less their
// errors), appended to out.
func (s *summary) top(k int, out []Talker) []Talker {
	order := make([]int, len(s.slots))
	for i := range order {
		order[i] = i
	}
	g := func(i int) uint64 { return s.slots[i].count - s.slots[i].err }
	names := make([]string, len(s.slots))
	for i := range s.slots {
		if s.slots[i].n == 0 {
			names[i] = EmptyName
		} else {
			names[i] = attack.Sanitize(s.slots[i].b[:s.slots[i].n])
		}
	}
	sort.Slice(order, func(a, b int) bool {
		x, y := order[a], order[b]
		if g(x) != g(y) {
			return g(x) > g(y)
		}
		return names[x] < names[y]
	})
	seen := make(map[string]bool, k)
	for _, i := range order {
		if len(out) == k {
			break
		}
		if seen[names[i]] { // a forged name written as another's escape
			continue
		}
		seen[names[i]] = true
		out = append(out, Talker{Name: names[i], Count: g(i), Error: s.slots[i].err})
	}
	return out
}
