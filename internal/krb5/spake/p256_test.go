package spake

import (
	"bytes"
	"math/big"
	"testing"
)

// The draft's P-256 vector (aes256-cts-hmac-sha1-96), from MIT's t_vectors.c.
func TestP256Vector(t *testing.T) {
	v := struct{ ikey, w, x, y, T, S, K, support, challenge, thash, k0, k1, k2, k3 string }{
		ikey:      "01B897121D933AB44B47EB5494DB15E50EB74530DBDAE9B634D65020FF5D88C1",
		w:         "EB2984AF18703F94DD5288B8596CD36988D0D4E83BFB2B44DE14D0E95E2090BD",
		x:         "935DDD725129FB7C6288E1A5CC45782198A6416D1775336D71EACD0549A3E80E",
		y:         "E07405EB215663ABC1F254B8ADC0DA7A16FEBAA011AF923D79FDEF7C42930B33",
		T:         "024F62078CEB53840D02612195494D0D0D88DE21FEEB81187C71CBF3D01E71788D",
		S:         "021D07DC31266FC7CFD904CE2632111A169B7EC730E5F74A7E79700F86638E13C8",
		K:         "0268489D7A9983F2FDE69C6E6A1307E9D252259264F5F2DFC32F58CCA19671E79B",
		support:   "A0093007A0053003020102",
		challenge: "A1373035A003020102A1230421024F62078CEB53840D02612195494D0D0D88DE21FEEB81187C71CBF3D01E71788DA20930073005A003020101",
		thash:     "20AD3C1A9A90FC037D1963A1C4BFB15AB4484D7B6CF07B12D24984F14652DE60",
		k0:        "7D3B906F7BE49932DB22CD3463F032D06C9C078BE4B1D076D201FC6E61EF531E",
		k1:        "17D74E36F8993841FBB7FEB12FA4F011243D3AE4D2ACE55B39379294BBC4DB2C",
		k2:        "D192C9044081A2AA6A97A6C69E2724E8E5671C2C9CE073DD439CDBAF96D7DAB0",
		k3:        "41E5BAD6B67F12C53CE0E2720DD6A9887F877BF9463C2D5209C74C36F8D776B7",
	}
	key, err := NewKey(EtypeAES256SHA1, unh(t, v.ikey), GroupP256)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(key.WBytes(), unh(t, v.w)) {
		t.Fatalf("w = %X", key.WBytes())
	}
	// The KDC's side: T = x·G + w·M, K = x·(S − w·N).
	var T, K [p256ElemLen]byte
	if err := p256Compute(key.p256, new(big.Int).SetBytes(unh(t, v.x)), &key.p256.wM, &key.p256.wN, unh(t, v.S), &T, &K); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(T[:], unh(t, v.T)) || !bytes.Equal(K[:], unh(t, v.K)) {
		t.Fatalf("KDC T = %X K = %X", T, K)
	}
	if got := AppendSupport(nil, GroupP256); !bytes.Equal(got, unh(t, v.support)) {
		t.Fatalf("support %X", got)
	}
	msg := AppendChallenge(nil, GroupP256, T[:], FactorNone)
	if !bytes.Equal(msg, unh(t, v.challenge)) {
		t.Fatalf("challenge %X", msg)
	}
	var ch Challenge
	if err := ParseChallenge(msg, &ch); err != nil {
		t.Fatal(err)
	}
	// The client's side with the vector's y through Challenge (y < n, so
	// the reduction keeps it).
	var e Exchange
	var rnd [32]byte
	copy(rnd[:], unh(t, v.y))
	if err := e.Challenge(key, unh(t, v.support), msg, &ch, &rnd); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, want string
		got        []byte
	}{{"S", v.S, e.Public()}, {"K", v.K, e.Shared()}, {"thash", v.thash, e.Transcript()}} {
		if !bytes.Equal(c.got, unh(t, c.want)) {
			t.Fatalf("%s = %X, want %s", c.name, c.got, c.want)
		}
	}
	for n, want := range []string{v.k0, v.k1, v.k2, v.k3} {
		got, err := e.DeriveKey(nil, unh(t, bodyPrefix+"12"), uint32(n))
		if err != nil || !bytes.Equal(got, unh(t, want)) {
			t.Fatalf("K'[%d] = %X (%v), want %s", n, got, err, want)
		}
	}
	// A point not on the curve is refused.
	bad := append([]byte{0x02}, bytes.Repeat([]byte{0xff}, 32)...)
	if err := p256Compute(key.p256, big.NewInt(5), &key.p256.wN, &key.p256.wM, bad, &T, &K); err == nil {
		t.Error("accepted an x beyond the field")
	}
}
