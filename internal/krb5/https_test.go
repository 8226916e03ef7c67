package krb5

import (
	"bytes"
	"context"
	"crypto/x509"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/der"
)

// TestProxyReplyBounds: what a hostile or broken proxy sends is
// classified and bounded: a status other than 200, a redirect (never
// followed: it would send the request elsewhere), a body beyond the
// bound, a body that is no KDC-PROXY-MESSAGE or whose length prefix lies.
// The request itself is a KDC-PROXY-MESSAGE whose kerb-message holds the
// AS-REQ with its length prefix and whose target-domain is the realm.
func TestProxyReplyBounds(t *testing.T) {
	var sawRequest []byte
	elsewhere := 0
	reply := func(w http.ResponseWriter, r *http.Request) {}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/elsewhere" {
			elsewhere++
		}
		sawRequest, _ = io.ReadAll(r.Body)
		reply(w, r)
	}))
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())
	c, err := NewClient(Options{
		Transport: HTTPS, Proxy: &ProxyOptions{URL: srv.URL + "/KdcProxy", RootCAs: roots},
		Client: mustPrincipal(t, "probe@EXAMPLE.COM"), Credentials: NewPasswordCredentials("pw", mustPrincipal(t, "probe@EXAMPLE.COM")),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	wrap := func(msg []byte, prefix int) []byte {
		w := der.NewWriter(64)
		m := w.Len()
		w.Raw(msg)
		w.Raw([]byte{byte(prefix >> 24), byte(prefix >> 16), byte(prefix >> 8), byte(prefix)})
		w.Close(der.TagOctetString, m)
		w.Close(der.Ctx(0), m)
		w.Close(der.TagSequence, m)
		return w.Bytes()
	}
	for _, tc := range []struct {
		name  string
		reply func(http.ResponseWriter, *http.Request)
		class string
	}{
		{"503", func(w http.ResponseWriter, r *http.Request) { http.Error(w, "Remote unavailable", 503) }, ClassHTTPStatus},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
		}, ClassHTTPStatus},
		{"huge", func(w http.ResponseWriter, r *http.Request) {
			chunk := bytes.Repeat([]byte{0x30}, 64<<10)
			for i := 0; i < 64; i++ { // 4 MiB, beyond the 1 MiB bound
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}, ClassMalformedReply},
		{"not DER", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("<html>hello</html>")) }, ClassMalformedReply},
		{"lying prefix", func(w http.ResponseWriter, r *http.Request) { w.Write(wrap([]byte{0x7e, 0x00}, 9)) }, ClassMalformedReply},
	} {
		reply = tc.reply
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := c.Login(ctx)
		cancel()
		if got := Classify(err); got != tc.class {
			t.Errorf("%s: class %q (%v), want %q", tc.name, got, err, tc.class)
		}
	}
	if elsewhere != 0 {
		t.Errorf("the redirect was followed %d times", elsewhere)
	}
	if cap(c.rbuf) > 2*maxProxyReply {
		t.Errorf("receive buffer grew to %d bytes", cap(c.rbuf))
	}
	msg, err := parseProxyMessage(sawRequest)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	if len(msg) == 0 || msg[0] != der.App(appASReq) {
		t.Errorf("request's kerb-message is not an AS-REQ: % x", msg[:min(len(msg), 8)])
	}
	seq, _, _ := der.Expect(sawRequest, der.TagSequence)
	realm := ""
	der.Fields(seq, func(n int, inner []byte) error {
		if n == 1 {
			b, err := der.GeneralString(inner)
			realm = string(b)
			return err
		}
		return nil
	})
	if realm != "EXAMPLE.COM" {
		t.Errorf("target-domain %q, want EXAMPLE.COM", realm)
	}
}
