// Package hmacx is an HMAC (RFC 2104) whose key can be replaced without
// allocating: crypto/hmac fixes the key at hmac.New, which costs several
// allocations, and the Kerberos engine keys a new HMAC for every per-login
// key (SPAKE's K'[n], their Ki, the RFC 8009 PRF).
package hmacx

import "hash"

// maxBlock is the largest block size of the hashes used (SHA-384/512).
const maxBlock = 128

// HMAC implements hash.Hash; SetKey replaces the key.
type HMAC struct {
	inner, outer hash.Hash
	bs           int
	ipad, opad   [maxBlock]byte
	sum          [64]byte
}

// New returns an HMAC over the hash h with an empty key; call SetKey.
func New(h func() hash.Hash) *HMAC {
	m := &HMAC{inner: h(), outer: h()}
	m.bs = m.inner.BlockSize()
	if m.bs > maxBlock {
		panic("hmacx: block size too large")
	}
	m.SetKey(nil)
	return m
}

// SetKey starts a new MAC under key. A key longer than the block is hashed
// first, as RFC 2104 says.
func (m *HMAC) SetKey(key []byte) {
	if len(key) > m.bs {
		m.outer.Reset()
		m.outer.Write(key)
		key = m.outer.Sum(m.sum[:0])
	}
	clear(m.ipad[:m.bs])
	copy(m.ipad[:], key)
	copy(m.opad[:m.bs], m.ipad[:m.bs])
	for i := 0; i < m.bs; i++ {
		m.ipad[i] ^= 0x36
		m.opad[i] ^= 0x5c
	}
	m.Reset()
}

// Reset starts a new MAC under the same key.
func (m *HMAC) Reset() {
	m.inner.Reset()
	m.inner.Write(m.ipad[:m.bs])
}

// Write adds data to the MAC.
func (m *HMAC) Write(p []byte) (int, error) { return m.inner.Write(p) }

// Sum appends the MAC of the data written so far to b.
func (m *HMAC) Sum(b []byte) []byte {
	in := m.inner.Sum(m.sum[:0])
	m.outer.Reset()
	m.outer.Write(m.opad[:m.bs])
	m.outer.Write(in)
	return m.outer.Sum(b)
}

// Size is the MAC's length.
func (m *HMAC) Size() int { return m.outer.Size() }

// BlockSize is the hash's block size.
func (m *HMAC) BlockSize() int { return m.bs }
