package krb5

import (
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkLoginFlight is the user-space work of one encrypted-timestamp
// login in flight, as the batched load does it (loadgen.batchedLoad): the
// first AS-REQ, the PREAUTH_REQUIRED read, the AS-REQ with
// PA-ENC-TIMESTAMP, the AS-REP opened (MIT krb5kdc's captured replies,
// etype 20, crypto included; the AS-REP's nonce is the captured one).
func BenchmarkLoginFlight(b *testing.B) {
	c := fuzzClient(b)
	c.creds.checked = time.Now().Add(time.Hour) // "(precomputed)" is no file to stat
	preauth := readSeed(b, filepath.Join("testdata", "fuzz", "FuzzASReply", "ok-preauth-required-20"))[4:]
	asRep := readSeed(b, filepath.Join("testdata", "fuzz", "FuzzASReply", "ok-as-rep-20"))[4:]
	buf := make([]byte, 0, 2048)
	b.ReportAllocs()
	for b.Loop() {
		var f LoginFlight
		var err error
		if buf, err = c.EncodeLoginFirst(buf[:0], &f); err != nil {
			b.Fatal(err)
		}
		if k, err := c.ReadLoginReply(preauth); err != nil || k != ReplyPreauthRequired {
			b.Fatal(k, err)
		}
		if buf, err = c.EncodeLoginNext(buf[:0], &f); err != nil {
			b.Fatal(err)
		}
		if _, err := c.OpenLoginFlight(asRep, &f); err != nil {
			b.Fatal(err)
		}
	}
}
