package krb5

import (
	"bytes"
	"testing"
	"time"

	"github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/iana/msgtype"
	"github.com/jcmturner/gokrb5/v8/iana/nametype"
	"github.com/jcmturner/gokrb5/v8/iana/patype"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/types"
)

const testPassword = "correct-horse-battery-staple"

func mustPrincipal(t testing.TB, s string) Principal {
	t.Helper()
	p, err := ParsePrincipal(s, "PERF.TEST")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// offlineClient is a Client that is never connected: encoding and reply
// handling only.
func offlineClient(t testing.TB, etypes []int32) *Client {
	t.Helper()
	p := mustPrincipal(t, "user0001@PERF.TEST")
	c, err := NewClient(Options{KDC: "127.0.0.1:9", Client: p, Credentials: NewPasswordCredentials(testPassword, p), Etypes: etypes})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The AS-REQ the engine builds must decode with gokrb5 into exactly what was
// meant, and its PA-ENC-TIMESTAMP must decrypt with gokrb5.
func TestASReqDecodesWithGokrb5(t *testing.T) {
	for _, et := range supportedEtypes {
		c := offlineClient(t, []int32{et.id, 17})
		now := time.Date(2025, 11, 30, 6, 12, 34, 567891000, time.UTC)
		for _, pre := range []bool{false, true} {
			c.asNonce = c.patch(&c.asBody, now)
			var choice *preauthChoice
			if pre {
				choice = &preauthChoice{etype: et.id}
			}
			if err := c.buildASReq(choice, now); err != nil {
				t.Fatal(err)
			}
			var req messages.ASReq
			if err := req.Unmarshal(bytes.Clone(c.w.Bytes())); err != nil {
				t.Fatalf("%s: gokrb5 cannot decode our AS-REQ: %v", et.name, err)
			}
			b := req.ReqBody
			switch {
			case req.PVNO != 5 || req.MsgType != msgtype.KRB_AS_REQ:
				t.Fatalf("pvno/msg-type %d/%d", req.PVNO, req.MsgType)
			case b.CName.PrincipalNameString() != "user0001" || b.CName.NameType != nametype.KRB_NT_PRINCIPAL:
				t.Fatalf("cname %+v", b.CName)
			case b.Realm != "PERF.TEST" || b.SName.PrincipalNameString() != "krbtgt/PERF.TEST" || b.SName.NameType != nametype.KRB_NT_SRV_INST:
				t.Fatalf("realm/sname %s %+v", b.Realm, b.SName)
			case int64(b.Nonce) != c.asNonce:
				t.Fatalf("nonce %d, want %d", b.Nonce, c.asNonce)
			case !b.Till.Equal(now.Add(10 * time.Hour).Truncate(time.Second)):
				t.Fatalf("till %v", b.Till)
			case len(b.EType) != 2 || b.EType[0] != et.id || b.EType[1] != 17:
				t.Fatalf("etypes %v", b.EType)
			}
			if !pre {
				if len(req.PAData) != 0 {
					t.Fatalf("padata without preauth: %v", req.PAData)
				}
				continue
			}
			if len(req.PAData) != 1 || req.PAData[0].PADataType != patype.PA_ENC_TIMESTAMP {
				t.Fatalf("padata %+v", req.PAData)
			}
			var ed types.EncryptedData
			if err := ed.Unmarshal(req.PAData[0].PADataValue); err != nil {
				t.Fatal(err)
			}
			key, _, err := c.creds.keyFor(et.id, 0, "", "")
			if err != nil {
				t.Fatal(err)
			}
			pt, err := crypto.DecryptEncPart(ed, types.EncryptionKey{KeyType: et.id, KeyValue: key.key}, keyusage.AS_REQ_PA_ENC_TIMESTAMP)
			if err != nil {
				t.Fatalf("%s: gokrb5 cannot decrypt PA-ENC-TIMESTAMP: %v", et.name, err)
			}
			var ts types.PAEncTSEnc
			if err := ts.Unmarshal(pt); err != nil {
				t.Fatal(err)
			}
			if !ts.PATimestamp.Equal(now.Truncate(time.Second)) || ts.PAUSec != 567891 {
				t.Fatalf("timestamp %v usec %d", ts.PATimestamp, ts.PAUSec)
			}
		}
	}
}

// testTicket is a Ticket as a KDC would send it (contents opaque to the client).
func testTicket(t testing.TB, etype int32) []byte {
	t.Helper()
	tkt := messages.Ticket{
		TktVNO: 5, Realm: "PERF.TEST",
		SName:   types.PrincipalName{NameType: nametype.KRB_NT_SRV_INST, NameString: []string{"krbtgt", "PERF.TEST"}},
		EncPart: types.EncryptedData{EType: etype, KVNO: 1, Cipher: bytes.Repeat([]byte{0xab}, 200)},
	}
	b, err := tkt.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// giveTGT installs a TGT with a random session key of the enctype.
func giveTGT(t testing.TB, c *Client, et *etypeInfo) []byte {
	t.Helper()
	key := randomKey(t, et)
	c.tgt = tgtState{ok: true, ticket: testTicket(t, et.id), keyType: et.id, key: key,
		renewAt: time.Now().Add(time.Hour), expires: time.Now().Add(2 * time.Hour)}
	return key
}

// The TGS-REQ must decode with gokrb5, carry the TGT verbatim, and its
// authenticator must decrypt with gokrb5 and hold a checksum over the exact
// request body that gokrb5 verifies.
func TestTGSReqDecodesWithGokrb5(t *testing.T) {
	for _, et := range supportedEtypes {
		c := offlineClient(t, nil)
		key := giveTGT(t, c, et)
		if err := c.tgt.schedules(); err != nil {
			t.Fatal(err)
		}
		svc := c.PrepareService(mustPrincipal(t, "HTTP/web0001.perf.test"))
		now := time.Date(2025, 11, 30, 6, 12, 34, 1000, time.UTC)
		nonce := c.patch(&svc.body, now)
		if err := c.buildTGSReq(svc, now); err != nil {
			t.Fatal(err)
		}
		var req messages.TGSReq
		if err := req.Unmarshal(bytes.Clone(c.w.Bytes())); err != nil {
			t.Fatalf("%s: gokrb5 cannot decode our TGS-REQ: %v", et.name, err)
		}
		b := req.ReqBody
		if req.MsgType != msgtype.KRB_TGS_REQ || b.SName.PrincipalNameString() != "HTTP/web0001.perf.test" ||
			b.Realm != "PERF.TEST" || int64(b.Nonce) != nonce || len(b.CName.NameString) != 0 {
			t.Fatalf("%s: body %+v", et.name, b)
		}
		if len(req.PAData) != 1 || req.PAData[0].PADataType != patype.PA_TGS_REQ {
			t.Fatalf("padata %+v", req.PAData)
		}
		var ap messages.APReq
		if err := ap.Unmarshal(req.PAData[0].PADataValue); err != nil {
			t.Fatal(err)
		}
		tb, _ := ap.Ticket.Marshal()
		if !bytes.Equal(tb, c.tgt.ticket) {
			t.Fatalf("ticket not sent verbatim")
		}
		if err := ap.DecryptAuthenticator(types.EncryptionKey{KeyType: et.id, KeyValue: key}); err != nil {
			t.Fatalf("%s: %v", et.name, err)
		}
		a := ap.Authenticator
		if a.AVNO != 5 || a.CRealm != "PERF.TEST" || a.CName.PrincipalNameString() != "user0001" ||
			!a.CTime.Equal(now.Truncate(time.Second)) || a.Cusec != 1 {
			t.Fatalf("authenticator %+v", a)
		}
		if a.Cksum.CksumType != et.cksum {
			t.Fatalf("checksum type %d, want %d", a.Cksum.CksumType, et.cksum)
		}
		if !et.gk.VerifyChecksum(key, svc.body.body, a.Cksum.Checksum, keyusage.TGS_REQ_PA_TGS_REQ_AP_REQ_AUTHENTICATOR_CHKSUM) {
			t.Fatalf("%s: gokrb5 rejects the body checksum", et.name)
		}
	}
}

func TestParsePrincipal(t *testing.T) {
	for in, want := range map[string]string{
		"user":                       "user@DEF",
		"user@R.X":                   "user@R.X",
		"HTTP/web.example.com":       "HTTP/web.example.com@DEF",
		"host/a.b@R":                 "host/a.b@R",
		"krbtgt/PERF.TEST@PERF.TEST": "krbtgt/PERF.TEST@PERF.TEST",
	} {
		p, err := ParsePrincipal(in, "DEF")
		if err != nil || p.String() != want {
			t.Errorf("ParsePrincipal(%q) = %v, %v; want %s", in, p, err, want)
		}
	}
	for _, bad := range []string{"", "@R", "a//b", "/a", "a\\b@R", "a@"} {
		if _, err := ParsePrincipal(bad, "DEF"); err == nil && bad != "a@" {
			t.Errorf("ParsePrincipal(%q) accepted", bad)
		}
	}
	if _, err := ParsePrincipal("a@", ""); err == nil {
		t.Error("principal without realm accepted")
	}
}

func TestKDCAddress(t *testing.T) {
	for in, want := range map[string]string{
		"kdc.example.com":     "kdc.example.com:88",
		"kdc.example.com:750": "kdc.example.com:750",
		"127.0.0.1":           "127.0.0.1:88",
		"::1":                 "[::1]:88",
		"[::1]":               "[::1]:88",
		"[2001:db8::1]:8888":  "[2001:db8::1]:8888",
		"192.0.2.1:88":        "192.0.2.1:88",
	} {
		got, err := KDCAddress(in)
		if err != nil || got != want {
			t.Errorf("KDCAddress(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", ":88", "a b", "host:"} {
		if got, err := KDCAddress(bad); err == nil {
			t.Errorf("KDCAddress(%q) = %q, accepted", bad, got)
		}
	}
}
