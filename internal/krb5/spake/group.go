package spake

import (
	"errors"
	"fmt"

	"filippo.io/edwards25519"
	"filippo.io/edwards25519/field"
)

// SPAKE group numbers (IANA "Kerberos SPAKE Groups").
const (
	GroupEdwards25519 int32 = 1
	GroupP256         int32 = 2
	GroupP384         int32 = 3
	GroupP521         int32 = 4
)

// ErrGroup means a SPAKE group this package does not implement.
var ErrGroup = errors.New("SPAKE group not supported")

// ErrPublicKey means the peer's public element is not a point of the group.
var ErrPublicKey = errors.New("SPAKE public key is not a valid group element")

// GroupName returns the MIT name of a group number, or "group-N".
func GroupName(g int32) string {
	switch g {
	case GroupEdwards25519:
		return "edwards25519"
	case GroupP256:
		return "P-256"
	case GroupP384:
		return "P-384"
	case GroupP521:
		return "P-521"
	}
	return fmt.Sprintf("group-%d", g)
}

// Supported reports whether g is a group this package implements.
func Supported(g int32) bool { return g == GroupEdwards25519 || g == GroupP256 }

// Groups are the groups this package implements, in the order of
// preference a support message lists them (MIT's client: edwards25519).
var Groups = []int32{GroupEdwards25519, GroupP256}

// Sizes of edwards25519 (MIT iana.c: multiplier, element and hash lengths).
const (
	multLen = 32
	elemLen = 32
	hashLen = 32 // SHA-256
)

// The edwards25519 M and N constants of draft-irtf-cfrg-spake2-05, which MIT
// uses (iana.c): points of the prime-order subgroup found by hashing seeds.
var (
	edM = mustPoint("d048032c6ea0b6d697ddc2e86bda85a33adac920f1bf18e1b0c6d166a5cecdaf")
	edN = mustPoint("d3bfb518f44f3430f29d0c92af503865a1ed3281dc69b35dd868ba85f886c4ab")
)

func mustPoint(h string) *edwards25519.Point {
	var b [32]byte
	for i := range b {
		b[i] = unhex(h[2*i])<<4 | unhex(h[2*i+1])
	}
	p, err := new(edwards25519.Point).SetBytes(b[:])
	if err != nil {
		panic(err)
	}
	return p
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	}
	panic("bad hex")
}

// scalarFrom32 reduces a 32-byte little-endian integer mod l, as MIT's
// x25519_sc_reduce of the value padded to 64 bytes.
func scalarFrom32(s *edwards25519.Scalar, b []byte) {
	var wide [64]byte
	copy(wide[:], b)
	if _, err := s.SetUniformBytes(wide[:]); err != nil {
		panic(err) // 64 bytes are always accepted
	}
}

// cofactor is the scalar 8.
var cofactor = func() *edwards25519.Scalar {
	var b [32]byte
	b[0] = 8
	s, err := new(edwards25519.Scalar).SetCanonicalBytes(b[:])
	if err != nil {
		panic(err)
	}
	return s
}()

// Both client operations involve the secrets r and w, so both stay constant
// time: the fixed base G uses the library's precomputed table
// (ScalarBaseMult), the KDC's T the constant-time ScalarMult; the
// variable-time calls (VarTimeDoubleScalarBaseMult) would leak r.

// keygen sets pub to (8r)·G + w·mask, the public element of a party whose
// private multiplier is 8r (MIT picks r uniformly mod l and shifts it left by
// three, so the shared point lands in the prime-order subgroup whatever the
// peer sends). wmask is w·N for the client, w·M for the KDC.
func keygen(pub *[elemLen]byte, r *edwards25519.Scalar, wmask *edwards25519.Point) {
	var p edwards25519.Point
	keygenPoint(&p, r, wmask)
	copy(pub[:], p.Bytes())
}

func keygenPoint(p *edwards25519.Point, r *edwards25519.Scalar, wmask *edwards25519.Point) {
	var r8 edwards25519.Scalar
	r8.Multiply(r, cofactor)
	p.ScalarBaseMult(&r8)
	p.Add(p, wmask)
}

// result sets k to 8r·(theirs − w·mask), the shared element; wmask is the
// peer's mask (w·M for the client). It fails if theirs is not on the curve.
func result(k *[elemLen]byte, r *edwards25519.Scalar, wmask *edwards25519.Point, theirs []byte) error {
	var q edwards25519.Point
	if err := resultPoint(&q, r, wmask, theirs); err != nil {
		return err
	}
	copy(k[:], q.Bytes())
	return nil
}

func resultPoint(q *edwards25519.Point, r *edwards25519.Scalar, wmask *edwards25519.Point, theirs []byte) error {
	if len(theirs) != elemLen {
		return fmt.Errorf("%w: %d bytes, want %d", ErrPublicKey, len(theirs), elemLen)
	}
	if _, err := q.SetBytes(theirs); err != nil {
		return ErrPublicKey
	}
	q.Subtract(q, wmask)
	q.ScalarMult(r, q)
	q.MultByCofactor(q)
	return nil
}

// encodePair writes the encodings of p and q (what Point.Bytes gives) with
// one field inversion instead of two: 1/Z1 and 1/Z2 from 1/(Z1·Z2), about
// 4 of the ~64 µs of a login's group arithmetic. The inversion and the
// multiplications are the library's constant-time ones.
func encodePair(pb, qb *[elemLen]byte, p, q *edwards25519.Point) {
	x1, y1, z1, _ := p.ExtendedCoordinates()
	x2, y2, z2, _ := q.ExtendedCoordinates()
	var inv, zi field.Element
	inv.Multiply(z1, z2) // never zero: Z of a valid point is not
	inv.Invert(&inv)
	zi.Multiply(&inv, z2) // 1/Z1
	affineBytes(pb, x1, y1, &zi)
	zi.Multiply(&inv, z1) // 1/Z2
	affineBytes(qb, x2, y2, &zi)
}

// affineBytes writes the RFC 8032 encoding of (X/Z, Y/Z) given zi = 1/Z:
// y little-endian with the sign of x in the top bit.
func affineBytes(out *[elemLen]byte, x, y, zi *field.Element) {
	var ax, ay field.Element
	ax.Multiply(x, zi)
	ay.Multiply(y, zi)
	copy(out[:], ay.Bytes())
	out[31] |= byte(ax.IsNegative() << 7)
}

// Multiplications does, n times, the two scalar multiplications of a
// client's edwards25519 SPAKE login, as Challenge does them: the
// fixed-base (8y)·G and the variable-base y·P, constant time, with
// scalars that change each time. It is the floor of a login's client CPU
// (package bench times it beside the load); the result is returned so
// that the work is not optimised away.
func Multiplications(n int) byte {
	var y, y8 edwards25519.Scalar
	var b [32]byte
	b[0] = 1
	var p, q edwards25519.Point
	q.Set(edM)
	for i := range n {
		b[1], b[2] = byte(i), byte(i>>8)
		scalarFrom32(&y, b[:])
		y8.Multiply(&y, cofactor)
		p.ScalarBaseMult(&y8)
		q.ScalarMult(&y, &q)
	}
	return p.Bytes()[0] ^ q.Bytes()[0]
}
