package krb5

import (
	"testing"
	"time"

	"github.com/jcmturner/gokrb5/v8/iana/etypeID"
)

// Failures caused by what the KDC sent are malformed_reply, never keytab:
// the keytab alarm must point at the client's own files.
func TestKDCDataErrorsAreMalformedReply(t *testing.T) {
	p := mustPrincipal(t, "pwuser@PERF.TEST")
	c, err := NewClient(Options{KDC: "127.0.0.1:9", Client: p, Credentials: NewPasswordCredentials("secret", p)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// String-to-key parameters that do not parse.
	err = c.buildASReq(&preauthChoice{etype: etypeID.AES256_CTS_HMAC_SHA1_96, s2kparams: "zz"}, time.Now())
	wantClass(t, err, ClassMalformedReply)

	// A TGT whose session key has the wrong length for its enctype.
	now := time.Now()
	for _, key := range [][]byte{nil, make([]byte, 5), make([]byte, 16)} {
		c.tgt.set(&kdcRep{ticket: testTicket(t, 18)},
			&encRepPart{keyType: etypeID.AES256_CTS_HMAC_SHA1_96, key: key, authtime: now, endtime: now.Add(time.Hour)}, now)
		if c.tgt.ok || c.HasTGT() {
			t.Errorf("TGT with a %d-byte aes256 session key accepted", len(key))
		}
	}
	c.tgt.set(&kdcRep{ticket: testTicket(t, 18)},
		&encRepPart{keyType: etypeID.AES256_CTS_HMAC_SHA1_96, key: make([]byte, 32), authtime: now, endtime: now.Add(time.Hour)}, now)
	if !c.tgt.ok {
		t.Error("TGT with a 32-byte aes256 session key rejected")
	}
	// A session key whose schedules cannot be derived.
	c.tgt = tgtState{ok: true, ticket: testTicket(t, 18), keyType: etypeID.AES256_CTS_HMAC_SHA1_96, key: make([]byte, 5),
		renewAt: now.Add(time.Hour), expires: now.Add(2 * time.Hour)}
	var res TGSResult
	err = c.serviceTicket(testCtx(t, time.Second), c.PrepareService(mustPrincipal(t, "HTTP/x")), &res)
	wantClass(t, err, ClassMalformedReply)
}

// authtime has whole seconds: the offset taken from it is centred, so two
// clocks in step read within ±0.5 s whatever the fraction of the second.
func TestAuthtimeOffsetCentred(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for ms := 0; ms < 1000; ms += 50 {
		sent := base.Add(time.Duration(ms) * time.Millisecond)
		off := authtimeOffset(sent.Truncate(time.Second), sent, 0)
		if off < -500*time.Millisecond || off > 500*time.Millisecond {
			t.Errorf("sent at +%d ms: offset %v, want within ±0.5 s", ms, off)
		}
	}
}
