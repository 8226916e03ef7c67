package krb5

import (
	"net"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// Several TGS requests from EncodeServiceTicket in flight on one socket:
// the KDC answers each, and OpenServiceTicketReply gives every reply the
// nonce of exactly one request (the key of a load generator that matches
// replies to requests).
func TestEncodeAndOpenServiceTicket(t *testing.T) {
	r := realmtest.Realm(t, realm.Options{NoKadmind: true})
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

// Several logins in flight on one socket with EncodeLogin and
// OpenLoginReply: every first round trip is answered PREAUTH_REQUIRED,
// every second with an AS-REP whose nonce is that of exactly one request,
// and the Client then holds a TGT.
func TestEncodeAndOpenLogin(t *testing.T) {
	r := realmtest.Realm(t, realm.Options{NoKadmind: true})
	c := userClient(t, r, 1, Options{})
	defer c.Close()
	if _, _, err := c.EncodeLogin(nil, true); err == nil {
		t.Fatal("encoded pre-authentication before any PREAUTH_REQUIRED")
	}
	conn, err := net.Dial("udp", r.KDCAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 8192)
	const n = 4
	for i := 0; i < n; i++ {
		req, _, err := c.EncodeLogin(nil, false)
		if err != nil {
			t.Fatal(err)
		}
		conn.Write(req)
	}
	for i := 0; i < n; i++ {
		m, err := conn.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		if _, preauth, err := c.OpenLoginReply(buf[:m]); err != nil || !preauth {
			t.Fatalf("first round trip %d: preauth %v, %v", i, preauth, err)
		}
	}
	want := map[int64]bool{}
	for i := 0; i < n; i++ {
		req, nonce, err := c.EncodeLogin(nil, true)
		if err != nil {
			t.Fatal(err)
		}
		want[nonce] = true
		conn.Write(req)
	}
	for i := 0; i < n; i++ {
		m, err := conn.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		nonce, preauth, err := c.OpenLoginReply(buf[:m])
		if err != nil || preauth || !want[nonce] {
			t.Fatalf("second round trip %d: nonce %d (outstanding %v), preauth %v, %v", i, nonce, want, preauth, err)
		}
		delete(want, nonce)
	}
	if !c.HasTGT() {
		t.Error("no TGT after the logins")
	}
}

// Two logins of one Client, each TGT kept apart with SwapTGT: a TGS
// request made with one session's TGT is answered under that TGT's
// session key, so its reply opens with that TGT (the request's nonce) and
// with no other (ClassDecrypt); the Client's own TGT is the last login's.
func TestSwapTGT(t *testing.T) {
	r := realmtest.Realm(t, realm.Options{NoKadmind: true})
	c := userClient(t, r, 1, Options{})
	defer c.Close()
	s := c.PrepareService(mustPrincipal(t, r.Service(1)))
	var a, b TGT
	for _, x := range []*TGT{&a, &b} {
		if _, err := c.Login(testCtx(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
		c.SwapTGT(x)
		if !x.OK() {
			t.Fatal("no TGT after a login")
		}
	}
	if _, _, err := c.EncodeServiceTicket(nil, s); err == nil {
		t.Fatal("the Client kept a TGT after both went to sessions")
	}
	conn, err := net.Dial("udp", r.KDCAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c.SwapTGT(&a)
	req, nonce, err := c.EncodeServiceTicket(nil, s)
	c.SwapTGT(&a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(req); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 8192)
	m, err := conn.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	c.SwapTGT(&b)
	_, err = c.OpenServiceTicketReply(buf[:m])
	c.SwapTGT(&b)
	if Classify(err) != ClassDecrypt {
		t.Errorf("opened with the other session's TGT: %v, want class %s", err, ClassDecrypt)
	}
	c.SwapTGT(&a)
	got, err := c.OpenServiceTicketReply(buf[:m])
	c.SwapTGT(&a)
	if err != nil || got != nonce {
		t.Errorf("opened with its own TGT: nonce %d, %v; want %d", got, err, nonce)
	}
}
