package krb5

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"time"

	cryptorand "crypto/rand"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/krb5-exporter/krb5-exporter/internal/der"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5/spake"
)

// Options configure a Client.
type Options struct {
	// KDC is the one KDC to talk to: host:port, [v6]:port, or a bare host
	// (port 88); unused with Transport HTTPS, which talks to Proxy.
	KDC       string
	Transport Transport
	// Proxy is the KDC proxy of Transport HTTPS.
	Proxy *ProxyOptions
	// Client is the principal that logs in; its realm is the realm of every request.
	Client      Principal
	Credentials *Credentials
	// ASService is the server the AS exchange asks a ticket for: default
	// krbtgt/REALM (a login); kadmin/changepw for the password-change
	// probe, which needs an initial ticket for it as kpasswd does.
	ASService Principal
	// Etypes are offered in this order (default DefaultEtypes).
	Etypes []int32
	// PreauthUpfront sends PA-ENC-TIMESTAMP in the first AS-REQ, as a client
	// that remembers the KDC wants it; otherwise a login is two round trips
	// like a fresh `kinit -k`.
	PreauthUpfront bool
	// Preauth selects the pre-authentication method (default PreauthAuto:
	// SPAKE when the KDC offers it, as kinit).
	Preauth PreauthMode
	// UDPRetransmit, when positive, resends an unanswered UDP request after
	// this long and then after twice as long each time, as libkrb5 does (1s).
	UDPRetransmit time.Duration
	// TicketLifetime is the lifetime requested for tickets (default 10h).
	TicketLifetime time.Duration
	// MaxS2KIterations caps the PBKDF2 iterations a KDC may ask a password
	// client for (0: DefaultMaxS2KIterations; at most MaxS2KIterationsLimit).
	MaxS2KIterations uint32
	// Logger receives debug lines of every step; nil keeps the hot path free
	// of logging work.
	Logger log.Logger
	// Now is the wall clock used in requests (tests shift it); default time.Now.
	Now func() time.Time
	// LocalAddr, if valid, is the address requests are sent from (a
	// loopback alias in tests: 127.0.0.2); default: the kernel's choice.
	LocalAddr netip.Addr
}

// Client is one Kerberos client talking to one KDC. It holds its TGT and all
// precomputed request parts and buffers, so a Client is not safe for
// concurrent use: give each goroutine its own (they may share Credentials).
type Client struct {
	kdc        string
	kdcAddr    netip.AddrPort // set when the KDC is an IP literal
	dialer     net.Dialer
	localAddr  netip.Addr   // Options.LocalAddr
	udp        *udpSocket   // idle connected UDP socket, kept between clean exchanges
	udpUsed    time.Time    // when udp last completed an exchange
	http       *http.Client // Transport HTTPS: the KDC proxy's client
	proxyURL   string
	proxyOpts  ProxyOptions
	pw         der.Writer // the KDC-PROXY-MESSAGE being built
	transport  Transport
	retransmit time.Duration
	realm      string
	principal  Principal
	creds      *Credentials
	etypes     []int32
	upfront    bool
	maxS2K     uint32 // the PBKDF2 iteration cap
	preauth    PreauthMode
	sp         spakeState
	lifetime   time.Duration
	// The last second formatted for requests' till and timestamps.
	tillT, nowT krbTimeCache
	log         log.Logger
	now         func() time.Time
	rng         *rand.ChaCha8

	w   derWriter // the request being built
	aux derWriter // inner structures (PA-ENC-TS-ENC, Authenticator)
	ct  []byte    // ciphertext scratch
	pt  []byte    // plaintext scratch

	rbuf     []byte // receive buffer
	kerr     krbError
	salt     string    // the last salt the KDC announced
	asNonce  int64     // nonce of the AS-REQ in flight
	sentWall time.Time // wall clock when it was sent

	asBody tmpl // the constant AS-REQ body, nonce and till patched per request

	// EncodeLogin/OpenLoginReply: the key the last PREAUTH_REQUIRED asked
	// for; anyNonce lets acceptASRep take any nonce (many logins in
	// flight) and lastNonce is the one it read.
	choice    preauthChoice
	hasChoice bool
	pc        preauthCache // ReadLoginReply's last choice (flightPreauth)
	anyNonce  bool
	lastNonce int64

	// loginCtx is the context of the login in progress: a string-to-key
	// deep inside it stops waiting when the login's deadline passes.
	loginCtx context.Context

	ltGen uint64    // Credentials generation the schedules below belong to
	lt    []ltSched // long-term key schedules, per key

	tgt tgtState
	// xtgt is the cross-realm TGT of the last Referral, for xtgtFor.
	xtgt    tgtState
	xtgtFor *CrossRealmService
}

// tmpl is a pre-encoded KDC-REQ-BODY with the offsets of the nonce and till
// contents, which are the only parts that change between requests.
type tmpl struct {
	body     []byte
	nonceOff int // 4 octets
	tillOff  int // 15 octets
}

// ltSched holds the schedules of one long-term key.
type ltSched struct {
	key   *byte // identity of the key bytes in Credentials
	etype int32
	ts    *usageKey     // usage 1: PA-ENC-TIMESTAMP
	rep   *usageKey     // usage 3: AS-REP encrypted part
	spake [2]*spake.Key // the key prepared for SPAKE per group (spake.Groups), on first use
}

// NewClient validates the options and precomputes the request parts.
func NewClient(o Options) (*Client, error) {
	if o.Credentials == nil {
		return nil, errors.New("no credentials")
	}
	if len(o.Client.Components) == 0 || o.Client.Realm == "" {
		return nil, errors.New("no client principal")
	}
	kdc := ""
	if o.Transport != HTTPS {
		var err error
		if kdc, err = KDCAddress(o.KDC); err != nil {
			return nil, err
		}
	}
	etypes := o.Etypes
	if len(etypes) == 0 {
		etypes = DefaultEtypes
	}
	for _, e := range etypes {
		if lookupEtype(e) == nil {
			return nil, fmt.Errorf("unsupported enctype %d", e)
		}
	}
	if o.MaxS2KIterations == 0 {
		o.MaxS2KIterations = DefaultMaxS2KIterations
	}
	if o.MaxS2KIterations > MaxS2KIterationsLimit {
		return nil, fmt.Errorf("MaxS2KIterations %d is above %d", o.MaxS2KIterations, MaxS2KIterationsLimit)
	}
	mode, err := ParsePreauthMode(string(o.Preauth))
	if err != nil {
		return nil, err
	}
	var seed [32]byte
	if _, err := cryptorand.Read(seed[:]); err != nil {
		return nil, err
	}
	c := &Client{
		kdc:        kdc,
		transport:  o.Transport,
		retransmit: o.UDPRetransmit,
		realm:      o.Client.Realm,
		principal:  o.Client,
		creds:      o.Credentials,
		etypes:     append([]int32(nil), etypes...),
		upfront:    o.PreauthUpfront,
		maxS2K:     o.MaxS2KIterations,
		preauth:    mode,
		sp:         newSPAKEState(),
		lifetime:   o.TicketLifetime,
		log:        o.Logger,
		now:        o.Now,
		rng:        rand.NewChaCha8(seed),
		rbuf:       make([]byte, udpBufSize),
		w:          derWriter{der.NewWriter(2048)},
		aux:        derWriter{der.NewWriter(512)},
		ct:         make([]byte, 0, 512),
		pt:         make([]byte, 0, 2048),
	}
	if c.lifetime <= 0 {
		c.lifetime = 10 * time.Hour
	}
	if c.now == nil {
		c.now = time.Now
	}
	if o.LocalAddr.IsValid() {
		c.localAddr = o.LocalAddr
		c.dialer.LocalAddr = &net.TCPAddr{IP: o.LocalAddr.AsSlice()}
	}
	if o.Transport == HTTPS {
		c.pw = der.NewWriter(2048)
		if err := c.newProxy(o.Proxy); err != nil {
			return nil, err
		}
	}
	if ap, err := netip.ParseAddrPort(kdc); err == nil {
		c.kdcAddr = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	asService := krbtgt(c.realm)
	if len(o.ASService.Components) > 0 {
		asService = o.ASService
		if asService.Realm == "" {
			asService.Realm = c.realm
		}
	}
	c.asBody = c.encodeBody(o.Client, asService)
	return c, nil
}

// Transport returns the configured transport.
func (c *Client) Transport() Transport { return c.transport }

// encodeBody pre-encodes a KDC-REQ-BODY for sname; cname is included only for
// AS requests. Field order: kdc-options [0], cname [1], realm [2], sname [3],
// till [5], nonce [7], etype [8].
func (c *Client) encodeBody(cname Principal, sname Principal) tmpl {
	var w derWriter
	w.Reset()
	m := w.Len()

	etm := w.Len()
	for i := len(c.etypes) - 1; i >= 0; i-- {
		w.Integer(int64(c.etypes[i]))
	}
	w.Close(der.TagSequence, etm)
	w.Close(der.Ctx(8), etm)

	nm := w.Len()
	w.Integer(0x7fffffff) // placeholder, always four content octets
	nonceFromEnd := w.Len() - 2
	w.Close(der.Ctx(7), nm)

	var till [15]byte
	formatKrbTime(&till, time.Unix(0, 0))
	w.ExplicitTime(5, &till)
	tillFromEnd := w.Len() - 2 - 2

	sm := w.Len()
	w.principalName(sname)
	w.Close(der.Ctx(3), sm)
	w.ExplicitString(2, sname.Realm)
	if cname.Realm != "" {
		cm := w.Len()
		w.principalName(cname)
		w.Close(der.Ctx(1), cm)
	}
	km := w.Len()
	w.Primitive(der.TagBitString, []byte{0, 0, 0, 0, 0}) // no KDC options
	w.Close(der.Ctx(0), km)
	w.Close(der.TagSequence, m)

	b := append([]byte(nil), w.Bytes()...)
	return tmpl{body: b, nonceOff: len(b) - nonceFromEnd, tillOff: len(b) - tillFromEnd}
}

// patch writes a fresh nonce and till into the template and returns the nonce.
func (c *Client) patch(t *tmpl, now time.Time) int64 {
	// 0x01000000..0x7fffffff: always four DER content octets, never negative.
	n := uint32(c.rng.Uint64())&0x7fffffff | 0x01000000
	b := t.body[t.nonceOff : t.nonceOff+4]
	b[0], b[1], b[2], b[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	var till [15]byte
	c.tillT.format(&till, now.Add(c.lifetime))
	copy(t.body[t.tillOff:], till[:])
	return int64(n)
}

func (c *Client) debug(kv ...any) {
	if c.log != nil {
		_ = level.Debug(c.log).Log(kv...)
	}
}

// ensurePT makes the plaintext scratch large enough for n bytes.
func (c *Client) ensurePT(n int) {
	if cap(c.pt) < n {
		c.pt = make([]byte, 0, 2*n)
	}
}
