package krb5

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/jcmturner/gokrb5/v8/iana/errorcode"

	"github.com/krb5-exporter/krb5-exporter/internal/der"
	"github.com/krb5-exporter/krb5-exporter/internal/kdcaddr"
)

// Transport is the protocol used to reach the KDC.
type Transport int

const (
	UDP Transport = iota
	TCP
	// HTTPS is Kerberos through a KDC proxy ([MS-KKDCP]): each message
	// wrapped in a KDC-PROXY-MESSAGE and POSTed over TLS.
	HTTPS
)

func (t Transport) String() string {
	switch t {
	case TCP:
		return "tcp"
	case HTTPS:
		return "https"
	}
	return "udp"
}

// ParseTransport parses "udp", "tcp" or "https" (empty means udp).
func ParseTransport(s string) (Transport, error) {
	switch strings.ToLower(s) {
	case "", "udp":
		return UDP, nil
	case "tcp":
		return TCP, nil
	case "https":
		return HTTPS, nil
	}
	return UDP, fmt.Errorf("unknown transport %q (want udp, tcp or https)", s)
}

const (
	// maxTCPReply bounds the length prefix a KDC may announce over TCP.
	maxTCPReply = 1 << 20
	// udpBufSize holds the largest possible datagram.
	udpBufSize = 64 << 10
)

// KDCAddress normalises a KDC address: host:port, [v6]:port, a bare host or
// IP literal (port 88 is added).
func KDCAddress(s string) (string, error) {
	if err := kdcaddr.Check(s); err != nil {
		return "", err
	}
	if _, _, err := net.SplitHostPort(s); err == nil {
		return s, nil
	}
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return netip.AddrPortFrom(a, 88).String(), nil
	}
	return net.JoinHostPort(s, "88"), nil
}

// exchangeStats records how a round trip travelled.
type exchangeStats struct {
	retransmits int  // UDP requests sent again after the retransmit interval
	tcpFallback bool // KRB_ERR_RESPONSE_TOO_BIG made the engine retry over TCP
}

// roundTrip sends the request built in c.w to the KDC and returns the reply,
// which stays valid until the next round trip. It honours ctx's deadline and
// cancellation on every socket operation.
func (c *Client) roundTrip(ctx context.Context, phase string, st *exchangeStats) ([]byte, error) {
	req := c.w.Bytes()
	if c.transport == HTTPS {
		return c.httpsRoundTrip(ctx, phase, req)
	}
	if c.transport == UDP {
		reply, err := c.udpRoundTrip(ctx, req, st)
		if err != nil {
			return nil, c.netError(ctx, phase, err)
		}
		if isKDCRequest(reply) {
			// A request came back instead of a reply: the datagram looped to
			// its sender (a KDC port that is also a local ephemeral port) or
			// to another client. A fault of the network path, not of a KDC.
			return nil, errorf(ClassNetwork, phase, "got a KDC request (0x%02x) instead of a reply: the datagram came back to a client", reply[0])
		}
		if len(reply) == 0 || reply[0] != der.App(appKRBError) ||
			parseKRBError(reply, &c.kerr) != nil || c.kerr.code != errorcode.KRB_ERR_RESPONSE_TOO_BIG {
			return reply, nil
		}
		st.tcpFallback = true
		c.debug("msg", "KDC answered RESPONSE_TOO_BIG, retrying over TCP", "phase", phase)
	}
	var l [4]byte
	binary.BigEndian.PutUint32(l[:], uint32(len(req)))
	c.w.Raw(l[:])
	reply, err := c.tcpRoundTrip(ctx, c.w.Bytes())
	if err != nil {
		return nil, c.netError(ctx, phase, err)
	}
	return reply, nil
}

// isKDCRequest reports whether msg is an AS-REQ or TGS-REQ.
func isKDCRequest(msg []byte) bool {
	return len(msg) > 0 && (msg[0] == der.App(appASReq) || msg[0] == der.App(appTGSReq))
}

// netError classifies a transport failure; ctx's own state wins because a
// cancelled exchange surfaces as a deadline error from the socket.
func (c *Client) netError(ctx context.Context, phase string, err error) *Error {
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		return wrapError(ClassCanceled, phase, ctx.Err())
	case ctx.Err() != nil:
		return wrapError(ClassTimeout, phase, ctx.Err())
	}
	var pe *Error
	if errors.As(err, &pe) {
		pe.Phase = phase
		return pe
	}
	return wrapError(classifyNetwork(err), phase, err)
}

// watch makes the connection's operations fail as soon as ctx is cancelled
// (deadlines alone cover expiry).
func watch(ctx context.Context, conn net.Conn) (stop func() bool) {
	dl, _ := ctx.Deadline() // zero: no deadline (clears one left on a reused socket)
	_ = conn.SetDeadline(dl)
	if ctx.Done() == nil {
		return func() bool { return true }
	}
	return context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
}

// udpReuseIdle bounds how long an idle connected UDP socket is kept. A
// Client probing every few seconds or less (a load generator) saves the
// socket set-up, which costs more CPU than the rest of a TGS exchange; a
// daemon probing every 15s opens a fresh socket each time, as kinit does.
const udpReuseIdle = 2 * time.Second

func (c *Client) udpRoundTrip(ctx context.Context, req []byte, st *exchangeStats) ([]byte, error) {
	s := c.udp
	if s != nil && time.Since(c.udpUsed) > udpReuseIdle {
		c.closeUDP()
		s = nil
	}
	if s == nil {
		ap, err := c.resolve(ctx)
		if err != nil {
			return nil, err
		}
		if s, err = dialUDPSocket(c.localAddr, ap); err != nil {
			return nil, err
		}
	}
	c.udp = nil // owned by this exchange until it ends cleanly
	n, err := s.exchange(ctx, req, c.rbuf, c.retransmit, st)
	if err != nil {
		s.close()
		return nil, err
	}
	if st.retransmits > 0 {
		// A late reply to an earlier copy of the request must never be
		// read as the answer to the next one: only a socket with nothing
		// in flight is kept.
		s.close()
		c.debug("msg", "reply after UDP retransmits", "retransmits", st.retransmits)
	} else {
		c.udp, c.udpUsed = s, time.Now()
	}
	return c.rbuf[:n], nil
}

// resolve returns the KDC's address, asking the resolver (as every kinit
// does) unless it is an IP literal.
func (c *Client) resolve(ctx context.Context) (netip.AddrPort, error) {
	if c.kdcAddr.IsValid() {
		return c.kdcAddr, nil
	}
	host, port, _ := net.SplitHostPort(c.kdc)
	pn, err := net.DefaultResolver.LookupPort(ctx, "udp", port)
	if err != nil {
		return netip.AddrPort{}, err
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.AddrPort{}, err
	}
	if len(addrs) == 0 {
		return netip.AddrPort{}, fmt.Errorf("%s: no address", host)
	}
	return netip.AddrPortFrom(addrs[0].Unmap(), uint16(pn)), nil
}

// Close releases the Client's idle socket, if any. The Client stays usable.
func (c *Client) Close() error {
	c.closeUDP()
	c.closeProxy()
	return nil
}

func (c *Client) closeUDP() {
	if c.udp != nil {
		c.udp.close()
		c.udp = nil
	}
}

func (c *Client) tcpRoundTrip(ctx context.Context, req []byte) ([]byte, error) {
	return c.tcpRoundTripTo(ctx, c.kdc, req)
}

// tcpRoundTripTo sends a length-prefixed request to addr and reads the
// length-prefixed reply (RFC 4120 7.2.2; kpasswd over TCP is framed alike).
func (c *Client) tcpRoundTripTo(ctx context.Context, addr string, req []byte) ([]byte, error) {
	conn, err := c.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	stop := watch(ctx, conn)
	defer stop()
	if _, err := conn.Write(req); err != nil {
		return nil, err
	}
	hdr := c.rbuf[:4]
	if _, err := io.ReadFull(conn, hdr); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr)
	if n&0x80000000 != 0 || n > maxTCPReply {
		return nil, &Error{Class: ClassMalformedReply, Err: fmt.Errorf("TCP length prefix 0x%08x", n)}
	}
	if int(n) > len(c.rbuf) {
		c.rbuf = make([]byte, n)
	}
	if _, err := io.ReadFull(conn, c.rbuf[:n]); err != nil {
		return nil, err
	}
	return c.rbuf[:n], nil
}
