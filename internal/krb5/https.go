package krb5

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"

	"github.com/krb5-exporter/krb5-exporter/internal/der"
	"github.com/krb5-exporter/krb5-exporter/internal/kdcaddr"
)

// Classes of the https transport (a KDC proxy, [MS-KKDCP]).
const (
	ClassTLSUnknownAuthority = "tls_unknown_authority" // the proxy's certificate is not signed by a trusted CA
	ClassTLSNameMismatch     = "tls_name_mismatch"     // the proxy's certificate does not name the server
	ClassTLS                 = "tls"                   // any other TLS failure (expired certificate, handshake, not TLS)
	ClassHTTPStatus          = "http_status"           // the proxy answered with an HTTP status other than 200
	ClassProxyTimeout        = "proxy_timeout"         // the proxy took the request but did not answer before the deadline
)

// ProxyOptions say how to reach a KDC proxy (Transport HTTPS).
type ProxyOptions struct {
	// URL is the proxy's https:// URL, e.g. https://kdc.example.com/KdcProxy.
	URL string
	// RootCAs verify the proxy's certificate; nil: the system's roots.
	RootCAs *x509.CertPool
	// ServerName is the name the certificate must carry; default the URL's host.
	ServerName string
}

// ContentTypeKerberos is the media type of KDC-PROXY-MESSAGE bodies.
const ContentTypeKerberos = "application/kerberos"

// maxProxyReply bounds a proxy's reply body: the KDC's reply (bounded as
// over TCP) wrapped in a few octets of KDC-PROXY-MESSAGE.
const maxProxyReply = maxTCPReply + 64

// SetProxyRoots replaces the CAs that verify the proxy (a CA file that
// changed): the idle connection, verified by the old ones, is dropped.
func (c *Client) SetProxyRoots(roots *x509.CertPool) error {
	if c.transport != HTTPS {
		return errors.New("not transport https")
	}
	o := c.proxyOpts
	o.RootCAs = roots
	c.closeProxy()
	return c.newProxy(&o)
}

// newProxy builds the HTTP client of one Client: one connection, kept
// for udpReuseIdle between the round trips of a probe (its TLS handshake
// is paid once per probe, not per round trip), HTTP/1.1 as MIT's libkrb5.
func (c *Client) newProxy(o *ProxyOptions) error {
	if o == nil {
		return errors.New("transport https needs ProxyOptions")
	}
	u, err := kdcaddr.ParseProxyURL(o.URL)
	if err != nil {
		return err
	}
	tc := &tls.Config{RootCAs: o.RootCAs, ServerName: o.ServerName, MinVersion: tls.VersionTLS12}
	if tc.ServerName == "" {
		tc.ServerName = u.Hostname()
	}
	tr := &http.Transport{
		DialContext:            c.dialer.DialContext,
		TLSClientConfig:        tc,
		ForceAttemptHTTP2:      false,
		MaxIdleConns:           1,
		MaxIdleConnsPerHost:    1,
		MaxConnsPerHost:        1,
		IdleConnTimeout:        udpReuseIdle,
		MaxResponseHeaderBytes: 16 << 10,
		DisableCompression:     true,
		Proxy:                  nil, // the KDC proxy is reached directly, never through HTTPS_PROXY
	}
	c.proxyURL, c.proxyOpts = u.String(), *o
	c.http = &http.Client{
		Transport: tr,
		// A redirect would send the key-derived request elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return nil
}

// httpsRoundTrip wraps the request (req: the bare KDC-REQ) in a
// KDC-PROXY-MESSAGE, POSTs it and returns the KDC's reply from the
// proxy's, valid until the next round trip.
func (c *Client) httpsRoundTrip(ctx context.Context, phase string, req []byte) ([]byte, error) {
	w := &c.pw
	w.Reset()
	m := w.Len()
	w.ExplicitString(1, c.realm) // target-domain
	km := w.Len()
	w.Raw(req)
	var l [4]byte
	binary.BigEndian.PutUint32(l[:], uint32(len(req)))
	w.Raw(l[:])
	w.Close(der.TagOctetString, km)
	w.Close(der.Ctx(0), km) // kerb-message
	w.Close(der.TagSequence, m)

	var wrote atomic.Bool
	tctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) { wrote.Store(i.Err == nil) },
	})
	hr, err := http.NewRequestWithContext(tctx, http.MethodPost, c.proxyURL, bytes.NewReader(w.Bytes()))
	if err != nil {
		return nil, wrapError(ClassNetwork, phase, err)
	}
	hr.Header.Set("Content-Type", ContentTypeKerberos)
	hr.Header.Set("Accept", ContentTypeKerberos)
	resp, err := c.http.Do(hr)
	if err != nil {
		return nil, c.proxyError(ctx, phase, wrote.Load(), err)
	}
	defer resp.Body.Close()
	body, err := readAtMost(resp.Body, maxProxyReply, c.rbuf[:0])
	if err != nil {
		if errors.Is(err, errTooLong) {
			return nil, errorf(ClassMalformedReply, phase, "proxy reply longer than %d bytes", maxProxyReply)
		}
		return nil, c.proxyError(ctx, phase, true, err)
	}
	if cap(body) > cap(c.rbuf) {
		c.rbuf = body[:cap(body)]
	}
	if resp.StatusCode != http.StatusOK {
		return nil, errorf(ClassHTTPStatus, phase, "proxy answered HTTP %s: %s", resp.Status, firstLine(body))
	}
	msg, err := parseProxyMessage(body)
	if err != nil {
		return nil, wrapError(ClassMalformedReply, phase, err)
	}
	return msg, nil
}

// parseProxyMessage returns the Kerberos message inside a
// KDC-PROXY-MESSAGE: kerb-message without its 4-byte length prefix.
func parseProxyMessage(b []byte) ([]byte, error) {
	seq, rest, err := der.Expect(b, der.TagSequence)
	if err != nil {
		return nil, fmt.Errorf("KDC-PROXY-MESSAGE: %w", err)
	}
	if len(rest) != 0 {
		return nil, errors.New("KDC-PROXY-MESSAGE: trailing bytes")
	}
	var msg []byte
	err = der.Fields(seq, func(n int, inner []byte) error {
		var err error
		switch n {
		case 0:
			msg, err = der.Octets(inner)
		case 1:
			_, err = der.GeneralString(inner)
		case 2:
			_, err = der.Int64(inner)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("KDC-PROXY-MESSAGE: %w", err)
	}
	if len(msg) < 4 {
		return nil, errors.New("KDC-PROXY-MESSAGE: no kerb-message")
	}
	if n := binary.BigEndian.Uint32(msg); int64(n) != int64(len(msg)-4) {
		return nil, fmt.Errorf("KDC-PROXY-MESSAGE: length prefix %d for %d bytes", n, len(msg)-4)
	}
	return msg[4:], nil
}

var errTooLong = errors.New("too long")

// readAtMost reads r to its end into buf, failing beyond limit bytes.
func readAtMost(r io.Reader, limit int, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			if len(buf) > limit {
				return nil, errTooLong
			}
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > limit {
			return nil, errTooLong
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b[:min(len(b), 200)]), "\n")
	return strings.ToValidUTF8(strings.TrimSpace(s), "?")
}

// proxyError classifies a failed HTTPS exchange: TLS verification apart,
// and a deadline that passed after the request was sent as the proxy's
// (it, or the KDC behind it, did not answer) rather than the network's.
func (c *Client) proxyError(ctx context.Context, phase string, wrote bool, err error) *Error {
	var (
		ua  x509.UnknownAuthorityError
		he  x509.HostnameError
		cve *tls.CertificateVerificationError
		ci  x509.CertificateInvalidError
		ae  tls.AlertError
		rhe tls.RecordHeaderError
	)
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		return wrapError(ClassCanceled, phase, ctx.Err())
	case errors.As(err, &ua):
		return wrapError(ClassTLSUnknownAuthority, phase, err)
	case errors.As(err, &he):
		return wrapError(ClassTLSNameMismatch, phase, err)
	case errors.As(err, &cve), errors.As(err, &ci), errors.As(err, &ae), errors.As(err, &rhe):
		return wrapError(ClassTLS, phase, err)
	case ctx.Err() != nil && wrote:
		return wrapError(ClassProxyTimeout, phase, ctx.Err())
	case ctx.Err() != nil:
		return wrapError(ClassTimeout, phase, ctx.Err())
	}
	if cls := classifyNetwork(err); cls != ClassNetwork {
		if cls == ClassTimeout && wrote {
			cls = ClassProxyTimeout
		}
		return wrapError(cls, phase, err)
	}
	return wrapError(ClassNetwork, phase, err)
}

// closeProxy drops the idle proxy connection.
func (c *Client) closeProxy() {
	if c.http != nil {
		c.http.CloseIdleConnections()
	}
}
