// The pending-failure table: attempts awaiting their recovery by an
// ISSUE of the same client and address, and its index.

package attack

import (
	"bytes"
	"hash/maphash"
	"time"
)

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
	d.spread[SpreadWrongPassword].add(p.client.item)
	d.add(PasswordSpraying, p.addr.ref(), p.client.item, false)
	d.add(BruteForce, p.client.ref(), p.addr.item, false)
}
