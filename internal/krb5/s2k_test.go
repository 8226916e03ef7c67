package krb5

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jcmturner/gofork/encoding/asn1"
	"github.com/jcmturner/gokrb5/v8/iana/errorcode"
	"github.com/jcmturner/gokrb5/v8/iana/etypeID"
	"github.com/jcmturner/gokrb5/v8/iana/nametype"
	"github.com/jcmturner/gokrb5/v8/iana/patype"
	"github.com/jcmturner/gokrb5/v8/messages"
	"github.com/jcmturner/gokrb5/v8/types"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
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
	return testutil.UDPServer(t, func([]byte) []byte {
		ke := messages.NewKRBError(types.NewPrincipalName(nametype.KRB_NT_SRV_INST, "krbtgt/"+realm), realm,
			errorcode.KDC_ERR_PREAUTH_REQUIRED, "")
		ke.EData = edata
		b, err := ke.Marshal()
		if err != nil {
			return nil
		}
		return b
	})
}

// A KDC asking for 2^32-1 PBKDF2 iterations must not keep a password probe
// busy for hours (nor, through the loop's stop, the reloads waiting for it).
func TestHostileS2KParams(t *testing.T) {
	p := mustPrincipal(t, "pwuser@PERF.TEST")
	creds := NewPasswordCredentials("secret", p)
	// {1, 0, 0, 0}: 2^24, above the default cap (issue 10 item 2: a fake
	// KDC asking for it cost seconds of CPU per /probe).
	for _, params := range [][]byte{{0xff, 0xff, 0xff, 0xff}, {0, 0, 0, 0}, {1, 0, 0, 0, 0}, {}, {1, 0, 0, 0}, {0, 1, 0, 1}} {
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
		if err := checkS2KParams(tc.etype, tc.params, MaxS2KIterationsLimit); (err == nil) != tc.ok {
			t.Errorf("%s %x: %v, want ok=%v", EtypeName(tc.etype), tc.params, err, tc.ok)
		}
	}
	// The default cap: 65536.
	for params, ok := range map[[4]byte]bool{{0, 1, 0, 0}: true, {0, 1, 0, 1}: false, {1, 0, 0, 0}: false} {
		if err := checkS2KParams(etypeID.AES256_CTS_HMAC_SHA1_96, params[:], DefaultMaxS2KIterations); (err == nil) != ok {
			t.Errorf("default cap, %x: %v, want ok=%v", params, err, ok)
		}
	}
}

// A string-to-key the KDC makes expensive (within the cap) runs under the
// login's deadline: the login ends as a timeout when its context does,
// while the derivation finishes on its own and is kept for the next login.
func TestS2KUnderDeadline(t *testing.T) {
	p := mustPrincipal(t, "pwuser@PERF.TEST")
	creds := NewPasswordCredentials("secret", p)
	const iterations = 1 << 18
	addr := preauthRequiredKDC(t, p.Realm, types.ETypeInfo2Entry{EType: etypeID.AES256_CTS_HMAC_SHA1_96, Salt: "PERF.TESTpwuser", S2KParams: []byte{0, 4, 0, 0}})
	c, err := NewClient(Options{KDC: addr, Client: p, Credentials: creds, Etypes: []int32{etypeID.AES256_CTS_HMAC_SHA1_96}, MaxS2KIterations: iterations})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.Login(ctx)
		done <- err
	}()
	select {
	case err := <-done:
		wantClass(t, err, ClassTimeout)
	case <-time.After(time.Minute):
		t.Fatal("login still waiting for string-to-key a minute after its 50ms deadline")
	}
	testutil.Eventually(t, time.Minute, "the derivation to finish and be cached", func() bool {
		creds.mu.Lock()
		defer creds.mu.Unlock()
		return len(creds.s2k) == 1
	})

	// One derivation at a time per Credentials: while one holds the slot, a
	// login needing another key waits for it only until its deadline.
	other := preauthRequiredKDC(t, p.Realm, types.ETypeInfo2Entry{EType: etypeID.AES256_CTS_HMAC_SHA1_96, Salt: "another salt"})
	c2, err := NewClient(Options{KDC: other, Client: p, Credentials: creds, Etypes: []int32{etypeID.AES256_CTS_HMAC_SHA1_96}})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	creds.s2kSlot <- struct{}{} // a derivation in progress
	ctx2, cancel2 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel2()
	go func() {
		_, err := c2.Login(ctx2)
		done <- err
	}()
	select {
	case err := <-done:
		wantClass(t, err, ClassTimeout)
	case <-time.After(time.Minute):
		t.Fatal("login still waiting for the string-to-key slot a minute after its 50ms deadline")
	}
	<-creds.s2kSlot
	creds.mu.Lock()
	if n := len(creds.s2k); n != 1 {
		t.Errorf("%d keys cached, want 1: the waiting login derived one anyway", n)
	}
	creds.mu.Unlock()

	if _, err := NewClient(Options{KDC: addr, Client: p, Credentials: creds, MaxS2KIterations: MaxS2KIterationsLimit + 1}); err == nil {
		t.Error("a cap above MaxS2KIterationsLimit accepted")
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
