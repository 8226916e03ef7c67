package spake

import (
	"bytes"
	"errors"
	"testing"
)

func TestMessagesRoundTrip(t *testing.T) {
	pub := bytes.Repeat([]byte{0xab}, 32)
	cipher := bytes.Repeat([]byte{0xcd}, 300) // long form lengths
	var r Response
	if err := ParseResponse(AppendResponse(nil, pub, EtypeAES256SHA384, cipher), &r); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(r.PubKey, pub) || r.Factor.Etype != EtypeAES256SHA384 || r.Factor.HasKvno || !bytes.Equal(r.Factor.Cipher, cipher) {
		t.Fatalf("response %+v", r)
	}
	groups, err := ParseSupport(nil, AppendSupport(nil, 1, 2, 300, -1))
	if err != nil || len(groups) != 4 || groups[2] != 300 || groups[3] != -1 {
		t.Fatalf("support %v %v", groups, err)
	}
	typ, data, err := ParseSecondFactor(AppendFactorNone(nil))
	if err != nil || typ != FactorNone || data != nil {
		t.Fatalf("factor %d %x %v", typ, data, err)
	}
	var ch Challenge
	if err := ParseChallenge(AppendChallenge(nil, GroupP256, pub[:33-1], 2, 3), &ch); err != nil {
		t.Fatal(err)
	}
	if ch.Group != GroupP256 || ch.SFNone || ch.Factors != 2 {
		t.Fatalf("challenge %+v", ch)
	}
}

func TestMalformed(t *testing.T) {
	good := unh(t, vectors[0].challenge)
	for name, b := range map[string][]byte{
		"empty":          nil,
		"truncated":      good[:len(good)-1],
		"trailing":       append(append([]byte(nil), good...), 0),
		"support":        unh(t, "A0093007A0053003020101"),
		"no factors":     AppendChallenge(nil, 1, make([]byte, 32)),
		"bad alt":        unh(t, "A5023000"),
		"long int":       unh(t, "A10F300DA00702050100000000A1020400"),
		"nonminimal":     unh(t, "A1183016"+"A00402020001"+"A1020400"+"A20A30083006A00402020001"),
		"missing group":  unh(t, "A111300F"+"A1020400"+"A20930073005A003020101"),
		"factor no type": unh(t, "A1153013"+"A003020101"+"A1020400"+"A2083006"+"3004A1020400"),
	} {
		var ch Challenge
		err := ParseChallenge(b, &ch)
		t.Logf("%s: %v", name, err)
		if err == nil {
			t.Errorf("%s: parsed %+v", name, ch)
		} else if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v is not ErrMalformed", name, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, v := range vectors {
		f.Add(unh(f, v.challenge))
	}
	f.Add(unh(f, "A0093007A0053003020101"))
	f.Add(AppendResponse(nil, make([]byte, 32), 18, make([]byte, 40)))
	f.Fuzz(func(t *testing.T, b []byte) {
		var ch Challenge
		if err := ParseChallenge(b, &ch); err == nil {
			// What parses re-encodes to a message that parses the same.
			var fs []int32
			for range ch.Factors {
				fs = append(fs, 99)
			}
			if ch.SFNone {
				fs[0] = FactorNone
			}
			var again Challenge
			if err := ParseChallenge(AppendChallenge(nil, ch.Group, ch.PubKey, fs...), &again); err != nil || again.Group != ch.Group || again.Factors != ch.Factors || again.SFNone != ch.SFNone || !bytes.Equal(again.PubKey, ch.PubKey) {
				t.Fatalf("re-encoded challenge %+v (%v), was %+v", again, err, ch)
			}
		} else if !errors.Is(err, ErrMalformed) {
			t.Fatalf("error %v is not ErrMalformed", err)
		}
		var r Response
		if err := ParseResponse(b, &r); err == nil {
			var again Response
			if err := ParseResponse(AppendResponse(nil, r.PubKey, r.Factor.Etype, r.Factor.Cipher), &again); err != nil || !bytes.Equal(again.PubKey, r.PubKey) || !bytes.Equal(again.Factor.Cipher, r.Factor.Cipher) {
				t.Fatalf("re-encoded response %+v (%v), was %+v", again, err, r)
			}
		}
		if g, err := ParseSupport(nil, b); err == nil {
			if g2, err := ParseSupport(nil, AppendSupport(nil, g...)); err != nil || len(g2) != len(g) {
				t.Fatalf("re-encoded support %v (%v), was %v", g2, err, g)
			}
		}
		_, _, _ = ParseSecondFactor(b)
		// A challenge that parses goes through the client without panics.
		if ch.Group == GroupEdwards25519 && ch.SFNone {
			var e Exchange
			var rnd [32]byte
			if err := e.Challenge(testKey(t), nil, b, &ch, &rnd); err != nil && !errors.Is(err, ErrPublicKey) {
				t.Fatal(err)
			}
		}
	})
}

var fuzzKey *Key

func testKey(t testing.TB) *Key {
	if fuzzKey == nil {
		k, err := NewKey(EtypeAES256SHA1, make([]byte, 32), GroupEdwards25519)
		if err != nil {
			t.Fatal(err)
		}
		fuzzKey = k
	}
	return fuzzKey
}
