package krb5

import (
	"bytes"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"testing"

	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
)

// freshKey derives the same Ke and Ki as gokrb5 (through newUsageKey): what
// one seals the other opens, for every enctype, both SPAKE usages and
// re-keying.
func TestFreshKeyMatchesGokrb5(t *testing.T) {
	rng := mrand.NewChaCha8([32]byte{1})
	for _, et := range supportedEtypes {
		for _, usage := range []uint32{keyusage.AS_REP_ENCPART, 65} {
			f := newFreshKey(et, usage)
			for i := 0; i < 3; i++ {
				key := make([]byte, et.keyLen)
				rand.Read(key)
				if err := f.set(key); err != nil {
					t.Fatal(err)
				}
				ref, err := newUsageKey(et, key, usage, false)
				if err != nil {
					t.Fatal(err)
				}
				msg := []byte(fmt.Sprintf("message %d for %s usage %d", i, et.name, usage))
				ct := f.u.seal(nil, msg, rng)
				if pt, err := ref.open(nil, ct); err != nil || !bytes.Equal(pt, msg) {
					t.Fatalf("%s usage %d: gokrb5 keys open %q, %v", et.name, usage, pt, err)
				}
				ct = ref.seal(nil, msg, rng)
				if pt, err := f.u.open(nil, ct); err != nil || !bytes.Equal(pt, msg) {
					t.Fatalf("%s usage %d: fresh keys open %q, %v", et.name, usage, pt, err)
				}
			}
		}
	}
}
