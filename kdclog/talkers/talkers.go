// Package talkers counts who loads the KDC: the client addresses, client
// principals and services with the most requests in a tumbling window,
// for all requests, for failed ones apart, and the addresses of
// retransmitted requests. It knows nothing of log formats or Prometheus:
// kdclog feeds it one call per request line and exports its Snapshot.
//
// Memory is fixed by k whatever the log holds. Each list is a Filtered
// Space-Saving summary (Metwally, Agrawal and El Abbadi, 2005; Homem
// and Carvalho, 2010) of Slack*k counters over the current window: a
// name already held costs a hash and a probe of a small open-addressing
// index, no allocation; a name not held adds one to its hash bucket's
// counter (at least 8 buckets a counter), an upper bound of the requests of the
// names not held there, and takes the place of the name with the fewest
// requests once that bucket reaches their number, the bucket's count
// then its possible error. So, of a window of N requests in a list,
// every name with more than N/(Slack*k) of them is held, and a name
// held is over-counted by at most its error (at most N/(Slack*k)); its
// count less that error, what Snapshot gives as Count, is a lower bound,
// exact (error 0) for every name held since its first request of the
// window, which is all of them while the window saw at most Slack*k
// distinct names. Names are counted whole (by a hash of every byte,
// keyed per process) and exported escaped as the attack offenders are; a
// name longer than attack.MaxName bytes is shown cut to CutTo bytes with
// `...\` and 6 hex digits of its hash after them (Display), so that long
// names that differ only past the cut stay apart.
package talkers

import (
	"hash/maphash"
	"math/bits"
	"slices"
	"sort"
	"strconv"
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

// CutTo is how many bytes of a name longer than attack.MaxName are shown.
const CutTo = 40

// CutMark follows a cut name, then the 6 hex digits of its hash: a
// backslash followed by neither a backslash nor an x is never in the
// escape of a name (attack.Sanitize), so no short name is shown as a cut
// one.
const CutMark = `...\`

// Talker is one name of a list in the last complete window.
type Talker struct {
	Name  string // escaped and, if long, cut (Display)
	Count uint64 // requests, at most Error too few
	Error uint64 // 0: exact
}

// Snapshot is the last complete window.
type Snapshot struct {
	Start       time.Time // the window's start; zero before the first window ended
	Window      time.Duration
	Requests    [2]uint64 // every request of the window (a login one): AS, TGS
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
	logins      logins
	now         uint32 // Tick's clock, in seconds
	last        Snapshot
	memo        [3]memo // the last address, client and service: a login's lines share them
}

// memo is the last name of a field and its id.
type memo struct {
	n  int // -1: none
	id uint64
	b  [attack.MaxName]byte
}

// New returns a tracker exporting k names a list over windows of w.
func New(k int, w time.Duration) *Tracker {
	t := &Tracker{seed: maphash.MakeSeed()}
	for i := range t.memo {
		t.memo[i].n = -1
	}
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
	t.now = uint32(now.Unix())
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

// Status is what the KDC answered a request line, as far as counting
// requests goes.
type Status uint8

// The statuses.
const (
	Issued        Status = iota // ISSUE
	Refused                     // any other final status: a failure
	NeededPreauth               // NEEDED_PREAUTH: a login that goes on
	MorePreauth                 // a SPAKE round trip (PREAUTH_FAILED "More preauthentication data is required")
)

// Request counts one request line: its client address, client
// principal and, for TGS, its service. A login is one request whatever
// its round trips: an AS line that goes on a login of the same client
// from the same address (after its NEEDED_PREAUTH or a SPAKE round trip)
// counts in no requests list, only as a failure when refused.
func (t *Tracker) Request(tgs bool, st Status, addr, client, service []byte) {
	a, c := t.ref(0, addr), t.ref(1, client)
	var s ref
	switch {
	case tgs:
		t.requests[1]++
		t.count(RequestsAddressTGS, a)
		t.lists[RequestsClientTGS].add(c)
		s = t.ref(2, service)
		t.lists[RequestsServiceTGS].add(s)
	case t.logins.starts(a.id, c.id, st, t.now):
		t.requests[0]++
		t.count(RequestsAddressAS, a)
		t.lists[RequestsClientAS].add(c)
	}
	if st != Refused {
		return
	}
	t.failures++
	t.lists[FailuresAddress].add(a)
	t.lists[FailuresClient].add(c)
	if tgs {
		t.lists[FailuresService].add(s)
	}
}

// count adds a request of address a to list r, the summary's hint
// inline: one host's burst.
func (t *Tracker) count(r List, a ref) {
	if l := &t.lists[r]; a.id == l.lastID {
		l.hit(l.last)
	} else {
		l.addOther(a)
	}
}

// LoginWait is how long a login's next line may follow its last (the
// KDC's reply and the client's next request): a login open longer was
// given up, and the client's next line starts another.
const LoginWait = 10 // seconds

// logins are the logins going on, by client and address: 4-way
// set-associative, so a look-up is a few compares in one or two cache
// lines. A login pushed out by others (more than 4 of a set within
// LoginWait: a flood of logins given up) counts again at its next line,
// at worst once a line, as every line counted before.
type logins [loginSets][4]login

const loginSets = 1024

// login is one client's logins from one address going on: open of them,
// the last line at at.
type login struct {
	key  uint64 // 0: free
	at   uint32
	open uint32
}

// starts reports whether a line of a login starts a request, and keeps
// the logins going on: NEEDED_PREAUTH opens one (each a request, as a
// client may log in several times at once), a round trip or a final
// answer goes on an open one, else starts one. Keys are hashes of the
// whole names (keyed per process): no one can go on another's login.
func (l *logins) starts(addr, client uint64, st Status, now uint32) bool {
	key := client ^ bits.RotateLeft64(addr, 17)
	if key == 0 {
		key = 1
	}
	set := &l[(key^key>>32)&(loginSets-1)]
	var e *login
	for i := range set {
		if set[i].key == key && set[i].open > 0 && now-set[i].at < LoginWait {
			e = &set[i]
			break
		}
	}
	switch {
	case st == NeededPreauth:
	case e == nil && st == MorePreauth: // its start was not seen: this line is the request
	case e == nil:
		return true
	case st == MorePreauth:
		e.at = now
		return false
	default: // its final answer
		e.open--
		return false
	}
	if e == nil {
		e = &set[0]
		for i := range set { // a free or stale slot, else the oldest
			if set[i].open == 0 || now-set[i].at >= LoginWait {
				e = &set[i]
				break
			}
			if now-set[i].at > now-e.at {
				e = &set[i]
			}
		}
		*e = login{key: key}
	}
	e.at, e.open = now, e.open+1
	return true
}

// Retransmit counts a retransmitted request from addr.
func (t *Tracker) Retransmit(addr []byte) {
	t.retransmits++
	t.lists[RetransmitsAddress].add(t.ref(0, addr))
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

// ref is a name in a log line: its id (the hash of all its bytes) and
// its bytes.
type ref struct {
	id uint64
	b  []byte
}

func (t *Tracker) ref(field int, v []byte) ref {
	if field != 0 || len(v) > attack.MaxName { // clients and services change from line to line: a hash is cheaper
		return ref{id: nonzero(maphash.Bytes(t.seed, v)), b: v}
	}
	m := &t.memo[field]
	if len(v) == m.n && string(v) == string(m.b[:m.n]) {
		return ref{id: m.id, b: v}
	}
	m.id, m.n = nonzero(maphash.Bytes(t.seed, v)), copy(m.b[:], v)
	return ref{id: m.id, b: v}
}

// name is a held name's cold part: its error and bytes, CutTo of them
// when cut.
type name struct {
	err uint64
	n   uint8
	cut bool
	b   [attack.MaxName]byte
}

// bucket is one of Filtered Space-Saving's counters of the names not
// held, with the number of names held that hash there: most names not
// held cost no probe of the index, and one cache line. A window is at
// most an hour of a KDC's requests (at most some 10^5 a second): fewer
// than 2^32.
type bucket struct {
	count uint32
	held  uint32
}

// summary is a Space-Saving summary of cap(ids) counters, with an
// open-addressing index of twice as many entries from id to slot. The
// ids and counts a line touches are apart from the names, in a few cache
// lines.
type summary struct {
	ids    []uint64 // by slot
	counts []uint64
	names  []name
	idx    []int32  // slot+1; 0 free
	filter []bucket // by hash
	lastID uint64   // the last name added (0: none; ids are never 0) and its slot, a hint
	last   int
	minVal uint64 // the smallest count, while atMin > 0
	atMin  int    // slots at minVal; 0: minVal is to be found again
	cursor int
}

func newSummary(m int) summary {
	size := 2
	for size < 2*m {
		size *= 2
	}
	return summary{ids: make([]uint64, 0, m), counts: make([]uint64, 0, m), names: make([]name, m),
		idx: make([]int32, size), filter: make([]bucket, 4*size)}
}

func (s *summary) reset() {
	if len(s.ids) > 0 {
		clear(s.idx)
		clear(s.filter)
	}
	s.ids, s.counts, s.minVal, s.atMin, s.cursor, s.lastID = s.ids[:0], s.counts[:0], 0, 0, 0, 0
}

func (s *summary) home(id uint64) int { return int(id>>32) & (len(s.idx) - 1) }

// add counts a request of r. The name of the last request of the list
// is counted inline (a login's lines, one host's burst).
func (s *summary) add(r ref) {
	if r.id == s.lastID {
		s.hit(s.last)
		return
	}
	s.addOther(r)
}

func (s *summary) addOther(r ref) {
	b := int(r.id) & (len(s.filter) - 1)
	if s.filter[b].held != 0 {
		mask := len(s.idx) - 1
		for i := s.home(r.id); s.idx[i] != 0; i = (i + 1) & mask {
			if v := s.idx[i] - 1; s.ids[v] == r.id {
				s.hit(int(v))
				s.last, s.lastID = int(v), r.id
				return
			}
		}
	}
	v := len(s.ids)
	var err uint64
	if v < cap(s.ids) {
		s.ids, s.counts = append(s.ids, r.id), append(s.counts, 1)
	} else {
		// Filtered Space-Saving (Homem and Carvalho, 2010): a name not
		// held counts in its hash's counter, an upper bound of the
		// requests of every name not held there, and takes the place
		// of the name with the fewest requests only when that counter
		// reaches their number, as its error. Under churn (thousands
		// of clients with a request or two each) most lines cost an
		// increment, and the errors stay far below the minimum.
		f := &s.filter[b]
		if s.atMin == 0 {
			s.findMin()
		}
		if uint64(f.count)+1 <= s.minVal {
			f.count++
			return
		}
		v = s.victim()
		s.atMin--
		g := int(s.ids[v]) & (len(s.filter) - 1)
		s.filter[g].count = uint32(max(uint64(s.filter[g].count), s.counts[v])) // the name leaving is counted there
		s.filter[g].held--
		s.del(s.ids[v])
		err = uint64(f.count)
		s.ids[v], s.counts[v] = r.id, err+1
	}
	s.filter[b].held++
	n := &s.names[v]
	n.err, n.cut = err, len(r.b) > attack.MaxName
	if n.cut {
		n.n = uint8(copy(n.b[:CutTo], r.b))
	} else {
		n.n = uint8(copy(n.b[:], r.b))
	}
	s.put(r.id, int32(v)+1)
	s.last, s.lastID = v, r.id
}

// nonzero keeps 0 for "no name" (summary.lastID).
func nonzero(id uint64) uint64 {
	if id == 0 {
		return 1
	}
	return id
}

// hit counts a request of the name in slot v.
func (s *summary) hit(v int) {
	if s.counts[v] == s.minVal {
		s.atMin-- // 0 while the summary fills: minVal is 0 then
	}
	s.counts[v]++
}

// findMin sets minVal to the smallest count and atMin to its slots.
func (s *summary) findMin() {
	s.minVal, s.atMin = s.counts[0], 0
	for _, c := range s.counts {
		switch {
		case c < s.minVal:
			s.minVal, s.atMin = c, 1
		case c == s.minVal:
			s.atMin++
		}
	}
}

// victim is a slot at minVal (atMin > 0). Counts only grow within a
// window and the victim's grows, so the next one is mostly found at once
// from where the last search stopped. One turn at most: were atMin ever
// wrong, the minimum is found again rather than searched for forever.
func (s *summary) victim() int {
	for range len(s.counts) {
		i := s.cursor
		if s.cursor++; s.cursor == len(s.counts) {
			s.cursor = 0
		}
		if s.counts[i] == s.minVal {
			return i
		}
	}
	s.findMin()
	return slices.Index(s.counts, s.minVal)
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
	for s.ids[s.idx[i]-1] != id {
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; s.idx[j] != 0; j = (j + 1) & mask {
		if h := s.home(s.ids[s.idx[j]-1]); (j-h)&mask >= (j-i)&mask {
			s.idx[i] = s.idx[j]
			i = j
		}
	}
	s.idx[i] = 0
}

// top returns the k names with the most requests (counts less their
// errors), appended to out.
func (s *summary) top(k int, out []Talker) []Talker {
	order := make([]int, len(s.ids))
	for i := range order {
		order[i] = i
	}
	g := func(i int) uint64 { return s.counts[i] - s.names[i].err }
	names := make([]string, len(s.ids))
	for i := range names {
		n := &s.names[i]
		names[i] = display(n.b[:n.n], n.cut, s.ids[i])
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
		out = append(out, Talker{Name: names[i], Count: g(i), Error: s.names[i].err})
	}
	return out
}

// display is a name as exported: EmptyName for an empty one, escaped,
// and when cut followed by CutMark and 6 hex digits of its id.
func display(b []byte, cut bool, id uint64) string {
	switch {
	case cut:
		h := strconv.FormatUint(id>>40|1<<24, 16) // 24 bits, leading zeros kept
		return attack.Sanitize(b) + CutMark + h[1:]
	case len(b) == 0:
		return EmptyName
	}
	return attack.Sanitize(b)
}

// Merged is the names of lists together, their counts summed (a name in
// the top k of one list only counts that list's), best first, at most n.
func (s *Snapshot) Merged(n int, lists ...List) []Talker {
	merged := map[string]Talker{}
	for _, l := range lists {
		for _, t := range s.Lists[l] {
			m := merged[t.Name]
			m.Name, m.Count, m.Error = t.Name, m.Count+t.Count, m.Error+t.Error
			merged[t.Name] = m
		}
	}
	out := make([]Talker, 0, len(merged))
	for _, t := range merged {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Name < out[j].Name
	})
	return out[:min(n, len(out))]
}

// Kind is one of the page's and top's rows: a title and its lists.
type Kind struct {
	Title string
	Lists []List
}

// StormRate is KDCClientStorm's threshold (alerts/talkers.rules.yml): one
// address or client sending more requests a second than this (a login is
// one), whatever else the KDC serves. The landing page and top judge a
// storm by it; statuspage's TestStormRateIsTheRule holds it to the rule.
const StormRate = 20.0

// Kinds are the rows the landing page and top show: requests (AS and
// TGS together), failures and retransmits, by address, client and
// service.
var Kinds = []Kind{
	{"Requests by address", []List{RequestsAddressAS, RequestsAddressTGS}},
	{"Requests by client", []List{RequestsClientAS, RequestsClientTGS}},
	{"Requests by service", []List{RequestsServiceTGS}},
	{"Failures by address", []List{FailuresAddress}},
	{"Failures by client", []List{FailuresClient}},
	{"Failures by service", []List{FailuresService}},
	{"Retransmits by address", []List{RetransmitsAddress}},
}
