// The realm-level signals: distinct principals across all addresses,
// each window, for attacks spread over many addresses.

package attack

import (
	"math"
	"math/bits"
)

// Spread is a kind of principal counted across all addresses.
type Spread uint8

// Spreads; label values in SpreadNames.
const (
	SpreadWrongPassword Spread = iota // principals with a wrong password (EventWrongPassword)
	SpreadUnknownClient               // principals asked for and not found (EventUnknownClient)
	NumSpreads
)

// SpreadNames are the spreads' label values.
var SpreadNames = [NumSpreads]string{"wrong_password", "unknown_client"}

// ExactDistinct is how many distinct principals of a window a spread
// counts exactly; beyond, a HyperLogLog estimates them.
const ExactDistinct = 4096

const hllBits = 12 // 4,096 registers: a standard error of 1.04/64, 1.6 %

// distinct counts a window's distinct items: exactly up to ExactDistinct
// (a set of their 64-bit seeded hashes), by a HyperLogLog (Flajolet et
// al. 2007) beyond, never less than it counted before.
type distinct struct {
	exact pairSet
	reg   [1 << hllBits]uint8
	seen  uint64 // the highest count reported this window
	done  uint64 // the counts of the windows before
}

func (c *distinct) add(item uint64) {
	h := mix(item)
	if h == 0 {
		h = 1
	}
	c.exact.add(h, ExactDistinct)
	i, w := h>>(64-hllBits), h<<hllBits|1<<(hllBits-1)
	if r := uint8(bits.LeadingZeros64(w) + 1); r > c.reg[i] {
		c.reg[i] = r
	}
}

// count is the window's distinct items.
func (c *distinct) count() uint64 {
	n := uint64(c.exact.n)
	if c.exact.n >= ExactDistinct {
		n = max(n, uint64(math.Round(c.estimate())))
	}
	c.seen = max(c.seen, n)
	return c.seen
}

// estimate is the HyperLogLog's, with linear counting for small counts.
func (c *distinct) estimate() float64 {
	const m = 1 << hllBits
	sum, zeros := 0.0, 0
	for _, r := range c.reg {
		sum += math.Ldexp(1, -int(r))
		if r == 0 {
			zeros++
		}
	}
	e := 0.7213 / (1 + 1.079/m) * m * m / sum
	if e <= 2.5*m && zeros > 0 {
		e = m * math.Log(float64(m)/float64(zeros))
	}
	return e
}

// total is the counts of every window so far, the current one's included.
func (c *distinct) total() uint64 { return c.done + c.count() }

// next starts a new window.
func (c *distinct) next() {
	c.done += c.count()
	c.seen = 0
	c.exact.reset()
	c.reg = [1 << hllBits]uint8{}
}
