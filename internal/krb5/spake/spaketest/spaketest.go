// Package spaketest holds what the SPAKE tests of internal/krb5 and of
// its spake package both need to build a hostile KDC's message. Test
// code only.
package spaketest

import (
	"testing"

	"filippo.io/edwards25519"
)

// OffCurve returns the encoding of a y with no x on edwards25519: a
// public key that does not decode to a point.
func OffCurve(t testing.TB) []byte {
	for y := byte(2); y < 100; y++ {
		b := make([]byte, 32)
		b[0] = y
		if _, err := new(edwards25519.Point).SetBytes(b); err != nil {
			return b
		}
	}
	t.Fatal("no y off the curve")
	return nil
}
