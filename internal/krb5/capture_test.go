package krb5

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jcmturner/gokrb5/v8/messages"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

var unquote = strconv.Unquote

// recordingRelay forwards UDP between one client and the KDC and keeps
// every request and reply, in order.
type recordingRelay struct {
	mu       sync.Mutex
	requests [][]byte
	replies  [][]byte
}

func (rr *recordingRelay) last() (req, rep []byte) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return rr.requests[len(rr.requests)-1], rr.replies[len(rr.replies)-1]
}

func startRecordingRelay(t *testing.T, kdc string) (string, *recordingRelay) {
	front, back := testutil.RelaySockets(t, "127.0.0.1:0", kdc)
	rr := &recordingRelay{}
	go func() {
		buf := make([]byte, 65536)
		for {
			n, from, err := front.ReadFromUDP(buf)
			if err != nil {
				return
			}
			rr.mu.Lock()
			rr.requests = append(rr.requests, bytes.Clone(buf[:n]))
			rr.mu.Unlock()
			back.Write(buf[:n])
			m, err := back.Read(buf)
			if err != nil {
				return
			}
			rr.mu.Lock()
			rr.replies = append(rr.replies, bytes.Clone(buf[:m]))
			rr.mu.Unlock()
			front.WriteToUDP(buf[:m], from)
		}
	}()
	return front.LocalAddr().String(), rr
}

func writeSeed(t *testing.T, target, name string, b []byte) {
	dir := filepath.Join("testdata", "fuzz", target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func nonceBytes(n int) []byte {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(n))
	return b[:]
}

// TestCaptureFuzzCorpus rewrites testdata/fuzz from a real KDC. It runs only
// with KRB5_PROBER_CAPTURE=1 (the corpus is committed).
func TestCaptureFuzzCorpus(t *testing.T) {
	if os.Getenv("KRB5_PROBER_CAPTURE") != "1" {
		t.Skip("set KRB5_PROBER_CAPTURE=1 to rewrite testdata/fuzz from a real KDC")
	}
	r := upRealm(t, realm.Options{})
	ctx := context.Background()
	kadmin(t, r, "addprinc -clearpolicy -pw "+testPassword+" "+fuzzPrincipal)
	for _, e := range supportedEtypes {
		// One capture per enctype: the principal gets that enctype's key alone.
		kadmin(t, r, fmt.Sprintf("cpw -e %s:normal -pw %s %s", e.name, testPassword, fuzzPrincipal))
		addr, rr := startRecordingRelay(t, r.KDCAddr)
		p := mustPrincipal(t, fuzzPrincipal)
		c, err := NewClient(Options{KDC: addr, Client: p, Credentials: NewPasswordCredentials(testPassword, p)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Login(ctx); err != nil {
			t.Fatal(err)
		}
		rr.mu.Lock()
		preauthReq, asReq, asRep := rr.replies[0], rr.requests[1], rr.replies[1]
		rr.mu.Unlock()
		var req messages.ASReq
		if err := req.Unmarshal(asReq); err != nil {
			t.Fatal(err)
		}
		writeSeed(t, "FuzzParseReply", fmt.Sprintf("preauth-required-%d", e.id), preauthReq)
		writeSeed(t, "FuzzParseReply", fmt.Sprintf("as-rep-%d", e.id), asRep)
		writeSeed(t, "FuzzASReply", fmt.Sprintf("ok-as-rep-%d", e.id), append(nonceBytes(req.ReqBody.Nonce), asRep...))
		writeSeed(t, "FuzzASReply", fmt.Sprintf("ok-preauth-required-%d", e.id), append(nonceBytes(req.ReqBody.Nonce), preauthReq...))

		// The decrypted part, for FuzzEncRepPart.
		var rep kdcRep
		if err := parseKDCRep(asRep, appASRep, &rep); err != nil {
			t.Fatal(err)
		}
		k, _, _ := c.creds.keyFor(rep.enc.etype, 0, "", "")
		s, _ := c.schedule(k)
		pt, err := s.rep.open(nil, rep.enc.cipher)
		if err != nil {
			t.Fatal(err)
		}
		writeSeed(t, "FuzzEncRepPart", fmt.Sprintf("enc-as-rep-part-%d", e.id), pt)

		key, kt := bytes.Clone(c.tgt.key), c.tgt.keyType
		svc := c.PrepareService(mustPrincipal(t, r.Service(1)))
		if _, err := c.ServiceTicket(ctx, svc); err != nil {
			t.Fatal(err)
		}
		tgsReq, tgsRep := rr.last()
		var treq messages.TGSReq
		if err := treq.Unmarshal(tgsReq); err != nil {
			t.Fatal(err)
		}
		prefix := append(append(nonceBytes(treq.ReqBody.Nonce), byte(kt), byte(len(key))), key...)
		writeSeed(t, "FuzzParseReply", fmt.Sprintf("tgs-rep-%d", e.id), tgsRep)
		writeSeed(t, "FuzzTGSReply", fmt.Sprintf("ok-tgs-rep-%d", e.id), append(bytes.Clone(prefix), tgsRep...))

		if e.id == 20 {
			_, err := c.ServiceTicket(ctx, c.PrepareService(mustPrincipal(t, "HTTP/nosuch."+r.Domain)))
			wantClass(t, err, "KDC_ERR_S_PRINCIPAL_UNKNOWN")
			_, unknownSvc := rr.last()
			writeSeed(t, "FuzzParseReply", "err-s-principal-unknown", unknownSvc)
			writeSeed(t, "FuzzTGSReply", "err-KDC_ERR_S_PRINCIPAL_UNKNOWN", append(bytes.Clone(prefix), unknownSvc...))

			bad, _ := NewClient(Options{KDC: addr, Client: p, Credentials: NewPasswordCredentials("wrong", p)})
			_, err = bad.Login(ctx)
			wantClass(t, err, "KDC_ERR_PREAUTH_FAILED")
			_, failed := rr.last()
			writeSeed(t, "FuzzParseReply", "err-preauth-failed", failed)
			writeSeed(t, "FuzzASReply", "err-KDC_ERR_PREAUTH_FAILED", append(nonceBytes(1), failed...))

			skewed, _ := NewClient(Options{KDC: addr, Client: p, Credentials: NewPasswordCredentials(testPassword, p),
				Now: func() time.Time { return time.Now().Add(-time.Hour) }})
			_, err = skewed.Login(ctx)
			wantClass(t, err, "KRB_AP_ERR_SKEW")
			_, skew := rr.last()
			writeSeed(t, "FuzzASReply", "err-KRB_AP_ERR_SKEW", append(nonceBytes(1), skew...))

			np := mustPrincipal(t, "nosuchuser@"+r.Realm)
			nobody, _ := NewClient(Options{KDC: addr, Client: np, Credentials: NewPasswordCredentials("x", np)})
			_, err = nobody.Login(ctx)
			wantClass(t, err, "KDC_ERR_C_PRINCIPAL_UNKNOWN")
			_, unknown := rr.last()
			writeSeed(t, "FuzzASReply", "err-KDC_ERR_C_PRINCIPAL_UNKNOWN", append(nonceBytes(1), unknown...))

			// A reply to another request (wrong nonce) and a corrupted one.
			writeSeed(t, "FuzzASReply", "err-malformed_reply", append(nonceBytes(req.ReqBody.Nonce+1), asRep...))
			corrupt := bytes.Clone(asRep)
			corrupt[len(corrupt)-5] ^= 0xff
			writeSeed(t, "FuzzASReply", "err-decrypt", append(nonceBytes(req.ReqBody.Nonce), corrupt...))
		}
	}
}
