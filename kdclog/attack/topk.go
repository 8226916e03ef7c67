// The offenders' summaries: the top k, their exact sets and sketches.

package attack

import "math"

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
