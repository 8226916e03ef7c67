package spake

import (
	"crypto/elliptic"
	"fmt"
	"math/big"
)

// The P-256 group as MIT's OpenSSL backend does it (openssl.c): w and the
// private multiplier are big-endian integers reduced mod the group order,
// the cofactor is 1, elements are SEC 1 compressed points (33 bytes), the
// hash is SHA-256. crypto/elliptic's generic point arithmetic (deprecated
// for new protocols, but the only point addition in the standard library)
// is enough here: P-256 is optional, for KDCs configured without
// edwards25519, and not on the allocation-free path.

const p256ElemLen = 33

// The P-256 M and N constants (MIT iana.c, from draft-irtf-cfrg-spake2).
var (
	p256M = mustP256("02886e2f97ace46e55ba9dd7242579f2993b64e16ef3dcab95afd497333d8fa12f")
	p256N = mustP256("03d8bbd6c639c62937b04d997f38c3770719c629d7014d49a24b4f98baa1292b49")
)

type p256Point struct{ x, y *big.Int }

func mustP256(h string) p256Point {
	b := make([]byte, len(h)/2)
	for i := range b {
		b[i] = unhex(h[2*i])<<4 | unhex(h[2*i+1])
	}
	x, y := elliptic.UnmarshalCompressed(elliptic.P256(), b)
	if x == nil {
		panic("spake: bad P-256 constant")
	}
	return p256Point{x, y}
}

// p256Key is the per-key part of P-256: w mod n and the masks w·M, w·N.
type p256Key struct {
	w      *big.Int
	wM, wN p256Point
}

func newP256Key(wbytes []byte) *p256Key {
	c := elliptic.P256()
	w := new(big.Int).SetBytes(wbytes)
	w.Mod(w, c.Params().N)
	wb := w.FillBytes(make([]byte, 32))
	k := &p256Key{w: w}
	k.wM.x, k.wM.y = c.ScalarMult(p256M.x, p256M.y, wb)
	k.wN.x, k.wN.y = c.ScalarMult(p256N.x, p256N.y, wb)
	return k
}

// p256Exchange computes pub = r·G + w·N and K = r·(T − w·M) for the client
// (r reduced mod n from random); it returns pub and K in compressed form.
func p256Exchange(k *p256Key, random []byte, theirs []byte, pub, shared *[p256ElemLen]byte) error {
	c := elliptic.P256()
	r := new(big.Int).SetBytes(random)
	r.Mod(r, c.Params().N)
	if r.Sign() == 0 {
		r.SetInt64(1) // probability 2^-256; never a zero multiplier
	}
	return p256Compute(k, r, &k.wN, &k.wM, theirs, pub, shared)
}

// p256Compute is keygen with mask and result with the peer's mask.
func p256Compute(k *p256Key, r *big.Int, mask, peerMask *p256Point, theirs []byte, pub, shared *[p256ElemLen]byte) error {
	c := elliptic.P256()
	rb := r.FillBytes(make([]byte, 32))
	x, y := c.ScalarBaseMult(rb)
	x, y = c.Add(x, y, mask.x, mask.y)
	copy(pub[:], elliptic.MarshalCompressed(c, x, y))
	if len(theirs) != p256ElemLen {
		return fmt.Errorf("%w: %d bytes, want %d", ErrPublicKey, len(theirs), p256ElemLen)
	}
	tx, ty := elliptic.UnmarshalCompressed(c, theirs)
	if tx == nil {
		return ErrPublicKey
	}
	// theirs − peer's mask: add the negated mask (x, p − y).
	ny := new(big.Int).Sub(c.Params().P, peerMask.y)
	qx, qy := c.Add(tx, ty, peerMask.x, ny)
	kx, ky := c.ScalarMult(qx, qy, rb)
	if kx.Sign() == 0 && ky.Sign() == 0 {
		return fmt.Errorf("%w: the shared point is the identity", ErrPublicKey)
	}
	copy(shared[:], elliptic.MarshalCompressed(c, kx, ky))
	return nil
}
