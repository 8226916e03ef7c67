package krb5

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/jcmturner/gofork/encoding/asn1"
	"github.com/jcmturner/gokrb5/v8/iana/errorcode"
	"github.com/jcmturner/gokrb5/v8/iana/etypeID"
	"github.com/jcmturner/gokrb5/v8/iana/nametype"
	"github.com/jcmturner/gokrb5/v8/iana/patype"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/types"
)

// preauthRequiredKDC answers every UDP request on loopback with
// KDC_ERR_PREAUTH_REQUIRED announcing the given ETYPE-INFO2 entry: a hostile
// or buggy KDC choosing the client's string-to-key parameters.
func preauthRequiredKDC(t *testing.T, realm string, entry types.ETypeInfo2Entry) string {
	t.Helper()
	info, err := asn1.Marshal(types.ETypeInfo2{entry})
	if err != nil {
		t.Fatal(err)
	}
	edata, err := asn1.Marshal(types.PADataSequence{{PADataType: patype.PA_ETYPE_INFO2, PADataValue: info}})
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 65536)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			ke := messages.NewKRBError(types.NewPrincipalName(nametype.KRB_NT_SRV_INST, "krbtgt/"+realm), realm,
				errorcode.KDC_ERR_PREAUTH_REQUIRED, "")
			ke.EData = edata
			b, err := ke.Marshal()
			if err != nil {
				return
			}
			pc.WriteTo(b, from)
		}
	}()
	return pc.LocalAddr().String()
}

// A KDC asking for 2^32-1 PBKDF2 iterations must not keep a password probe
// busy for hours (nor, through the loop's stop, the reloads waiting for it).
func TestHostileS2KParams(t *testing.T) {
	p := mustPrincipal(t, "pwuser@PERF.TEST")
	creds := NewPasswordCredentials("secret", p)
	for _, params := range [][]byte{{0xff, 0xff, 0xff, 0xff}, {0, 0, 0, 0}, {1, 0, 0, 0, 0}, {}} {
		t.Run(fmt.Sprintf("%x", params), func(t *testing.T) {
			addr := preauthRequiredKDC(t, p.Realm, types.ETypeInfo2Entry{EType: etypeID.AES256_CTS_HMAC_SHA1_96, Salt: "PERF.TESTpwuser", S2KParams: params})
			c, err := NewClient(Options{KDC: addr, Client: p, Credentials: creds, Etypes: []int32{etypeID.AES256_CTS_HMAC_SHA1_96}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			done := make(chan error, 1)
			go func() {
				_, err := c.Login(testCtx(t, 5*time.Second))
				done <- err
			}()
			select {
			case err := <-done:
				wantClass(t, err, ClassMalformedReply)
			case <-time.After(time.Minute):
				// Not a performance assertion: without the check the
				// login would run for hours.
				t.Fatal("login still deriving keys a minute after its 5s timeout")
			}
		})
	}
	if n := len(creds.s2k); n != 0 {
		t.Errorf("%d string-to-key results for rejected parameters", n)
	}
}

func TestCheckS2KParams(t *testing.T) {
	for _, tc := range []struct {
		etype  int32
		params []byte
		ok     bool
	}{
		{etypeID.AES256_CTS_HMAC_SHA1_96, []byte{0, 0, 0x10, 0}, true},     // 4096, the default
		{etypeID.AES128_CTS_HMAC_SHA1_96, []byte{0, 1, 0, 0}, true},        // 65536
		{etypeID.AES256_CTS_HMAC_SHA1_96, []byte{1, 0, 0, 0}, true},        // 2^24
		{etypeID.AES256_CTS_HMAC_SHA1_96, []byte{1, 0, 0, 1}, false},       // above the cap
		{etypeID.AES256_CTS_HMAC_SHA1_96, []byte{0, 0, 0x0f, 0xff}, false}, // below the default
		{etypeID.AES256_CTS_HMAC_SHA1_96, []byte{0, 0, 0, 0}, false},       // RFC 3962: 2^32
		{etypeID.AES256_CTS_HMAC_SHA384_192, []byte{0, 0, 0x80, 0}, true},  // 32768, the default
		{etypeID.AES256_CTS_HMAC_SHA384_192, []byte{0, 0, 0x10, 0}, false}, // below the default
		{etypeID.AES256_CTS_HMAC_SHA1_96, []byte{0, 0, 0x10}, false},       // short
		{etypeID.AES256_CTS_HMAC_SHA1_96, []byte{0, 0, 0, 0x10, 0}, false}, // long
		{etypeID.AES256_CTS_HMAC_SHA1_96, nil, false},                      // empty
		{23, []byte{0, 0, 0x10, 0}, false},                                 // rc4
	} {
		if err := checkS2KParams(tc.etype, tc.params); (err == nil) != tc.ok {
			t.Errorf("%s %x: %v, want ok=%v", EtypeName(tc.etype), tc.params, err, tc.ok)
		}
	}
}

// The KDC chooses salts: what the credentials keep of them is bounded.
func TestS2KCacheBounded(t *testing.T) {
	p := mustPrincipal(t, "pwuser@PERF.TEST")
	creds := NewPasswordCredentials("secret", p)
	for i := 0; i < 3*maxS2KCache; i++ {
		if _, ok, err := creds.keyFor(etypeID.AES128_CTS_HMAC_SHA1_96, 0, fmt.Sprint("salt", i), ""); !ok || err != nil {
			t.Fatal(ok, err)
		}
		if n := len(creds.s2k); n > maxS2KCache {
			t.Fatalf("%d string-to-key results cached after %d salts", n, i+1)
		}
	}
}
