package spake

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"testing"

	"filippo.io/edwards25519"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5/spake/spaketest"
	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
)

// kdcChallenge plays MIT's KDC: T = x·G + w·M for a random x, encoded and
// parsed.
func kdcChallenge(t testing.TB, key *Key) (x edwards25519.Scalar, msg []byte, ch Challenge) {
	t.Helper()
	var rnd [32]byte
	rand.Read(rnd[:])
	scalarFrom32(&x, rnd[:])
	var T [32]byte
	keygen(&T, &x, &key.wM)
	msg = AppendChallenge(nil, GroupEdwards25519, T[:], 2, FactorNone)
	if err := ParseChallenge(msg, &ch); err != nil {
		t.Fatal(err)
	}
	return x, msg, ch
}

// mustKey prepares ikey (zero when nil) of enctype et for edwards25519.
func mustKey(t testing.TB, et int32, ikey []byte) *Key {
	t.Helper()
	if ikey == nil {
		ikey = make([]byte, KeyLen(et))
	}
	key, err := NewKey(et, ikey, GroupEdwards25519)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// TestExchangeAgrees runs the client against the KDC side for every
// enctype: both ends reach the same K and the same K'[n] only with the same
// key.
func TestExchangeAgrees(t *testing.T) {
	for _, et := range []int32{EtypeAES128SHA1, EtypeAES256SHA1, EtypeAES128SHA256, EtypeAES256SHA384} {
		ikey := make([]byte, KeyLen(et))
		rand.Read(ikey)
		key := mustKey(t, et, ikey)
		x, msg, ch := kdcChallenge(t, key)
		support := AppendSupport(nil, GroupEdwards25519)
		var e Exchange
		var rnd [32]byte
		rand.Read(rnd[:])
		if err := e.Challenge(key, support, msg, &ch, &rnd); err != nil {
			t.Fatal(err)
		}
		var K [32]byte
		if err := result(&K, &x, &key.wN, e.Public()); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(K[:], e.Shared()) {
			t.Fatalf("etype %d: KDC K %X, client K %X", et, K, e.Shared())
		}
		// The KDC's K'[1] from its own K and transcript (MIT's order of hashing).
		kdc := Exchange{key: key, elen: elemLen, h: sha256.New()}
		copy(kdc.shared[:], K[:])
		kdc.transcript(support, msg)
		kdc.transcript(e.Public(), nil)
		body := []byte("request body")
		kdcK1, _ := kdc.DeriveKey(nil, body, 1)
		k1, err := e.DeriveKey(nil, body, 1)
		if err != nil || !bytes.Equal(k1, kdcK1) || len(k1) != KeyLen(et) {
			t.Fatalf("etype %d: K'[1] %X (%v), KDC %X", et, k1, err, kdcK1)
		}
		// A client with another key derives other keys.
		other := append([]byte(nil), ikey...)
		other[0] ^= 1
		okey, _ := NewKey(et, other, GroupEdwards25519)
		var oe Exchange
		if err := oe.Challenge(okey, support, msg, &ch, &rnd); err != nil {
			t.Fatal(err)
		}
		var oK [32]byte
		_ = result(&oK, &x, &key.wN, oe.Public())
		if bytes.Equal(oK[:], oe.Shared()) {
			t.Fatalf("etype %d: a wrong key reached the same K", et)
		}
	}
}

func TestChallengeErrors(t *testing.T) {
	key := testKey(t)
	_, msg, ch := kdcChallenge(t, key)
	var e Exchange
	var rnd [32]byte
	bad := ch
	bad.PubKey = spaketest.OffCurve(t)
	if err := e.Challenge(key, nil, msg, &bad, &rnd); !errors.Is(err, ErrPublicKey) {
		t.Errorf("invalid point: %v", err)
	}
	bad.PubKey = ch.PubKey[:31]
	if err := e.Challenge(key, nil, msg, &bad, &rnd); !errors.Is(err, ErrPublicKey) {
		t.Errorf("short point: %v", err)
	}
	bad = ch
	bad.Group = GroupP256
	if err := e.Challenge(key, nil, msg, &bad, &rnd); !errors.Is(err, ErrGroup) {
		t.Errorf("group P-256: %v", err)
	}
	bad = ch
	bad.SFNone = false
	if err := e.Challenge(key, nil, msg, &bad, &rnd); !errors.Is(err, ErrNoFactor) {
		t.Errorf("no SF-NONE: %v", err)
	}
}

// BenchmarkClient is the client's SPAKE work per login with a prepared key:
// one challenge (two scalar multiplications) and K'[0], K'[1].
func BenchmarkClient(b *testing.B) {
	for _, et := range []int32{EtypeAES256SHA1, EtypeAES256SHA384} {
		b.Run(EtypeName(et), func(b *testing.B) {
			key := mustKey(b, et, nil)
			_, msg, ch := kdcChallenge(b, key)
			body := make([]byte, 200)
			var e Exchange
			var rnd [32]byte
			var k0, k1 []byte
			b.ReportAllocs()
			for b.Loop() {
				rnd[0]++
				if err := e.Challenge(key, nil, msg, &ch, &rnd); err != nil {
					b.Fatal(err)
				}
				k0, _ = e.DeriveKey(k0[:0], body, 0)
				k1, _ = e.DeriveKey(k1[:0], body, 1)
			}
		})
	}
}

func EtypeName(et int32) string {
	switch et {
	case EtypeAES256SHA1:
		return "aes256-sha1"
	case EtypeAES256SHA384:
		return "aes256-sha384"
	}
	return "other"
}

// A warm Exchange allocates nothing per login, for every enctype (AES is
// re-keyed in place by aesx).
func TestClientAllocations(t *testing.T) {
	if testutil.Race {
		t.Skip("the race detector changes allocation counts")
	}
	for _, c := range []struct {
		et   int32
		want float64
	}{{EtypeAES128SHA256, 0}, {EtypeAES256SHA384, 0}, {EtypeAES256SHA1, 0}, {EtypeAES128SHA1, 0}} {
		key := mustKey(t, c.et, nil)
		_, msg, ch := kdcChallenge(t, key)
		var e Exchange
		var rnd [32]byte
		body := make([]byte, 200)
		k := make([]byte, 0, 32)
		if n := testing.AllocsPerRun(50, func() {
			rnd[0]++
			if err := e.Challenge(key, nil, msg, &ch, &rnd); err != nil {
				t.Fatal(err)
			}
			k, _ = e.DeriveKey(k[:0], body, 0)
			k, _ = e.DeriveKey(k[:0], body, 1)
		}); n > c.want {
			t.Errorf("enctype %d: %v allocations per login, want %v", c.et, n, c.want)
		}
	}
}
