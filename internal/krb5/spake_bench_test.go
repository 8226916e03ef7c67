package krb5

import (
	"crypto/rand"
	mrand "math/rand/v2"
	"testing"

	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
)

// BenchmarkSPAKEReplyKeys is the engine's per-login work with SPAKE's fresh
// keys, without the network or the group arithmetic (spake's
// BenchmarkClient): keying K'[1] and K'[0], sealing the SF-NONE factor
// under K'[1] and opening an AS-REP-sized enc-part under K'[0].
func BenchmarkSPAKEReplyKeys(b *testing.B) {
	rng := mrand.NewChaCha8([32]byte{1})
	for _, et := range supportedEtypes {
		b.Run(et.name, func(b *testing.B) {
			k0, k1 := newFreshKey(et, keyusage.AS_REP_ENCPART), newFreshKey(et, 65)
			key := make([]byte, et.keyLen)
			rand.Read(key)
			if err := k0.set(key); err != nil {
				b.Fatal(err)
			}
			encPart := k0.u.seal(nil, make([]byte, 220), rng) // MIT's EncASRepPart for a TGT: about 220 bytes
			factor := []byte{0x30, 0x05, 0xa0, 0x03, 0x02, 0x01, 0x01}
			ct, buf := make([]byte, 0, 64), make([]byte, 0, 512)
			b.ReportAllocs()
			for b.Loop() {
				if err := k1.set(key); err != nil {
					b.Fatal(err)
				}
				ct = k1.u.seal(ct[:0], factor, rng)
				if err := k0.set(key); err != nil {
					b.Fatal(err)
				}
				if _, err := k0.u.open(buf[:0], encPart); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
