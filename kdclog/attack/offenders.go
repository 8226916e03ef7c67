// The offenders of each signal: every one of the window in a table of
// exact counts, the distinct (offender, item) pairs in a set, the few
// beyond the table's bound in a count-min sketch, and the k exported.

package attack

import "math/bits"

// Bounds of the tables, from config.AttackSignals.TrackedOffenders (T):
// each signal holds at most T offenders and pairsPerOffender*T distinct
// pairs in the window, in open-addressing tables at most maxFill full.
const (
	pairsPerOffender = 8
	initialSlots     = 1024
	overflowRows     = 4
	overflowCols     = 1024
)

// maxFill is the tables' fullest: 7/8.
func maxFill(slots int) int { return slots - slots/8 }

// slotsFor is the table size that holds n at maxFill.
func slotsFor(n int) int {
	s := initialSlots
	for maxFill(s) < n {
		s *= 2
	}
	return s
}

// mix is a 64-bit finalizer (splitmix64's): the table's index comes from
// its top bits.
func mix(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	return h ^ h>>31
}

// tracked is one offender of the window: its events and distinct items
// (RC4 ones apart, Kerberoasting), all exact.
type tracked struct {
	id       uint64 // the offender's seeded hash; 0: free
	count    uint32 // events, saturating
	distinct uint32
	rc4      uint32
	fired    bool
	top      uint8 // its place in the top k, plus one; 0: not there
}

// offenderTable holds every offender of the window, up to its bound.
type offenderTable struct {
	slots []tracked
	n     int
}

func (t *offenderTable) home(id uint64) int {
	return int(mix(id) >> (64 - bits.Len(uint(len(t.slots)-1))))
}

// find returns id's slot, or nil.
func (t *offenderTable) find(id uint64) *tracked {
	mask := len(t.slots) - 1
	for i := t.home(id); t.slots[i].id != 0; i = (i + 1) & mask {
		if t.slots[i].id == id {
			return &t.slots[i]
		}
	}
	return nil
}

// get returns id's slot, a new one if id is new and max allows it, or nil.
func (t *offenderTable) get(id uint64, max int) *tracked {
	mask := len(t.slots) - 1
	i := t.home(id)
	for ; t.slots[i].id != 0; i = (i + 1) & mask {
		if t.slots[i].id == id {
			return &t.slots[i]
		}
	}
	if t.n >= max {
		return nil
	}
	if t.n+1 > maxFill(len(t.slots)) {
		t.grow()
		return t.get(id, max)
	}
	t.n++
	t.slots[i] = tracked{id: id}
	return &t.slots[i]
}

func (t *offenderTable) grow() {
	old := t.slots
	t.slots = make([]tracked, 2*len(old))
	mask := len(t.slots) - 1
	for _, e := range old {
		if e.id == 0 {
			continue
		}
		i := t.home(e.id)
		for t.slots[i].id != 0 {
			i = (i + 1) & mask
		}
		t.slots[i] = e
	}
}

// reset empties the table for a new window, back to its first size.
func (t *offenderTable) reset() {
	if len(t.slots) != initialSlots {
		t.slots = make([]tracked, initialSlots)
	} else if t.n > 0 {
		clear(t.slots)
	}
	t.n = 0
}

// pairSet holds the distinct (offender, item) pairs of the window,
// hashed: two are one only if their 64-bit keyed hashes are equal.
type pairSet struct {
	h []uint64 // 0: free
	n int
}

func (p *pairSet) home(h uint64) int { return int(h >> (64 - bits.Len(uint(len(p.h)-1)))) }

// add adds h (mixed, not 0) and reports whether it was new; full reports
// a new pair the set had no room for.
func (p *pairSet) add(h uint64, max int) (isNew, full bool) {
	mask := len(p.h) - 1
	i := p.home(h)
	for ; p.h[i] != 0; i = (i + 1) & mask {
		if p.h[i] == h {
			return false, false
		}
	}
	if p.n >= max {
		return true, true
	}
	if p.n+1 > maxFill(len(p.h)) {
		p.grow()
		return p.add(h, max)
	}
	p.h[i] = h
	p.n++
	return true, false
}

func (p *pairSet) grow() {
	old := p.h
	p.h = make([]uint64, 2*len(old))
	mask := len(p.h) - 1
	for _, h := range old {
		if h == 0 {
			continue
		}
		i := p.home(h)
		for p.h[i] != 0 {
			i = (i + 1) & mask
		}
		p.h[i] = h
	}
}

func (p *pairSet) reset() {
	if len(p.h) != pairsPerOffender*initialSlots {
		p.h = make([]uint64, pairsPerOffender*initialSlots)
	} else if p.n > 0 {
		clear(p.h)
	}
	p.n = 0
}

// overflow counts the events of the offenders the table had no room for
// in a count-min sketch with conservative update: an offender's estimate
// is at least its events (so at least its distinct items), and it fires
// when its estimate reaches the threshold unless every cell of it has
// fired already.
type overflow struct {
	c     [overflowRows][overflowCols]uint32
	fired [overflowRows][overflowCols / 64]uint64
}

// add counts one event of id and reports whether it fires at limit.
func (o *overflow) add(id uint64, limit int) bool {
	var col [overflowRows]int
	est := ^uint32(0)
	for r := range o.c {
		col[r] = int(mix(id+uint64(r)*0x9e3779b97f4a7c15) % overflowCols)
		est = min(est, o.c[r][col[r]])
	}
	if est < ^uint32(0) {
		est++
	}
	newCell := false
	for r := range o.c {
		c := &o.c[r][col[r]]
		*c = max(*c, est)
		if o.fired[r][col[r]/64]&(1<<(col[r]%64)) == 0 {
			newCell = true
		}
	}
	if int(est) < limit || !newCell {
		return false
	}
	for r := range o.c {
		o.fired[r][col[r]/64] |= 1 << (col[r] % 64)
	}
	return true
}

// top is the k offenders of a signal with the highest scores, their names
// kept. Scores only grow, by one an event, so an offender enters when it
// passes the lowest: the k highest of the window, whatever came between.
type top struct {
	ids    []uint64
	scores []uint32
	names  []name
}

func newTop(k int) top {
	return top{ids: make([]uint64, 0, k), scores: make([]uint32, 0, k), names: make([]name, 0, k)}
}

func (t *top) reset() { t.ids, t.scores, t.names = t.ids[:0], t.scores[:0], t.names[:0] }

// offer puts e (named o) with its new score in the top k if it belongs
// there; the offender it replaces is looked up in tab to clear its mark.
func (t *top) offer(e *tracked, o ref, score uint32, tab *offenderTable) {
	if e.top != 0 {
		t.scores[e.top-1] = score
		return
	}
	if len(t.ids) < cap(t.ids) {
		t.ids, t.scores = append(t.ids, e.id), append(t.scores, score)
		t.names = t.names[:len(t.names)+1]
		t.names[len(t.names)-1].set(o)
		e.top = uint8(len(t.ids))
		return
	}
	m := 0
	for i, s := range t.scores {
		if s < t.scores[m] {
			m = i
		}
	}
	if score <= t.scores[m] {
		return
	}
	if old := tab.find(t.ids[m]); old != nil {
		old.top = 0
	}
	t.ids[m], t.scores[m] = e.id, score
	t.names[m].set(o)
	e.top = uint8(m + 1)
}

// offenders is one signal's state.
type offenders struct {
	tab       offenderTable
	pairs     pairSet
	over      overflow
	top       top
	untracked uint64 // events of offenders beyond the table, this window
}

func (s *offenders) reset() {
	s.tab.reset()
	s.pairs.reset()
	s.over = overflow{}
	s.top.reset()
	s.untracked = 0
}

// bytes is the memory s holds now.
func (s *offenders) bytes() int {
	return len(s.tab.slots)*sizeofTracked + 8*len(s.pairs.h) + sizeofOverflow + cap(s.top.ids)*(8+4+sizeofName)
}
