package krb5

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jcmturner/gokrb5/v8/iana/errorcode"
	"github.com/jcmturner/gokrb5/v8/messages"

	"github.com/krb5-exporter/krb5-exporter/internal/der"
)

// Fuzz targets over everything a KDC (or anyone who can send datagrams to
// the probe's port) controls. The seed corpus in testdata/fuzz/ holds replies
// captured from MIT krb5kdc 1.20 (TestCaptureFuzzCorpus rewrites it); `go
// test` runs the seeds, `go test -fuzz=FuzzX` explores from them.

// fuzzPrincipal and testPassword are the principal the corpus was captured
// with; its keys are derived from the password, so the captured AS-REPs
// decrypt here.
const fuzzPrincipal = "fuzzuser@PERF.TEST"

// gokrb5OK runs a gokrb5 parser, which may panic on hostile input.
func gokrb5OK(f func() error) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return f() == nil
}

// canonical reports whether gokrb5 understood b completely: it decodes it and
// encodes it back to the same bytes. Only then is it a reference for ours
// (gokrb5's decoder quietly accepts some malformed members).
func canonical(b []byte, unmarshal func([]byte) error, marshal func() ([]byte, error)) bool {
	if !gokrb5OK(func() error { return unmarshal(bytes.Clone(b)) }) {
		return false
	}
	var again []byte
	ok := gokrb5OK(func() (err error) { again, err = marshal(); return err })
	return ok && bytes.Equal(again, b)
}

func FuzzParseReply(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		var ke krbError
		if parseKRBError(b, &ke) == nil {
			var g messages.KRBError
			if canonical(b, g.Unmarshal, g.Marshal) {
				if g.ErrorCode != ke.code || g.STime.Unix() != ke.stime.Unix() || g.EText != string(ke.text) {
					t.Fatalf("KRB-ERROR: ours code %d stime %v text %q, gokrb5 %d %v %q", ke.code, ke.stime, ke.text, g.ErrorCode, g.STime, g.EText)
				}
			}
			if len(ke.edata) > 0 {
				_, _, _ = findEtypeInfo2(ke.edata, false, func(int32) bool { return false })
			}
		}
		var r kdcRep
		if parseKDCRep(b, appASRep, &r) == nil {
			var g messages.ASRep
			if canonical(b, g.Unmarshal, g.Marshal) {
				if g.EncPart.EType != r.enc.etype || !bytes.Equal(g.EncPart.Cipher, r.enc.cipher) || g.Ticket.EncPart.EType != r.ticketEtype {
					t.Fatalf("AS-REP: ours %+v, gokrb5 enc-part %+v ticket etype %d", r.enc, g.EncPart, g.Ticket.EncPart.EType)
				}
			}
			if r.padata != nil {
				_, _, _ = findEtypeInfo2(r.padata, true, func(int32) bool { return true })
			}
		}
		if parseKDCRep(b, appTGSRep, &r) == nil {
			var g messages.TGSRep
			if canonical(b, g.Unmarshal, g.Marshal) && g.EncPart.EType != r.enc.etype {
				t.Fatalf("TGS-REP: ours etype %d, gokrb5 %d", r.enc.etype, g.EncPart.EType)
			}
		}
		var ep encRepPart
		_ = parseEncRepPart(b, &ep)
	})
}

func FuzzEncRepPart(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		var ep encRepPart
		if parseEncRepPart(b, &ep) != nil {
			return
		}
		var g messages.EncKDCRepPart
		if gokrb5OK(func() error { return g.Unmarshal(bytes.Clone(b)) }) && g.Nonce >= 0 {
			if g.Nonce != int(ep.nonce) || g.Key.KeyType != ep.keyType || !bytes.Equal(g.Key.KeyValue, ep.key) || !g.EndTime.Equal(ep.endtime) {
				t.Fatalf("ours nonce %d key %d/%x end %v; gokrb5 %d %d/%x %v", ep.nonce, ep.keyType, ep.key, ep.endtime, g.Nonce, g.Key.KeyType, g.Key.KeyValue, g.EndTime)
			}
		}
	})
}

// fuzzClient is an offline Client for fuzzPrincipal whose long-term keys are
// precomputed (string-to-key runs once, not per input).
func fuzzClient(t testing.TB) *Client {
	p := mustPrincipal(t, fuzzPrincipal)
	pw := NewPasswordCredentials(testPassword, p)
	creds := &Credentials{principal: p, path: "(precomputed)"}
	for _, e := range DefaultEtypes {
		k, _, err := pw.keyFor(e, 0, "", "")
		if err != nil {
			t.Fatal(err)
		}
		creds.keys = append(creds.keys, k)
	}
	c, err := NewClient(Options{KDC: "127.0.0.1:9", Client: p, Credentials: creds})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// asReply handles an AS reply the way Login does: check it, then take the
// AS-REP or read the PREAUTH_REQUIRED hints.
func asReply(c *Client, nonce int64, reply []byte) error {
	var res ASResult
	c.asNonce = nonce
	if err := c.checkASReply(reply, errorcode.KDC_ERR_PREAUTH_REQUIRED, PhaseASRep, &res, c.now(), 0); err != nil {
		return err
	}
	if reply[0] == der.App(appASRep) {
		return c.acceptASRep(reply, nil, PhaseASRep, &res)
	}
	_, err := c.choosePreauth(PhasePreauthRequired)
	return err
}

// FuzzASReply: nonce (4 bytes) then the reply to an AS-REQ with that nonce.
func FuzzASReply(f *testing.F) {
	c := fuzzClient(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 4 {
			return
		}
		err := asReply(c, int64(binary.BigEndian.Uint32(in)), in[4:])
		var pe *Error
		if err != nil && !errors.As(err, &pe) {
			t.Fatalf("error %T %v is not classified", err, err)
		}
		if err == nil && in[4] == der.App(appASRep) && !c.tgt.ok {
			t.Fatal("accepted AS-REP left no usable TGT")
		}
	})
}

// tgsInput is nonce (4), session key type (1), key length (1), key, reply.
func tgsInput(in []byte) (nonce int64, keyType int32, key, reply []byte, ok bool) {
	if len(in) < 6 || len(in) < 6+int(in[5]) {
		return 0, 0, nil, nil, false
	}
	n := 6 + int(in[5])
	return int64(binary.BigEndian.Uint32(in)), int32(in[4]), in[6:n], in[n:], true
}

func FuzzTGSReply(f *testing.F) {
	c := fuzzClient(f)
	svc := c.PrepareService(mustPrincipal(f, "HTTP/web0001.perf.test"))
	f.Fuzz(func(t *testing.T, in []byte) {
		nonce, kt, key, reply, ok := tgsInput(in)
		if !ok || lookupEtype(kt) == nil || (len(key) != 16 && len(key) != 32) {
			return
		}
		c.tgt = tgtState{ok: true, keyType: kt, key: bytes.Clone(key)}
		if err := c.tgt.schedules(); err != nil {
			return // a key of the wrong length for its enctype
		}
		var res TGSResult
		err := c.acceptTGSRep(reply, nonce, svc, &res)
		var pe *Error
		if err != nil && !errors.As(err, &pe) {
			t.Fatalf("error %T %v is not classified", err, err)
		}
	})
}

// The captured seeds are what they claim: ok-* replies are accepted, the
// others fail with the class in their name.
func TestFuzzSeeds(t *testing.T) {
	c := fuzzClient(t)
	svc := c.PrepareService(mustPrincipal(t, "HTTP/web0001.perf.test"))
	n := 0
	for _, target := range []string{"FuzzASReply", "FuzzTGSReply"} {
		files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", target, "*"))
		for _, f := range files {
			in := readSeed(t, f)
			name := filepath.Base(f)
			var err error
			if target == "FuzzASReply" {
				err = asReply(c, int64(binary.BigEndian.Uint32(in)), in[4:])
			} else {
				nonce, kt, key, reply, _ := tgsInput(in)
				c.tgt = tgtState{ok: true, keyType: kt, key: key}
				if err = c.tgt.schedules(); err == nil {
					var res TGSResult
					err = c.acceptTGSRep(reply, nonce, svc, &res)
				}
			}
			class, _, _ := strings.Cut(strings.TrimPrefix(name, "err-"), ".")
			switch {
			case strings.HasPrefix(name, "ok-") && err != nil:
				t.Errorf("%s/%s: %v", target, name, err)
			case strings.HasPrefix(name, "err-") && Classify(err) != class:
				t.Errorf("%s/%s: result %q (%v), want %q", target, name, Classify(err), err, class)
			}
			n++
		}
	}
	if n < 8 {
		t.Errorf("only %d seeds in testdata/fuzz", n)
	}
}

// readSeed decodes a file of the `go test fuzz v1` corpus format.
func readSeed(t testing.TB, path string) []byte {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitN(string(data), "\n", 2)
	if len(lines) != 2 || lines[0] != "go test fuzz v1" {
		t.Fatalf("%s: not a fuzz corpus file", path)
	}
	v := strings.TrimSpace(lines[1])
	if !strings.HasPrefix(v, "[]byte(") || !strings.HasSuffix(v, ")") {
		t.Fatalf("%s: not a []byte seed", path)
	}
	s, err := unquote(v[len("[]byte(") : len(v)-1])
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return []byte(s)
}
