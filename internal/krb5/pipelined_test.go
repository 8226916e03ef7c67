package krb5

import (
	"net"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/testutil"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// Several TGS requests from EncodeServiceTicket in flight on one socket:
// the KDC answers each, and OpenServiceTicketReply gives every reply the
// nonce of exactly one request (the key of a load generator that matches
// replies to requests).
func TestEncodeAndOpenServiceTicket(t *testing.T) {
	r := testutil.Realm(t, realm.Options{NoKadmind: true})
	c := userClient(t, r, 1, Options{})
	defer c.Close()
	s := c.PrepareService(mustPrincipal(t, r.Service(1)))
	if _, _, err := c.EncodeServiceTicket(nil, s); err == nil {
		t.Fatal("encoded a TGS-REQ without a TGT")
	}
	if _, err := c.Login(testCtx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("udp", r.KDCAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	const n = 8
	want := map[int64]bool{}
	for i := 0; i < n; i++ {
		req, nonce, err := c.EncodeServiceTicket(nil, s)
		if err != nil {
			t.Fatal(err)
		}
		if want[nonce] {
			t.Fatalf("nonce %d twice", nonce)
		}
		want[nonce] = true
		if _, err := conn.Write(req); err != nil {
			t.Fatal(err)
		}
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 8192)
	for i := 0; i < n; i++ {
		m, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		nonce, err := c.OpenServiceTicketReply(buf[:m])
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if !want[nonce] {
			t.Fatalf("reply %d has nonce %d of no outstanding request", i, nonce)
		}
		delete(want, nonce)
	}
	// A KDC error is an *Error with the KDC's code.
	bad := c.PrepareService(mustPrincipal(t, "HTTP/nosuch.perf.test@"+r.Realm))
	req, _, _ := c.EncodeServiceTicket(nil, bad)
	conn.Write(req)
	m, err := conn.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.OpenServiceTicketReply(buf[:m]); Classify(err) != "KDC_ERR_S_PRINCIPAL_UNKNOWN" {
		t.Errorf("unknown service: %v (%s)", err, Classify(err))
	}
}
