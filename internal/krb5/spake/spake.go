package spake

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"

	"filippo.io/edwards25519"
)

// PADataType is the padata type of PA-SPAKE.
const PADataType int32 = 151

// KeyUsage is the key usage of the encrypted SPAKESecondFactor and of the
// PA-SPAKE encdata message (KEY_USAGE_SPAKE).
const KeyUsage uint32 = 65

// FactorNone is the SF-NONE second factor type: no second factor, which MIT's
// client sends for keytab and password logins.
const FactorNone int32 = 1

// ErrNoFactor means a challenge does not offer SF-NONE, the only second
// factor a keytab or password login can answer.
var ErrNoFactor = errors.New("SPAKE challenge offers no SF-NONE factor")

// Key is an initial reply key (the client's long-term key) prepared for SPAKE
// in one group: the w bytes and the masks w·M and w·N depend only on the key,
// so they are computed once, not per login.
type Key struct {
	prf    *prfKind
	group  int32
	wbytes [multLen]byte
	w      edwards25519.Scalar
	wM, wN edwards25519.Point
	p256   *p256Key // group P-256 instead of edwards25519
	// spakeHalf is PRF+(ikey, "SPAKE"), the constant half of K'[n]'s CF2.
	spakeHalf [32]byte
}

// NewKey prepares the initial reply key ikey of enctype et for group.
func NewKey(et int32, ikey []byte, group int32) (*Key, error) {
	if !Supported(group) {
		return nil, fmt.Errorf("%w: %s", ErrGroup, GroupName(group))
	}
	k, err := lookupPRF(et)
	if err != nil {
		return nil, err
	}
	if len(ikey) != k.keyLen {
		return nil, fmt.Errorf("spake: %d-byte key for enctype %d, want %d", len(ikey), et, k.keyLen)
	}
	key := &Key{prf: k, group: group} // derived values only: ikey is not kept
	// MIT derive_wbytes: PRF+(ikey, "SPAKEsecret" || group as 32-bit BE).
	var p prfCtx
	if err := p.init(et, ikey); err != nil {
		return nil, err
	}
	var in [15]byte
	copy(in[:], "SPAKEsecret")
	binary.BigEndian.PutUint32(in[11:], uint32(group))
	var buf [64]byte // PRF+ works in whole PRF blocks (48 bytes for enctype 20)
	w, err := p.plus(buf[:0], in[:], multLen)
	if err != nil {
		return nil, err
	}
	copy(key.wbytes[:], w)
	if group == GroupP256 {
		key.p256 = newP256Key(key.wbytes[:])
	} else {
		scalarFrom32(&key.w, key.wbytes[:])
		key.wM.ScalarMult(&key.w, edM)
		key.wN.ScalarMult(&key.w, edN)
	}
	half, err := p.plus(buf[:0], []byte("SPAKE"), k.keyLen)
	if err != nil {
		return nil, err
	}
	copy(key.spakeHalf[:], half)
	return key, nil
}

// Etype returns the key's enctype.
func (k *Key) Etype() int32 { return k.prf.etype }

// Group returns the key's group.
func (k *Key) Group() int32 { return k.group }

// WBytes returns PRF+(ikey, "SPAKEsecret" || group), the multiplier input.
func (k *Key) WBytes() []byte { return k.wbytes[:] }

// Exchange is the client's state for one SPAKE login. The zero value is
// ready for Challenge; an Exchange may be reused for the next login, and
// then allocates nothing for the aes-sha2 enctypes.
type Exchange struct {
	key    *Key
	y      edwards25519.Scalar // private multiplier divided by the cofactor
	random [32]byte            // P-256: the private multiplier before reduction
	elen   int                 // element length of the group
	pub    [p256ElemLen]byte   // S
	shared [p256ElemLen]byte   // K
	thash  [hashLen]byte
	h      hash.Hash // SHA-256
	prf    prfCtx    // PRF of the K'[n] seeds
	hdr    [13]byte  // scratch: group || etype, n || block counter
	seed   [hashLen]byte
	out    [64]byte
}

// Challenge answers a SPAKEChallenge: support is the encoded PA-SPAKE
// support message the client sent before (nil when answering the KDC's
// optimistic challenge), msg the whole encoded PA-SPAKE challenge as
// received and ch its parsed form; random supplies the client's secret. It
// computes S, K and the transcript hash.
func (e *Exchange) Challenge(key *Key, support, msg []byte, ch *Challenge, random *[32]byte) error {
	if ch.Group != key.group {
		return fmt.Errorf("%w: challenge for %s, key for %s", ErrGroup, GroupName(ch.Group), GroupName(key.group))
	}
	if !ch.SFNone {
		return ErrNoFactor
	}
	e.key = key
	if key.group == GroupP256 {
		e.random = *random
	} else {
		scalarFrom32(&e.y, random[:])
	}
	return e.finish(support, msg, ch.PubKey)
}

// finish computes S, K and the transcript hash from e.y.
func (e *Exchange) finish(support, msg, theirs []byte) error {
	if k := e.key.p256; k != nil {
		e.elen = p256ElemLen
		err := p256Exchange(k, e.random[:], theirs, &e.pub, &e.shared)
		clear(e.random[:])
		if err != nil {
			return err
		}
	} else {
		e.elen = elemLen
		var s, k edwards25519.Point
		keygenPoint(&s, &e.y, &e.key.wN)
		if err := resultPoint(&k, &e.y, &e.key.wM, theirs); err != nil {
			return err
		}
		encodePair((*[elemLen]byte)(e.pub[:elemLen]), (*[elemLen]byte)(e.shared[:elemLen]), &s, &k)
	}
	if e.h == nil {
		e.h = sha256.New()
	}
	clear(e.thash[:])
	e.transcript(support, msg)
	e.transcript(e.pub[:e.elen], nil)
	return nil
}

// transcript sets thash to H(thash || a || b) (MIT update_thash).
func (e *Exchange) transcript(a, b []byte) {
	h := e.h
	h.Reset()
	h.Write(e.thash[:])
	h.Write(a)
	h.Write(b)
	h.Sum(e.thash[:0])
}

// Public returns S, the client's public element for the SPAKEResponse.
func (e *Exchange) Public() []byte { return e.pub[:e.elen] }

// Shared returns K, the shared group element.
func (e *Exchange) Shared() []byte { return e.shared[:e.elen] }

// Transcript returns the final transcript hash.
func (e *Exchange) Transcript() []byte { return e.thash[:] }

// DeriveKey appends K'[n] to dst: reqBody is the DER KDC-REQ-BODY of the
// AS-REQ that carries the SPAKEResponse. K'[0] is the new reply key, K'[1]
// encrypts the second factor.
//
// It is MIT's derive_key: the seed is one SHA-256 block (enough for both
// key lengths), random-to-key is the identity for AES, and CF2's first half
// PRF+(ikey, "SPAKE") is precomputed with the key.
func (e *Exchange) DeriveKey(dst []byte, reqBody []byte, n uint32) ([]byte, error) {
	k := e.key
	if k == nil {
		return nil, errors.New("spake: DeriveKey before Challenge")
	}
	binary.BigEndian.PutUint32(e.hdr[:4], uint32(k.group))
	binary.BigEndian.PutUint32(e.hdr[4:8], uint32(k.prf.etype))
	h := e.h
	h.Reset()
	h.Write(spakeKeyLabel)
	h.Write(e.hdr[:8])
	h.Write(k.wbytes[:])
	h.Write(e.shared[:e.elen])
	h.Write(e.thash[:])
	h.Write(reqBody)
	binary.BigEndian.PutUint32(e.hdr[8:12], n)
	e.hdr[12] = 1 // block counter; one SHA-256 block covers 32-byte keys
	h.Write(e.hdr[8:13])
	h.Sum(e.seed[:0])
	if err := e.prf.init(k.prf.etype, e.seed[:k.prf.keyLen]); err != nil {
		return nil, err
	}
	pb, err := e.prf.plus(e.out[:0], keyderivLabel, k.prf.keyLen)
	if err != nil {
		return nil, err
	}
	start := len(dst)
	dst = append(dst, k.spakeHalf[:k.prf.keyLen]...)
	out := dst[start:]
	for i := range out {
		out[i] ^= pb[i]
	}
	clear(e.seed[:])
	clear(e.out[:])
	return dst, nil
}

// The labels of the K'[n] derivation.
var (
	spakeKeyLabel = []byte("SPAKEkey")
	keyderivLabel = []byte("keyderiv")
)
