package spake

import (
	"crypto/aes"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"

	"github.com/jcmturner/gokrb5/v8/crypto/rfc3961"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5/aesx"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5/hmacx"
)

// The four AES enctype numbers (RFC 3962, RFC 8009).
const (
	EtypeAES128SHA1   int32 = 17
	EtypeAES256SHA1   int32 = 18
	EtypeAES128SHA256 int32 = 19
	EtypeAES256SHA384 int32 = 20
)

// ErrEtype means an enctype this package has no PRF for.
var ErrEtype = errors.New("enctype not supported for SPAKE")

// prfKind describes the PRF of one enctype.
type prfKind struct {
	etype   int32
	keyLen  int  // key bytes, also the key-generation seed length
	outLen  int  // PRF output bytes
	rfc8009 bool // KDF-HMAC-SHA2 PRF; else the RFC 3961 simplified profile
	newHash func() hash.Hash
}

var prfKinds = [...]prfKind{
	{etype: EtypeAES128SHA1, keyLen: 16, outLen: 16, newHash: sha1.New},
	{etype: EtypeAES256SHA1, keyLen: 32, outLen: 16, newHash: sha1.New},
	{etype: EtypeAES128SHA256, keyLen: 16, outLen: 32, rfc8009: true, newHash: sha256.New},
	{etype: EtypeAES256SHA384, keyLen: 32, outLen: 48, rfc8009: true, newHash: sha512.New384},
}

func lookupPRF(et int32) (*prfKind, error) {
	for i := range prfKinds {
		if prfKinds[i].etype == et {
			return &prfKinds[i], nil
		}
	}
	return nil, fmt.Errorf("%w: %d", ErrEtype, et)
}

// KeyLen returns the key length in bytes of an AES enctype, 0 for others.
func KeyLen(et int32) int {
	k, err := lookupPRF(et)
	if err != nil {
		return 0
	}
	return k.keyLen
}

// prfFolded is the constant "prf" n-folded to the AES block size.
var prfFolded = func() (b [aes.BlockSize]byte) {
	copy(b[:], rfc3961.Nfold(prfLabel, aes.BlockSize*8))
	return b
}()

// prfLabel is the key derivation constant of the RFC 3961 PRF and the label
// of the RFC 8009 one.
var prfLabel = []byte("prf")

// PRF appends the enctype's pseudo-random function of input under key to
// dst: RFC 3962 (aes-sha1: E(DK(key, "prf"), SHA-1(input)[:16])) or RFC 8009
// (aes-sha2: KDF-HMAC-SHA2(key, "prf", input, 256 or 384)).
func PRF(dst []byte, et int32, key, input []byte) ([]byte, error) {
	var p prfCtx
	if err := p.init(et, key); err != nil {
		return nil, err
	}
	return p.prf(dst, input), nil
}

// PRFPlus appends n bytes of RFC 6113 PRF+ to dst:
// PRF(key, 1 || input) || PRF(key, 2 || input) || ..., truncated to n.
func PRFPlus(dst []byte, et int32, key, input []byte, n int) ([]byte, error) {
	var p prfCtx
	if err := p.init(et, key); err != nil {
		return nil, err
	}
	return p.plus(dst, input, n)
}

// CF2 appends KRB-FX-CF2(key1, pepper1, key2, pepper2) (RFC 6113 section
// 5.1) to dst: PRF+(key1, pepper1) XOR PRF+(key2, pepper2), as long as a key
// of the enctype (random-to-key is the identity for AES). Both keys are of
// enctype et.
func CF2(dst []byte, et int32, key1 []byte, pepper1 string, key2 []byte, pepper2 string) ([]byte, error) {
	var p1, p2 prfCtx
	if err := p1.init(et, key1); err != nil {
		return nil, err
	}
	if err := p2.init(et, key2); err != nil {
		return nil, err
	}
	n := p1.k.keyLen
	var a, b [64]byte
	pa, err := p1.plus(a[:0], []byte(pepper1), n)
	if err != nil {
		return nil, err
	}
	pb, err := p2.plus(b[:0], []byte(pepper2), n)
	if err != nil {
		return nil, err
	}
	for i := range pa {
		pa[i] ^= pb[i]
	}
	return append(dst, pa...), nil
}

// prfCtx is one key's PRF. Re-initialised for a new key it allocates
// nothing: the HMAC (aes-sha2) or AES (aes-sha1) is re-keyed in place.
type prfCtx struct {
	k   *prfKind
	mac *hmacx.HMAC // aes-sha2: HMAC under the key
	h   hash.Hash   // aes-sha1: SHA-1 of the input
	blk aesx.Block  // aes-sha1: AES under DK(key, "prf"), and under key for DK
	in  [256]byte   // counter || input for PRF+
	hdr [8]byte     // aes-sha2: 00000001 || "prf" || 00 prefix scratch
	out [64]byte
}

// init keys the PRF with key of enctype et.
func (p *prfCtx) init(et int32, key []byte) error {
	k, err := lookupPRF(et)
	if err != nil {
		return err
	}
	if len(key) != k.keyLen {
		return fmt.Errorf("spake: %d-byte key for enctype %d, want %d", len(key), et, k.keyLen)
	}
	if p.k == nil || p.k.newHash == nil || p.k.rfc8009 != k.rfc8009 || p.k.outLen != k.outLen {
		p.mac, p.h = nil, nil
	}
	p.k = k
	if k.rfc8009 {
		if p.mac == nil {
			p.mac = hmacx.New(k.newHash)
		}
		p.mac.SetKey(key)
		return nil
	}
	if p.h == nil {
		p.h = k.newHash()
	}
	// DK(key, "prf") = random-to-key(DR(key, "prf")) (RFC 3961 5.1): the
	// AES encryptions chained from the n-folded constant, truncated.
	if err := p.blk.SetKey(key); err != nil {
		return err
	}
	dk := p.out[:k.keyLen]
	p.blk.Encrypt(dk[:16], prfFolded[:])
	if k.keyLen == 32 {
		p.blk.Encrypt(dk[16:], dk[:16])
	}
	err = p.blk.SetKey(dk)
	clear(dk)
	return err
}

// prf appends PRF(key, input) to dst.
func (p *prfCtx) prf(dst, input []byte) []byte {
	k := p.k
	if k.rfc8009 {
		m := p.mac
		m.Reset()
		binary.BigEndian.PutUint32(p.hdr[:4], 1)
		copy(p.hdr[4:], "prf\x00")
		m.Write(p.hdr[:])
		m.Write(input)
		binary.BigEndian.PutUint32(p.hdr[:4], uint32(k.outLen*8))
		m.Write(p.hdr[:4])
		return append(dst, m.Sum(p.out[:0])[:k.outLen]...)
	}
	p.h.Reset()
	p.h.Write(input)
	tmp := p.h.Sum(p.out[:0])[:aes.BlockSize]
	// One block of AES-CTS with a zero IV is one block of AES.
	p.blk.Encrypt(p.out[32:48], tmp)
	return append(dst, p.out[32:48]...)
}

// plus appends n bytes of PRF+(key, input) to dst.
func (p *prfCtx) plus(dst, input []byte, n int) ([]byte, error) {
	if n > 255*p.k.outLen {
		return nil, errors.New("spake: PRF+ output too long")
	}
	if len(input)+1 > len(p.in) {
		return nil, errors.New("spake: PRF+ input too long")
	}
	in := p.in[:1+len(input)]
	copy(in[1:], input)
	start := len(dst)
	for i := 1; len(dst)-start < n; i++ {
		in[0] = byte(i)
		dst = p.prf(dst, in)
	}
	return dst[:start+n], nil
}
