package krb5

import (
	"context"
	"fmt"
	"time"

	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/iana/msgtype"
	"github.com/jcmturner/gokrb5/v8/iana/patype"

	"github.com/krb5-exporter/krb5-exporter/internal/der"
)

// tgtState is the Client's TGT with the schedules of its session key.
type tgtState struct {
	ok      bool
	ticket  []byte
	keyType int32
	key     []byte
	renewAt time.Time // local (monotonic) time after which Login runs again
	expires time.Time

	auth  *usageKey // usage 7: the TGS-REQ authenticator
	cksum *usageKey // usage 6: its checksum over the request body
	rep   *usageKey // usage 8: the TGS-REP encrypted part
}

// renewFraction of a TGT's lifetime is left when ServiceTicket renews it.
const renewFraction = 4

func (t *tgtState) set(rep *kdcRep, ep *encRepPart, received time.Time) {
	t.ticket = append(t.ticket[:0], rep.ticket...)
	t.key = append(t.key[:0], ep.key...)
	t.keyType = ep.keyType
	start := ep.authtime
	if !ep.starttime.IsZero() {
		start = ep.starttime
	}
	life := ep.endtime.Sub(start)
	t.expires = received.Add(life)
	t.renewAt = received.Add(life - life/renewFraction)
	t.auth, t.cksum, t.rep = nil, nil, nil
	// A session key the client cannot use must not look like a TGT.
	et := lookupEtype(ep.keyType)
	t.ok = et != nil && len(ep.key) == et.keyLen && life > 0
}

// schedules derives the session key's schedules once per TGT.
func (t *tgtState) schedules() error {
	if t.auth != nil {
		return nil
	}
	et := lookupEtype(t.keyType)
	var err error
	if t.auth, err = newUsageKey(et, t.key, keyusage.TGS_REQ_PA_TGS_REQ_AP_REQ_AUTHENTICATOR, false); err != nil {
		return err
	}
	if t.cksum, err = newChecksumKey(et, t.key, keyusage.TGS_REQ_PA_TGS_REQ_AP_REQ_AUTHENTICATOR_CHKSUM); err != nil {
		return err
	}
	t.rep, err = newUsageKey(et, t.key, keyusage.TGS_REP_ENCPART_SESSION_KEY, false)
	return err
}

// HasTGT reports whether the Client holds a TGT that ServiceTicket will use
// without logging in again.
func (c *Client) HasTGT() bool { return c.tgt.ok && time.Now().Before(c.tgt.renewAt) }

// Service is a service principal prepared for repeated TGS requests.
type Service struct {
	name Principal
	body tmpl
}

// PrepareService pre-encodes the TGS-REQ body for a service principal of the
// client's realm.
func (c *Client) PrepareService(p Principal) *Service {
	if p.Realm == "" {
		p.Realm = c.realm
	}
	return &Service{name: p, body: c.encodeBody(Principal{}, p)}
}

// TGSResult describes one TGS exchange.
type TGSResult struct {
	Duration    time.Duration // the TGS round trip plus the client's own work, without any login
	Etypes      Etypes
	Retransmits int
	TCPFallback bool
	// Renewed is set when the TGT was missing or near expiry and a login ran
	// first; Login describes it.
	Renewed bool
	Login   ASResult
}

// ensureTGT logs in first when the Client has no TGT or it is near
// expiry (res.Renewed, res.Login say so), for the TGS exchanges that use it.
func (c *Client) ensureTGT(ctx context.Context, res *TGSResult) error {
	if c.HasTGT() {
		return nil
	}
	res.Renewed = true
	var err error
	if res.Login, err = c.Login(ctx); err != nil {
		return err
	}
	if !c.tgt.ok {
		return errorf(ClassMalformedReply, PhaseASRep, "the TGT's session key (%s, %d bytes) is not usable", EtypeName(c.tgt.keyType), len(c.tgt.key))
	}
	return nil
}

// ServiceTicket performs one TGS exchange for s, never answered from a cache.
// The TGT from the last Login is used until a quarter of its lifetime is
// left, then renewed with a new Login.
func (c *Client) ServiceTicket(ctx context.Context, s *Service) (TGSResult, error) {
	var res TGSResult
	if err := c.ensureTGT(ctx, &res); err != nil {
		return res, err
	}
	start := time.Now()
	err := c.serviceTicket(ctx, s, &res)
	res.Duration = time.Since(start)
	return res, err
}

func (c *Client) serviceTicket(ctx context.Context, s *Service, res *TGSResult) error {
	t := &c.tgt
	if err := t.schedules(); err != nil {
		// The session key came from the KDC's reply.
		return wrapError(ClassMalformedReply, PhaseTGSRep, err)
	}
	now := c.now()
	nonce := c.patch(&s.body, now)
	if err := c.buildTGSReq(s, now); err != nil {
		return err
	}
	var st exchangeStats
	reply, err := c.roundTrip(ctx, PhaseTGSRep, &st)
	res.Retransmits, res.TCPFallback = st.retransmits, st.tcpFallback
	if err != nil {
		return err
	}
	return c.acceptTGSRep(reply, nonce, s, res)
}

// acceptTGSRep checks a reply to the TGS-REQ with the given nonce.
func (c *Client) acceptTGSRep(reply []byte, nonce int64, s *Service, res *TGSResult) error {
	var rep kdcRep
	var ep encRepPart
	if err := c.openTGSRep(reply, &rep, &ep); err != nil {
		return err
	}
	if ep.nonce != nonce {
		return errorf(ClassMalformedReply, PhaseTGSRep, "TGS-REP nonce %d does not match the request's %d", ep.nonce, nonce)
	}
	res.Etypes = Etypes{Reply: rep.enc.etype, Ticket: rep.ticketEtype, Session: ep.keyType}
	if c.log != nil {
		c.debug("msg", "service ticket issued", "service", s.name.String(), "rep_etype", EtypeName(res.Etypes.Reply),
			"tkt_etype", EtypeName(res.Etypes.Ticket), "ses_etype", EtypeName(res.Etypes.Session))
	}
	return nil
}

// openTGSRep parses a reply to a TGS-REQ and decrypts its encrypted part
// with the TGT's session key; a KRB-ERROR is returned as an *Error.
func (c *Client) openTGSRep(reply []byte, rep *kdcRep, ep *encRepPart) error {
	return c.openTGSRepWith(&c.tgt, PhaseTGSRep, reply, rep, ep)
}

// openTGSRepWith is openTGSRep for a reply to a request made with the
// ticket t (the TGT, or a cross-realm TGT), failing in phase.
func (c *Client) openTGSRepWith(t *tgtState, phase string, reply []byte, rep *kdcRep, ep *encRepPart) error {
	switch {
	case len(reply) == 0:
		return errorf(ClassMalformedReply, phase, "empty reply")
	case reply[0] == der.App(appKRBError):
		if err := parseKRBError(reply, &c.kerr); err != nil {
			return wrapError(ClassMalformedReply, phase, err)
		}
		return kdcError(phase, c.kerr.code, string(c.kerr.text))
	case reply[0] != der.App(appTGSRep):
		return errorf(ClassMalformedReply, phase, "unexpected message 0x%02x", reply[0])
	}
	if err := parseKDCRep(reply, appTGSRep, rep); err != nil {
		return wrapError(ClassMalformedReply, phase, err)
	}
	if rep.enc.etype != t.keyType {
		return errorf(ClassMalformedReply, phase, "TGS-REP encrypted with %s, the session key is %s", EtypeName(rep.enc.etype), EtypeName(t.keyType))
	}
	if err := t.schedules(); err != nil { // a TGT that made no request yet (SwapTGT)
		return wrapError(ClassMalformedReply, phase, err)
	}
	pt, err := c.openReply(t.rep, rep.enc.cipher, phase, "TGS-REP")
	if err != nil {
		return err
	}
	if err := parseEncRepPart(pt, ep); err != nil {
		return wrapError(ClassMalformedReply, phase, fmt.Errorf("EncTGSRepPart: %w", err))
	}
	return nil
}

// buildTGSReq encodes a TGS-REQ into c.w: the patched body, and a PA-TGS-REQ
// AP-REQ carrying the TGT and an authenticator with the body's checksum.
func (c *Client) buildTGSReq(s *Service, now time.Time) error {
	return c.buildTGSReqWith(&c.tgt, s, now)
}

// buildTGSReqWith is buildTGSReq with the ticket t (the TGT, or a
// cross-realm TGT for a service of another realm).
func (c *Client) buildTGSReqWith(t *tgtState, s *Service, now time.Time) error {
	body := s.body.body
	c.sealAuthenticator(t.auth, now, t.cksum, body)

	w := &c.w
	w.Reset()
	m := w.Len()
	w.Raw(body)
	w.Close(der.Ctx(4), m)

	pm := w.Len()
	w.apReq(t.ticket, t.keyType, 0, c.ct)
	w.padata(pm, patype.PA_TGS_REQ)
	w.kdcReq(m, msgtype.KRB_TGS_REQ, appTGSReq)
	return nil
}

// sealAuthenticator encrypts an Authenticator made at now with u into c.ct;
// when cksum is set it carries cksum's checksum over data (the TGS-REQ
// body), otherwise no checksum (the kpasswd AP-REQ).
func (c *Client) sealAuthenticator(u *usageKey, now time.Time, cksum *usageKey, data []byte) {
	// Authenticator ::= [APPLICATION 2] SEQUENCE { authenticator-vno [0],
	//   crealm [1], cname [2], cksum [3], cusec [4], ctime [5] }
	a := &c.aux
	a.Reset()
	var ts [15]byte
	c.nowT.format(&ts, now)
	a.ExplicitTime(5, &ts)
	a.ExplicitInt(4, int64(now.Nanosecond()/1000))
	if cksum != nil {
		cm := a.Len()
		c.ct = cksum.checksum(c.ct[:0], data)
		a.ExplicitOctets(1, c.ct)
		a.ExplicitInt(0, int64(cksum.et.cksum))
		a.Close(der.TagSequence, cm)
		a.Close(der.Ctx(3), cm)
	}
	nm := a.Len()
	a.principalName(c.principal)
	a.Close(der.Ctx(2), nm)
	a.ExplicitString(1, c.realm)
	a.ExplicitInt(0, 5)
	a.Close(der.TagSequence, 0)
	a.Close(der.App(appAuthenticator), 0)
	c.ct = u.seal(c.ct[:0], a.Bytes(), c.rng)
}

// apReq prepends an AP-REQ with the ticket and the sealed authenticator
// auth (encrypted with the ticket's session key, of type etype); options is
// the first octet of ap-options (0x20: mutual-required).
func (w *derWriter) apReq(ticket []byte, etype int32, options byte, auth []byte) {
	// AP-REQ ::= [APPLICATION 14] SEQUENCE { pvno [0], msg-type [1],
	//   ap-options [2], ticket [3], authenticator [4] }
	pm := w.Len()
	am := w.Len()
	w.encryptedData(etype, 0, auth)
	w.Close(der.Ctx(4), am)
	tm := w.Len()
	w.Raw(ticket)
	w.Close(der.Ctx(3), tm)
	om := w.Len()
	w.Primitive(der.TagBitString, []byte{0, options, 0, 0, 0})
	w.Close(der.Ctx(2), om)
	w.ExplicitInt(1, msgtype.KRB_AP_REQ)
	w.ExplicitInt(0, 5)
	w.Close(der.TagSequence, pm)
	w.Close(der.App(appAPReq), pm)
}

// EncodeServiceTicket appends a TGS-REQ for s, made with the Client's TGT
// and a fresh nonce, to dst without sending it: a load generator that
// keeps many requests in flight on one socket sends them itself and hands
// the replies to OpenServiceTicketReply. The Client must hold a TGT
// (Login first).
func (c *Client) EncodeServiceTicket(dst []byte, s *Service) ([]byte, int64, error) {
	t := &c.tgt
	if !t.ok {
		return dst, 0, errorf(ClassMalformedReply, PhaseTGSRep, "no TGT: log in first")
	}
	if err := t.schedules(); err != nil {
		return dst, 0, wrapError(ClassMalformedReply, PhaseTGSRep, err)
	}
	now := c.now()
	nonce := c.patch(&s.body, now)
	if err := c.buildTGSReq(s, now); err != nil {
		return dst, 0, err
	}
	return append(dst, c.w.Bytes()...), nonce, nil
}

// OpenServiceTicketReply decrypts a reply to a request of
// EncodeServiceTicket with the TGT's session key and returns its nonce,
// which says which request it answers. A KRB-ERROR (which carries no
// nonce) is returned as an *Error.
func (c *Client) OpenServiceTicketReply(reply []byte) (int64, error) {
	var rep kdcRep
	var ep encRepPart
	if err := c.openTGSRep(reply, &rep, &ep); err != nil {
		return 0, err
	}
	return ep.nonce, nil
}
