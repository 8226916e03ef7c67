package krb5

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"
	"math/rand/v2"

	"github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/crypto/common"
	"github.com/jcmturner/gokrb5/v8/crypto/etype"
	"github.com/jcmturner/gokrb5/v8/iana/chksumtype"
	"github.com/jcmturner/gokrb5/v8/iana/etypeID"

	"github.com/krb5-exporter/krb5-exporter/internal/enctype"
)

// The per-message crypto of the four AES enctypes (RFC 3962, RFC 8009).
// gokrb5 derives Ke/Ki/Kc and builds a fresh AES schedule and HMAC for every
// message; here the derivation (done with gokrb5) happens once per key and
// usage, and a message costs only the block cipher and one HMAC.

// etypeInfo describes one supported encryption type.
type etypeInfo struct {
	id      int32
	name    string
	macLen  int   // truncated HMAC length in bytes
	cksum   int32 // the checksum type mandatory for this enctype
	newHash func() hash.Hash
	rfc8009 bool // integrity over IV|ciphertext rather than over the plaintext
	keyLen  int  // bytes of a key (gokrb5's GetKeyByteSize says 24 for enctype 20)
	gk      etype.EType
}

var supportedEtypes = []*etypeInfo{
	newEtypeInfo(etypeID.AES256_CTS_HMAC_SHA384_192, 24, chksumtype.HMAC_SHA384_192_AES256, sha512.New384, true),
	newEtypeInfo(etypeID.AES128_CTS_HMAC_SHA256_128, 16, chksumtype.HMAC_SHA256_128_AES128, sha256.New, true),
	newEtypeInfo(etypeID.AES256_CTS_HMAC_SHA1_96, 12, chksumtype.HMAC_SHA1_96_AES256, sha1.New, false),
	newEtypeInfo(etypeID.AES128_CTS_HMAC_SHA1_96, 12, chksumtype.HMAC_SHA1_96_AES128, sha1.New, false),
}

func newEtypeInfo(id int32, macLen int, cksum int32, h func() hash.Hash, r8009 bool) *etypeInfo {
	gk, err := crypto.GetEtype(id)
	if err != nil {
		panic(err) // the four AES enctypes are always in gokrb5
	}
	t, _ := enctype.ByID(id)
	return &etypeInfo{id: id, name: t.Name, macLen: macLen, cksum: cksum, newHash: h, rfc8009: r8009, keyLen: t.KeyLen, gk: gk}
}

// DefaultEtypes is the RHEL 9 / MIT order kinit sends: {20, 19, 18, 17}.
var DefaultEtypes = enctype.RHEL9

func lookupEtype(id int32) *etypeInfo {
	for _, e := range supportedEtypes {
		if e.id == id {
			return e
		}
	}
	return nil
}

// EtypeName returns the MIT name of an enctype number, or "etype-N".
func EtypeName(id int32) string { return enctype.Name(id) }

// zeroIV is the all-zero IV RFC 8009 feeds into the HMAC (a package array,
// so writing it to the hash interface does not allocate).
var zeroIV [aes.BlockSize]byte

// errIntegrity means a ciphertext's HMAC did not verify: the wrong key.
var errIntegrity = errors.New("integrity check failed")

// errShortCiphertext means a ciphertext cannot hold confounder and HMAC.
var errShortCiphertext = errors.New("ciphertext too short")

// usageKey is one key specialised to one key usage number.
type usageKey struct {
	et  *etypeInfo
	ke  cipher.Block
	ki  hash.Hash // HMAC keyed with Ki
	kc  hash.Hash // HMAC keyed with Kc; nil unless checksums are made
	buf [64]byte  // scratch: cipher blocks, HMAC output
}

// newUsageKey derives Ke, Ki (and Kc when checksum is set) from a protocol key.
func newUsageKey(et *etypeInfo, key []byte, usage uint32, checksum bool) (*usageKey, error) {
	ke, err := et.gk.DeriveKey(key, common.GetUsageKe(usage))
	if err != nil {
		return nil, err
	}
	ki, err := et.gk.DeriveKey(key, common.GetUsageKi(usage))
	if err != nil {
		return nil, err
	}
	blk, err := aes.NewCipher(ke)
	if err != nil {
		return nil, fmt.Errorf("%s key: %w", et.name, err)
	}
	u := &usageKey{et: et, ke: blk, ki: hmac.New(et.newHash, ki)}
	if checksum {
		kc, err := et.gk.DeriveKey(key, common.GetUsageKc(usage))
		if err != nil {
			return nil, err
		}
		u.kc = hmac.New(et.newHash, kc)
	}
	return u, nil
}

// newChecksumKey is a usageKey that only makes checksums: Kc alone is
// derived (Ke and Ki, two derivations, an AES schedule and an HMAC, would
// go unused: the TGS-REQ body checksum of every new TGT).
func newChecksumKey(et *etypeInfo, key []byte, usage uint32) (*usageKey, error) {
	kc, err := et.gk.DeriveKey(key, common.GetUsageKc(usage))
	if err != nil {
		return nil, err
	}
	return &usageKey{et: et, kc: hmac.New(et.newHash, kc)}, nil
}

// seal appends confounder|plaintext encrypted, then the HMAC, to dst. The
// confounder comes from rng, a ChaCha8 CSPRNG seeded from crypto/rand (one
// getrandom system call saved per message).
func (u *usageKey) seal(dst, plain []byte, rng *rand.ChaCha8) []byte {
	n := aes.BlockSize + len(plain)
	start := len(dst)
	dst = append(dst, make([]byte, n)...) // append of make does not allocate
	out := dst[start:]
	_, _ = rng.Read(out[:aes.BlockSize]) // never fails
	copy(out[aes.BlockSize:], plain)
	mac := u.ki
	mac.Reset()
	if !u.et.rfc8009 {
		mac.Write(out) // RFC 3962: HMAC over confounder|plaintext
	}
	u.ctsEncrypt(out)
	if u.et.rfc8009 {
		mac.Write(zeroIV[:]) // RFC 8009: HMAC over IV (zero) | ciphertext
		mac.Write(out)
	}
	sum := mac.Sum(u.buf[:0])
	return append(dst, sum[:u.et.macLen]...)
}

// open verifies and decrypts ct into dst[:0]'s backing array (grown as
// needed) and returns the plaintext without the confounder.
func (u *usageKey) open(dst, ct []byte) ([]byte, error) {
	ml := u.et.macLen
	if len(ct) < aes.BlockSize+ml {
		return nil, errShortCiphertext
	}
	body, tag := ct[:len(ct)-ml], ct[len(ct)-ml:]
	mac := u.ki
	mac.Reset()
	if u.et.rfc8009 {
		mac.Write(zeroIV[:])
		mac.Write(body)
		if !hmac.Equal(mac.Sum(u.buf[:0])[:ml], tag) {
			return nil, errIntegrity
		}
	}
	if cap(dst) < len(body) {
		dst = make([]byte, len(body), len(body)+len(body)/2)
	}
	pt := dst[:len(body)]
	copy(pt, body)
	u.ctsDecrypt(pt)
	if !u.et.rfc8009 {
		mac.Write(pt)
		if !hmac.Equal(mac.Sum(u.buf[:0])[:ml], tag) {
			return nil, errIntegrity
		}
	}
	return pt[aes.BlockSize:], nil
}

// checksum appends the keyed checksum (Kc) of data to dst.
func (u *usageKey) checksum(dst, data []byte) []byte {
	u.kc.Reset()
	u.kc.Write(data)
	sum := u.kc.Sum(u.buf[:0])
	return append(dst, sum[:u.et.macLen]...)
}

// ctsEncrypt encrypts b in place with AES-CBC and ciphertext stealing (the
// RFC 3962 variant that always swaps the last two blocks), IV zero.
func (u *usageKey) ctsEncrypt(b []byte) {
	n := len(b)
	prev := u.buf[0:16]
	x := u.buf[16:32]
	clear(prev)
	if n == aes.BlockSize {
		u.ke.Encrypt(b, b)
		return
	}
	m := (n + 15) / 16 // blocks, the last one possibly partial
	d := n - (m-1)*16  // length of the last block
	for i := 0; i < m-1; i++ {
		blk := b[i*16 : i*16+16]
		subtle(x, blk, prev)
		u.ke.Encrypt(prev, x)
		if i < m-2 {
			copy(blk, prev)
		}
	}
	// prev is C(m-1); encrypt the zero-padded last block chained on it.
	clear(x)
	copy(x, b[(m-1)*16:])
	subtle(x, x, prev)
	u.ke.Encrypt(x, x) // C(m)
	copy(b[(m-1)*16:], prev[:d])
	copy(b[(m-2)*16:], x)
}

// ctsDecrypt reverses ctsEncrypt in place.
func (u *usageKey) ctsDecrypt(b []byte) {
	n := len(b)
	if n == aes.BlockSize {
		u.ke.Decrypt(b, b)
		return
	}
	prev, c, dx, cm1 := u.buf[0:16], u.buf[16:32], u.buf[32:48], u.buf[48:64]
	clear(prev)
	m := (n + 15) / 16
	d := n - (m-1)*16
	for i := 0; i < m-2; i++ {
		blk := b[i*16 : i*16+16]
		copy(c, blk)
		u.ke.Decrypt(blk, blk)
		subtle(blk, blk, prev)
		copy(prev, c)
	}
	// b[(m-2)*16:] holds C(m) then the first d bytes of C(m-1).
	u.ke.Decrypt(dx, b[(m-2)*16:(m-1)*16])
	copy(cm1, b[(m-1)*16:])
	copy(cm1[d:], dx[d:])
	last := b[(m-1)*16:]
	for j := 0; j < d; j++ {
		last[j] = dx[j] ^ cm1[j]
	}
	blk := b[(m-2)*16 : (m-1)*16]
	u.ke.Decrypt(blk, cm1)
	subtle(blk, blk, prev)
}

// subtle sets dst = a XOR b for one block.
func subtle(dst, a, b []byte) {
	for i := 0; i < aes.BlockSize; i++ {
		dst[i] = a[i] ^ b[i]
	}
}
