package spake

import (
	"crypto/aes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"

	"github.com/jcmturner/gokrb5/v8/crypto/rfc3961"
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
	k, err := lookupPRF(et)
	if err != nil {
		return nil, err
	}
	if len(key) != k.keyLen {
		return nil, fmt.Errorf("spake: %d-byte key for enctype %d, want %d", len(key), et, k.keyLen)
	}
	return k.prf(dst, key, input)
}

func (k *prfKind) prf(dst, key, input []byte) ([]byte, error) {
	if k.rfc8009 {
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], 1)
		var bits [4]byte
		binary.BigEndian.PutUint32(bits[:], uint32(k.outLen*8))
		m := hmac.New(k.newHash, key)
		m.Write(hdr[:])
		m.Write(prfLabel)
		m.Write([]byte{0})
		m.Write(input)
		m.Write(bits[:])
		var sum [64]byte
		return append(dst, m.Sum(sum[:0])[:k.outLen]...), nil
	}
	h := k.newHash()
	h.Write(input)
	var sum [sha1.Size]byte
	tmp := h.Sum(sum[:0])[:aes.BlockSize]
	// DK(key, "prf") = random-to-key(DR(key, "prf")) (RFC 3961 5.1): the
	// AES encryptions chained from the n-folded constant, truncated.
	kblk, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	var dk [32]byte
	kblk.Encrypt(dk[:16], prfFolded[:])
	if k.keyLen == 32 {
		kblk.Encrypt(dk[16:], dk[:16])
	}
	blk, err := aes.NewCipher(dk[:k.keyLen])
	if err != nil {
		return nil, err
	}
	// One block of AES-CTS with a zero IV is one block of AES.
	var out [aes.BlockSize]byte
	blk.Encrypt(out[:], tmp)
	return append(dst, out[:]...), nil
}

// PRFPlus appends n bytes of RFC 6113 PRF+ to dst:
// PRF(key, 1 || input) || PRF(key, 2 || input) || ..., truncated to n.
func PRFPlus(dst []byte, et int32, key, input []byte, n int) ([]byte, error) {
	k, err := lookupPRF(et)
	if err != nil {
		return nil, err
	}
	if len(key) != k.keyLen {
		return nil, fmt.Errorf("spake: %d-byte key for enctype %d, want %d", len(key), et, k.keyLen)
	}
	return k.prfPlus(dst, key, input, n)
}

func (k *prfKind) prfPlus(dst, key, input []byte, n int) ([]byte, error) {
	if n > 255*k.outLen {
		return nil, errors.New("spake: PRF+ output too long")
	}
	var buf [96]byte
	in := buf[:0]
	if len(input)+1 > len(buf) {
		in = make([]byte, 0, len(input)+1)
	}
	in = append(in, 0)
	in = append(in, input...)
	start := len(dst)
	for i := 1; len(dst)-start < n; i++ {
		in[0] = byte(i)
		var err error
		if dst, err = k.prf(dst, key, in); err != nil {
			return nil, err
		}
	}
	return dst[:start+n], nil
}

// CF2 appends KRB-FX-CF2(key1, pepper1, key2, pepper2) (RFC 6113 section
// 5.1) to dst: PRF+(key1, pepper1) XOR PRF+(key2, pepper2), as long as a key
// of the enctype (random-to-key is the identity for AES). Both keys are of
// enctype et.
func CF2(dst []byte, et int32, key1 []byte, pepper1 string, key2 []byte, pepper2 string) ([]byte, error) {
	k, err := lookupPRF(et)
	if err != nil {
		return nil, err
	}
	if len(key1) != k.keyLen || len(key2) != k.keyLen {
		return nil, fmt.Errorf("spake: CF2 keys of %d and %d bytes for enctype %d, want %d", len(key1), len(key2), et, k.keyLen)
	}
	var a, b [64]byte
	pa, err := k.prfPlus(a[:0], key1, []byte(pepper1), k.keyLen)
	if err != nil {
		return nil, err
	}
	pb, err := k.prfPlus(b[:0], key2, []byte(pepper2), k.keyLen)
	if err != nil {
		return nil, err
	}
	for i := range pa {
		pa[i] ^= pb[i]
	}
	return append(dst, pa...), nil
}
