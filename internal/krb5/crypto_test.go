package krb5

import (
	"bytes"
	"crypto/rand"
	mrand "math/rand/v2"
	"testing"

	"github.com/krb5-exporter/krb5-exporter/internal/enctype"

	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
)

func randomKey(t testing.TB, et *etypeInfo) []byte {
	t.Helper()
	n := 16
	if et.id == 18 || et.id == 20 {
		n = 32
	}
	k := make([]byte, n)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

// The engine's sealed messages must open with gokrb5 and the reverse, for
// every enctype and for lengths around the CTS block boundaries.
func TestSealOpenAgainstGokrb5(t *testing.T) {
	for _, et := range supportedEtypes {
		t.Run(et.name, func(t *testing.T) {
			key := randomKey(t, et)
			u, err := newUsageKey(et, key, keyusage.AS_REP_ENCPART, true)
			if err != nil {
				t.Fatal(err)
			}
			ck, err := newChecksumKey(et, key, keyusage.AS_REP_ENCPART)
			if err != nil {
				t.Fatal(err)
			}
			for n := 0; n <= 70; n++ {
				msg := make([]byte, n)
				rand.Read(msg)

				ct := u.seal(nil, msg, testRNG())
				if len(ct) != aesBlock+n+et.macLen {
					t.Fatalf("len %d: sealed %d bytes, want %d", n, len(ct), aesBlock+n+et.macLen)
				}
				got, err := et.gk.DecryptMessage(key, ct, keyusage.AS_REP_ENCPART)
				if err != nil {
					t.Fatalf("len %d: gokrb5 cannot open ours: %v", n, err)
				}
				if !bytes.Equal(got, msg) {
					t.Fatalf("len %d: gokrb5 opened %x, want %x", n, got, msg)
				}

				_, theirs, err := et.gk.EncryptMessage(key, msg, keyusage.AS_REP_ENCPART)
				if err != nil {
					t.Fatal(err)
				}
				pt, err := u.open(nil, theirs)
				if err != nil {
					t.Fatalf("len %d: cannot open gokrb5's: %v", n, err)
				}
				if !bytes.Equal(pt, msg) {
					t.Fatalf("len %d: opened %x, want %x", n, pt, msg)
				}

				sum := u.checksum(nil, msg)
				want, err := et.gk.GetChecksumHash(key, msg, keyusage.AS_REP_ENCPART)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(sum, want) {
					t.Fatalf("len %d: checksum %x, gokrb5 %x", n, sum, want)
				}
				if sum := ck.checksum(nil, msg); !bytes.Equal(sum, want) {
					t.Fatalf("len %d: checksum-only key's checksum %x, gokrb5 %x", n, sum, want)
				}
			}
		})
	}
}

func TestOpenRejectsTamperingAndWrongKey(t *testing.T) {
	for _, et := range supportedEtypes {
		key := randomKey(t, et)
		u, _ := newUsageKey(et, key, keyusage.TGS_REP_ENCPART_SESSION_KEY, false)
		other, _ := newUsageKey(et, randomKey(t, et), keyusage.TGS_REP_ENCPART_SESSION_KEY, false)
		otherUsage, _ := newUsageKey(et, key, keyusage.AS_REP_ENCPART, false)
		ct := u.seal(nil, []byte("a message of some forty bytes, or so..."), testRNG())
		for i := range ct {
			bad := bytes.Clone(ct)
			bad[i] ^= 0x01
			if _, err := u.open(nil, bad); err != errIntegrity {
				t.Fatalf("%s: flipped byte %d: got %v, want errIntegrity", et.name, i, err)
			}
		}
		if _, err := other.open(nil, ct); err != errIntegrity {
			t.Fatalf("%s: wrong key: %v", et.name, err)
		}
		if _, err := otherUsage.open(nil, ct); err != errIntegrity {
			t.Fatalf("%s: wrong usage: %v", et.name, err)
		}
		if _, err := u.open(nil, ct[:aesBlock+et.macLen-1]); err != errShortCiphertext {
			t.Fatalf("%s: short: %v", et.name, err)
		}
	}
}

const aesBlock = 16

func testRNG() *mrand.ChaCha8 {
	var seed [32]byte
	rand.Read(seed[:])
	return mrand.NewChaCha8(seed)
}

func TestEtypeNames(t *testing.T) {
	// The enctype table's Client flag is exactly what the engine implements.
	for _, typ := range enctype.All() {
		if typ.Client != (lookupEtype(typ.ID) != nil) {
			t.Errorf("%s: table Client=%v, engine implements it: %v", typ.Name, typ.Client, lookupEtype(typ.ID) != nil)
		}
	}
	for _, et := range supportedEtypes {
		id, err := enctype.ParseClient(et.name)
		if err != nil || id != et.id {
			t.Errorf("enctype.ParseClient(%q) = %d, %v", et.name, id, err)
		}
		if EtypeName(et.id) != et.name {
			t.Errorf("EtypeName(%d) = %q", et.id, EtypeName(et.id))
		}
	}
	for name, want := range map[string]int32{"aes256-sha2": 20, "AES128-SHA2": 19, "aes256-cts": 18, "aes128-cts": 17} {
		if id, err := enctype.ParseClient(name); err != nil || id != want {
			t.Errorf("enctype.ParseClient(%q) = %d, %v; want %d", name, id, err, want)
		}
	}
	for _, bad := range []string{"rc4-hmac", "des3-cbc-sha1", "", "aes512"} {
		if _, err := enctype.ParseClient(bad); err == nil {
			t.Errorf("enctype.ParseClient(%q) accepted", bad)
		}
	}
	// Types the engine does not implement still get MIT's name: a KDC may
	// issue an RC4 ticket to a client that has no RC4 key.
	if EtypeName(23) != "arcfour-hmac" || EtypeName(99) != "etype-99" {
		t.Errorf("EtypeName(23) = %q, EtypeName(99) = %q", EtypeName(23), EtypeName(99))
	}
}

func BenchmarkSeal(b *testing.B) {
	for _, et := range supportedEtypes {
		b.Run(et.name, func(b *testing.B) {
			u, _ := newUsageKey(et, randomKey(b, et), 7, false)
			msg := make([]byte, 120)
			dst := make([]byte, 0, 256)
			rng := testRNG()
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				dst = u.seal(dst[:0], msg, rng)
			}
		})
	}
}
