package krb5

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"testing"
)

// TestFlightPreauthRemembered: ReadLoginReply remembers its choice for a
// PREAUTH_REQUIRED whose e-data is the last one's, byte for byte, with the
// same keys (the method is still picked from each); the choice is the one choosePreauth makes afresh, and an
// e-data that differs (another salt) or keys that changed are read again.
func TestFlightPreauthRemembered(t *testing.T) {
	c := fuzzClient(t)
	preauth := readSeed(t, filepath.Join("testdata", "fuzz", "FuzzASReply", "ok-preauth-required-20"))[4:]
	fresh := func(reply []byte) preauthChoice {
		t.Helper()
		f := fuzzClient(t)
		if err := parseKRBError(reply, &f.kerr); err != nil {
			t.Fatal(err)
		}
		ch, err := f.choosePreauth(PhasePreauthRequired)
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	read := func(reply []byte) preauthChoice {
		t.Helper()
		c.choice = preauthChoice{}
		if k, err := c.ReadLoginReply(reply); err != nil || k != ReplyPreauthRequired {
			t.Fatalf("ReadLoginReply: %v %v", k, err)
		}
		// The method is picked from each reply (the KDC offers SPAKE,
		// the Client's mode is auto), not remembered.
		ch := c.choice
		if ch.spake != spakeSupport {
			t.Fatalf("choice %+v: SPAKE support not picked", ch)
		}
		ch.spake = spakeOff
		return ch
	}
	want := fresh(preauth)
	if want.etype != 20 || want.salt != "PERF.TESTfuzzuser" {
		t.Fatalf("fresh choice %+v", want)
	}
	for i := range 3 {
		if got := read(preauth); got != want {
			t.Fatalf("read %d: choice %+v, want %+v", i, got, want)
		}
	}
	// Another salt in the ETYPE-INFO2: the new one, not the remembered.
	other := bytes.Replace(preauth, []byte("PERF.TESTfuzzuser"), []byte("PERF.TESTfuzzusex"), 1)
	if bytes.Equal(other, preauth) {
		t.Fatal("the seed holds no salt to change")
	}
	if got, want := read(other), fresh(other); got != want || got.salt != "PERF.TESTfuzzusex" {
		t.Fatalf("changed salt: choice %+v, want %+v", got, want)
	}
	if got := read(preauth); got != want {
		t.Fatalf("back to the first e-data: choice %+v, want %+v", got, want)
	}
	// The keys change (a keytab re-read without the etype 20 key, the
	// only one this KDC offers): the same e-data now finds no key.
	c.creds.mu.Lock()
	var keep []ltKey
	for _, k := range c.creds.keys {
		if k.etype != 20 {
			keep = append(keep, k)
		}
	}
	c.creds.keys = keep
	c.creds.generation++
	c.creds.mu.Unlock()
	if _, err := c.ReadLoginReply(preauth); Classify(err) != ClassKeytab {
		t.Fatalf("after the keys changed: %v (choice %+v), want a keytab error", err, c.choice)
	}
}

// TestOpenLoginFlightChecks: the AS-REP a login in flight opens gives the
// nonce inside its encrypted part (the captured request's), and one not
// made with the Client's key fails the integrity check: one bit of the
// ciphertext flipped, or the same reply to a Client whose key differs.
func TestOpenLoginFlightChecks(t *testing.T) {
	in := readSeed(t, filepath.Join("testdata", "fuzz", "FuzzASReply", "ok-as-rep-20"))
	nonce, asRep := int64(binary.BigEndian.Uint32(in)), in[4:]
	preauth := readSeed(t, filepath.Join("testdata", "fuzz", "FuzzASReply", "ok-preauth-required-20"))[4:]
	open := func(c *Client, reply []byte) (int64, error) {
		t.Helper()
		if _, err := c.ReadLoginReply(preauth); err != nil {
			t.Fatal(err)
		}
		f := LoginFlight{Stage: StageTimestamp}
		return c.OpenLoginFlight(reply, &f)
	}
	c := fuzzClient(t)
	if got, err := open(c, asRep); err != nil || got != nonce {
		t.Fatalf("captured AS-REP: nonce %d, %v; want %d", got, err, nonce)
	}
	bad := bytes.Clone(asRep)
	bad[len(bad)-20] ^= 1 // inside the enc-part's cipher (the HMAC's)
	if _, err := open(c, bad); Classify(err) != ClassDecrypt {
		t.Fatalf("flipped bit: %v, want %s", err, ClassDecrypt)
	}
	other := fuzzClient(t)
	for i, k := range other.creds.keys {
		k.key = bytes.Clone(k.key)
		k.key[0] ^= 0xff
		other.creds.keys[i] = k
	}
	if _, err := open(other, asRep); Classify(err) != ClassDecrypt {
		t.Fatalf("another key: %v, want %s", err, ClassDecrypt)
	}
}
