package krb5

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"

	"github.com/jcmturner/gokrb5/v8/crypto/common"
	"github.com/jcmturner/gokrb5/v8/crypto/rfc3961"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5/aesx"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5/hmacx"
)

// freshKey is a usageKey whose base key changes every login: SPAKE's K'[0]
// (usage 3, the AS-REP) and K'[1] (usage 65, the second factor). Ke and Ki
// are derived here without gokrb5's allocations (RFC 3961 DK with the
// n-folded constants computed once, RFC 8009 KDF-HMAC-SHA2 with a re-keyed
// HMAC) and AES re-keyed in place (aesx), so set allocates nothing.
type freshKey struct {
	et           *etypeInfo
	u            usageKey
	keBlk        *aesx.Block // u.ke: AES under Ke
	base         *aesx.Block // aes-sha1: AES under the base key, for DR
	mac          *hmacx.HMAC // the message HMAC (Ki), and the RFC 8009 KDF
	foldE, foldI [aes.BlockSize]byte
	kdfIn        [14]byte // RFC 8009: 00000001 | usage | 0xAA or 0x55 | 00 | bits
	ke, ki, sum  [64]byte
}

func newFreshKey(et *etypeInfo, usage uint32) *freshKey {
	f := &freshKey{et: et, mac: hmacx.New(et.newHash), keBlk: new(aesx.Block), base: new(aesx.Block)}
	f.u = usageKey{et: et, ke: f.keBlk, ki: f.mac}
	copy(f.foldE[:], rfc3961.Nfold(common.GetUsageKe(usage), aes.BlockSize*8))
	copy(f.foldI[:], rfc3961.Nfold(common.GetUsageKi(usage), aes.BlockSize*8))
	binary.BigEndian.PutUint32(f.kdfIn[0:4], 1)
	binary.BigEndian.PutUint32(f.kdfIn[4:8], usage)
	return f
}

// set derives Ke and Ki from key (of f's enctype) and keys the schedules.
func (f *freshKey) set(key []byte) error {
	et := f.et
	ke, ki := f.ke[:et.keyLen], f.ki[:et.keyLen]
	if et.rfc8009 {
		ki = f.ki[:et.macLen] // 128 or 192 bits (RFC 8009 section 5)
		f.kdf(key, 0xAA, ke)
		f.kdf(key, 0x55, ki)
	} else {
		if err := f.base.SetKey(key); err != nil {
			return err
		}
		dr(f.base, &f.foldE, ke)
		dr(f.base, &f.foldI, ki)
		f.base.Clear()
	}
	if err := f.keBlk.SetKey(ke); err != nil {
		return err
	}
	f.mac.SetKey(ki)
	clear(f.ke[:])
	clear(f.ki[:])
	clear(f.sum[:])
	return nil
}

// kdf is RFC 8009 KDF-HMAC-SHA2(key, usage | c, len(out)*8).
func (f *freshKey) kdf(key []byte, c byte, out []byte) {
	f.kdfIn[8], f.kdfIn[9] = c, 0
	binary.BigEndian.PutUint32(f.kdfIn[10:], uint32(len(out)*8))
	f.mac.SetKey(key)
	f.mac.Write(f.kdfIn[:])
	copy(out, f.mac.Sum(f.sum[:0]))
}

// dr is RFC 3961 DR for AES: out is filled with the AES encryptions chained
// from the n-folded constant (random-to-key is the identity).
func dr(blk cipher.Block, fold *[aes.BlockSize]byte, out []byte) {
	blk.Encrypt(out[:aes.BlockSize], fold[:])
	for i := aes.BlockSize; i < len(out); i += aes.BlockSize {
		blk.Encrypt(out[i:i+aes.BlockSize], out[i-aes.BlockSize:i])
	}
}
