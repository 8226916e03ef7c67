package spake

import (
	"bytes"
	"encoding/hex"
	"strings"
	"testing"
)

// The edwards25519 vectors of draft-ietf-kitten-krb-spake-preauth appendix
// B, as MIT's src/plugins/preauth/spake/t_vectors.c carries them (the DES3
// and RC4 ones left out: only AES enctypes are supported here).
var vectors = []struct {
	name                            string
	etype                           int32
	ikey, w, x, y, T, S, K          string
	support, challenge, thash, body string
	k0, k1, k2, k3                  string
}{
	{
		name: "aes128-cts-hmac-sha1-96", etype: EtypeAES128SHA1,
		ikey:      "FCA822951813FB252154C883F5EE1CF4",
		w:         "0D591B197B667E083C2F5F98AC891D3C9F99E710E464E62F1FB7C9B67936F3EB",
		x:         "50BE049A5A570FA1459FB9F666E6FD80602E4E87790A0E567F12438A2C96C138",
		y:         "B877AFE8612B406D96BE85BD9F19D423E95BE96C0E1E0B5824127195C3ED5917",
		T:         "9E9311D985C1355E022D7C3C694AD8D6F7AD6D647B68A90B0FE46992818002DA",
		S:         "FBE08F7F96CD5D4139E7C9ECCB95E79B8ACE41E270A60198C007DF18525B628E",
		K:         "C2F7F99997C585E6B686CEB62DB42F17CC70932DEF3BB4CF009E36F22EA5473D",
		support:   "A0093007A0053003020101",
		challenge: "A1363034A003020101A12204209E9311D985C1355E022D7C3C694AD8D6F7AD6D647B68A90B0FE46992818002DAA20930073005A003020101",
		thash:     "951285F107C87F0169B9C918A1F51F60CB1A75B9F8BB799A99F53D03ADD94B5F",
		body:      bodyPrefix + "11",
		k0:        "548022D58A7C47EAE8C49DCCF6BAA407",
		k1:        "B2C9BA0E13FC8AB3A9D96B51B601CF4A",
		k2:        "69F0EE5FDB6C237E7FCD38D9F87DF1BD",
		k3:        "78F91E2240B5EE528A5CC8D7CBEBFBA5",
	},
	{
		name: "aes256-cts-hmac-sha1-96", etype: EtypeAES256SHA1,
		ikey:      "01B897121D933AB44B47EB5494DB15E50EB74530DBDAE9B634D65020FF5D88C1",
		w:         "E902341590A1B4BB4D606A1C643CCCB3F2108F1B6AA97B381012B9400C9E3F4E",
		x:         "88C6C0A4F0241EF217C9788F02C32D00B72E4310748CD8FB5F94717607E6417D",
		y:         "88B859DF58EF5C69BACDFE681C582754EAAB09A74DC29CFF50B328613C232F55",
		T:         "6F301AACAE1220E91BE42868C163C5009AEEA1E9D9E28AFCFC339CDA5E7105B5",
		S:         "9E2CC32908FC46273279EC75354B4AEAFA70C3D99A4D507175ED70D80B255DDA",
		K:         "CF57F58F6E60169D2ECC8F20BB923A8E4C16E5BC95B9E64B5DC870DA7026321B",
		support:   "A0093007A0053003020101",
		challenge: "A1363034A003020101A12204206F301AACAE1220E91BE42868C163C5009AEEA1E9D9E28AFCFC339CDA5E7105B5A20930073005A003020101",
		thash:     "1C605649D4658B58CBE79A5FAF227ACC16C355C58B7DADE022F90C158FE5ED8E",
		body:      bodyPrefix + "12",
		k0:        "A9BFA71C95C575756F922871524B65288B3F695573CCC0633E87449568210C23",
		k1:        "1865A9EE1EF0640EC28AC007391CAC624C42639C714767A974E99AA10003015F",
		k2:        "E57781513FEFDB978E374E156B0DA0C1A08148F5EB26B8E157AC3C077E28BF49",
		k3:        "008E6487293C3CC9FABBBCDD8B392D6DCB88222317FD7FE52D12FBC44FA047F1",
	},
	{
		// A successful optimistic challenge: no support message in the transcript.
		name: "aes256-cts-hmac-sha1-96 optimistic", etype: EtypeAES256SHA1,
		ikey:      "01B897121D933AB44B47EB5494DB15E50EB74530DBDAE9B634D65020FF5D88C1",
		w:         "E902341590A1B4BB4D606A1C643CCCB3F2108F1B6AA97B381012B9400C9E3F4E",
		x:         "70937207344CAFBC53C8A55070E399C584CBAFCE00B836980DD4E7E74FAD2A64",
		y:         "785D6801A2490DF028903AC6449B105F2FF0DB895B252953CDC2076649526103",
		T:         "83523B35F1565006CBFC4F159885467C2FB9BC6FE23D36CB1DA43D199F1A3118",
		S:         "2A8F70F46CEE9030700037B77F22CEC7970DCC238E3E066D9D726BAF183992C6",
		K:         "D3C5E4266AA6D1B2873A97CE8AF91C7E4D7A7AC456ACCED7908D34C561AD8FA6",
		challenge: "A1363034A003020101A122042083523B35F1565006CBFC4F159885467C2FB9BC6FE23D36CB1DA43D199F1A3118A20930073005A003020101",
		thash:     "26F07F9F8965307434D11EA855461D41E0CBABCC0A1BAB48ECEE0C6C1A4292B7",
		body:      bodyPrefix + "12",
		k0:        "4569EC08B5DE5C3CC19D941725913ACE8D74524B521A341DC746ACD5C3784D92",
		k1:        "0D96CE1A4AC0F2E280A0CFC31742B06461D83D04AE45433DB2D80478DD882A4C",
		k2:        "58018C19315A1BA5D5BB9813B58029F0AEC18A6F9CA59E0847DE1C60BC25945C",
		k3:        "ED7E9BFFD68C54D86FB19CD3C03F317F88A71AD9A5E94C28581D93FC4EC72B6A",
	},
}

// bodyPrefix is the vectors' KDC-REQ-BODY up to the last octet, the enctype.
const bodyPrefix = "3075A00703050000000000A1143012A003020101A10B30091B077261656275726E" +
	"A2101B0E415448454E412E4D49542E454455A3233021A003020102A11A30181B066B72627467741B0E415448454E412E4D49542E454455" +
	"A511180F31393730303130313030303030305AA7030201" + "00A80530030201"

func unh(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// shr3 divides a little-endian integer by 8: the vectors' x and y are MIT's
// private multipliers, which are the random scalar times the cofactor.
func shr3(b []byte) []byte {
	out := make([]byte, len(b))
	for i := range b {
		out[i] = b[i] >> 3
		if i+1 < len(b) {
			out[i] |= b[i+1] << 5
		}
	}
	return out
}

func TestVectors(t *testing.T) {
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			if unh(t, v.x)[0]&7 != 0 || unh(t, v.y)[0]&7 != 0 {
				t.Fatal("vector x or y is not a multiple of the cofactor")
			}
			key, err := NewKey(v.etype, unh(t, v.ikey), GroupEdwards25519)
			if err != nil {
				t.Fatal(err)
			}
			if got := key.WBytes(); !bytes.Equal(got, unh(t, v.w)) {
				t.Fatalf("w = %X, want %s", got, v.w)
			}

			// The KDC's side: T = x·G + w·M and K = x·(S − w·N).
			var xr Exchange
			scalarFrom32(&xr.y, shr3(unh(t, v.x)))
			var T, K [32]byte
			keygen(&T, &xr.y, &key.wM)
			if !bytes.Equal(T[:], unh(t, v.T)) {
				t.Fatalf("T = %X, want %s", T, v.T)
			}
			if err := result(&K, &xr.y, &key.wN, unh(t, v.S)); err != nil || !bytes.Equal(K[:], unh(t, v.K)) {
				t.Fatalf("KDC K = %X (%v), want %s", K, err, v.K)
			}

			// The message encodings.
			var support []byte
			if v.support != "" {
				support = AppendSupport(nil, GroupEdwards25519)
				if !bytes.Equal(support, unh(t, v.support)) {
					t.Fatalf("support = %X, want %s", support, v.support)
				}
			}
			msg := AppendChallenge(nil, GroupEdwards25519, T[:], FactorNone)
			if !bytes.Equal(msg, unh(t, v.challenge)) {
				t.Fatalf("challenge = %X, want %s", msg, v.challenge)
			}
			var ch Challenge
			if err := ParseChallenge(unh(t, v.challenge), &ch); err != nil {
				t.Fatal(err)
			}
			if ch.Group != GroupEdwards25519 || !bytes.Equal(ch.PubKey, T[:]) || !ch.SFNone || ch.Factors != 1 {
				t.Fatalf("parsed challenge %+v", ch)
			}

			// The client's side with the vector's y.
			var e Exchange
			e.key = key
			scalarFrom32(&e.y, shr3(unh(t, v.y)))
			if err := e.finish(support, msg, ch.PubKey); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name, want string
				got        []byte
			}{
				{"S", v.S, e.Public()}, {"K", v.K, e.Shared()}, {"thash", v.thash, e.Transcript()},
			} {
				if !bytes.Equal(c.got, unh(t, c.want)) {
					t.Fatalf("%s = %X, want %s", c.name, c.got, c.want)
				}
			}
			for n, want := range []string{v.k0, v.k1, v.k2, v.k3} {
				got, err := e.DeriveKey(nil, unh(t, v.body), uint32(n))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, unh(t, want)) {
					t.Fatalf("K'[%d] = %X, want %s", n, got, want)
				}
			}
		})
	}
}

// TestPreparedKeyReused: a Key prepared once and reused for several logins
// (as a Client caches it per long-term key) gives the same messages and
// K'[n] as a Key prepared afresh for each login, and both give the
// vectors'; a Key of another long-term key (a new kvno) gives other ones.
func TestPreparedKeyReused(t *testing.T) {
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			cached, err := NewKey(v.etype, unh(t, v.ikey), GroupEdwards25519)
			if err != nil {
				t.Fatal(err)
			}
			var support []byte
			if v.support != "" {
				support = unh(t, v.support)
			}
			msg := unh(t, v.challenge)
			var ch Challenge
			if err := ParseChallenge(msg, &ch); err != nil {
				t.Fatal(err)
			}
			login := func(key *Key) []byte {
				var e Exchange
				rnd := [32]byte(shr3(unh(t, v.y)))
				if err := e.Challenge(key, support, msg, &ch, &rnd); err != nil {
					t.Fatal(err)
				}
				out := append(append(append([]byte(nil), e.Public()...), e.Shared()...), e.Transcript()...)
				for n := range 4 {
					if out, err = e.DeriveKey(out, unh(t, v.body), uint32(n)); err != nil {
						t.Fatal(err)
					}
				}
				return out
			}
			want := unh(t, v.S+v.K+v.thash+v.k0+v.k1+v.k2+v.k3)
			for i := range 3 {
				fresh, err := NewKey(v.etype, unh(t, v.ikey), GroupEdwards25519)
				if err != nil {
					t.Fatal(err)
				}
				if got := login(cached); !bytes.Equal(got, want) {
					t.Fatalf("login %d with the cached key: %X, want %X", i, got, want)
				}
				if got := login(fresh); !bytes.Equal(got, want) {
					t.Fatalf("login %d with a fresh key: %X, want %X", i, got, want)
				}
			}
			other := unh(t, v.ikey)
			other[0] ^= 1
			newer, err := NewKey(v.etype, other, GroupEdwards25519)
			if err != nil {
				t.Fatal(err)
			}
			if got := login(newer); bytes.Equal(got[:elemLen], want[:elemLen]) || bytes.Equal(got[elemLen:2*elemLen], want[elemLen:2*elemLen]) {
				t.Fatalf("another key gives the same S or K")
			}
		})
	}
}
