// The clients' recent pre-authentication steps, for AS-REP roasting.

package attack

import "math/bits"

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
