package krb5

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/jcmturner/gokrb5/v8/iana/errorcode"

	"github.com/krb5-exporter/krb5-exporter/internal/der"
)

// A service of another realm is reached in two hops, as MIT's client does
// for a realm it knows (capaths, or a direct trust): the client's own KDC
// issues the cross-realm TGT krbtgt/REMOTE@LOCAL (the referral hop), and
// the remote realm's KDC, given that ticket, issues the service ticket
// (the remote hop). Only direct trusts are walked: a KDC that answers the
// referral with a TGT of a third realm fails the remote hop.

// Phases of the two hops.
const (
	PhaseReferral  = "referral"   // TGS-REQ for krbtgt/REMOTE@LOCAL at the client's KDC
	PhaseRemoteTGS = "remote_tgs" // TGS-REQ for the service at the remote realm's KDC
)

// Classes of the trust's own failures; the other failures of a hop keep
// the classes of any exchange (a KDC error name, timeout, ...).
const (
	// ClassNoTrustPath: the client's KDC has no krbtgt/REMOTE@LOCAL
	// (KDC_ERR_S_PRINCIPAL_UNKNOWN to the referral hop).
	ClassNoTrustPath = "no_trust_path"
	// ClassTrustKeyMismatch: the remote KDC cannot read the cross-realm
	// TGT (ticketUnreadable): the two realms
	// no longer hold the same krbtgt/REMOTE@LOCAL key, as after a rekey
	// on one side.
	ClassTrustKeyMismatch = "trust_key_mismatch"
)

// CrossRealmService is a service of another realm prepared for repeated
// probes: the referral request and the service request.
type CrossRealmService struct {
	name     Principal
	referral *Service // krbtgt/REMOTE@LOCAL
	service  *Service // the service, in REMOTE
}

// Name is the service principal.
func (s *CrossRealmService) Name() Principal { return s.name }

// PrepareCrossRealm pre-encodes both TGS-REQ bodies for a service of a
// realm other than the client's.
func (c *Client) PrepareCrossRealm(p Principal) (*CrossRealmService, error) {
	if p.Realm == "" || p.Realm == c.realm {
		return nil, errors.New("a cross-realm service must name a realm other than the client's")
	}
	tgt := Principal{Components: []string{"krbtgt", p.Realm}, Realm: c.realm}
	return &CrossRealmService{
		name:     p,
		referral: &Service{name: tgt, body: c.encodeBody(Principal{}, tgt)},
		service:  &Service{name: p, body: c.encodeBody(Principal{}, p)},
	}, nil
}

// Referral asks the client's KDC for the cross-realm TGT of s's realm with
// the Client's TGT (Login first; a missing or old TGT is renewed as
// ServiceTicket does). The cross-realm TGT stays in the Client for
// RemoteServiceTicket; a failure drops any earlier one.
func (c *Client) Referral(ctx context.Context, s *CrossRealmService) (TGSResult, error) {
	c.xtgt.ok = false
	var res TGSResult
	if err := c.ensureTGT(ctx, &res); err != nil {
		return res, err
	}
	start := time.Now()
	err := c.hop(ctx, &c.tgt, s.referral, PhaseReferral, &res, nil, func(rep *kdcRep, ep *encRepPart) error {
		// A KDC without the direct trust may answer with the TGT of a
		// realm on the way (capaths): that is not the trust probed.
		if ok, err := namesEqual(ep.sname, s.referral.name.Components); err != nil || !ok || string(ep.srealm) != c.realm {
			return errorf(ClassNoTrustPath, PhaseReferral, "the KDC issued a ticket for another server than %s (a path through another realm?); only direct trusts are probed", s.referral.name)
		}
		c.xtgt.set(rep, ep, start)
		c.xtgtFor = s
		return nil
	})
	res.Duration = time.Since(start)
	var ke *Error
	if errors.As(err, &ke) && ke.Code == errorcode.KDC_ERR_S_PRINCIPAL_UNKNOWN {
		ke.Class = ClassNoTrustPath
		ke.Err = fmt.Errorf("%s: the KDC has no %s", KDCErrorName(ke.Code), s.referral.name)
	}
	if err == nil && !c.xtgt.ok {
		err = errorf(ClassMalformedReply, PhaseReferral, "the cross-realm TGT's session key (%s) is not usable", EtypeName(c.xtgt.keyType))
	}
	return res, err
}

// RemoteResult describes the remote hop.
type RemoteResult struct {
	TGSResult
	// ClockOffset is the remote KDC's clock minus the local clock, from
	// its KRB-ERROR (a TGS-REP carries no time of the remote KDC). Valid
	// when HasClockOffset is set.
	ClockOffset    time.Duration
	HasClockOffset bool
}

// RemoteServiceTicket asks the remote realm's KDC at kdc (host:port) for
// s with the cross-realm TGT of the last successful Referral for s.
func (c *Client) RemoteServiceTicket(ctx context.Context, s *CrossRealmService, kdc string) (RemoteResult, error) {
	var res RemoteResult
	if !c.xtgt.ok || c.xtgtFor != s {
		return res, errorf(ClassMalformedReply, PhaseRemoteTGS, "no cross-realm TGT for %s: run the referral first", s.name.Realm)
	}
	addr, err := KDCAddress(kdc)
	if err != nil {
		return res, wrapError(ClassNetwork, PhaseRemoteTGS, err)
	}
	// The remote KDC has a socket of its own, closed after the hop, so
	// the idle socket to the client's KDC is kept as it was.
	saved := c.kdcConn()
	c.setKDCConn(kdcConn{kdc: addr})
	defer func() {
		c.closeUDP()
		c.setKDCConn(saved)
	}()
	start := time.Now()
	err = c.hop(ctx, &c.xtgt, s.service, PhaseRemoteTGS, &res.TGSResult, &res, nil)
	res.Duration = time.Since(start)
	var ke *Error
	if errors.As(err, &ke) && ticketUnreadable(ke) {
		ke.Class = ClassTrustKeyMismatch
		ke.Err = fmt.Errorf("%s: the KDC of %s cannot read the cross-realm TGT: %s differs between the two realms (rekeyed on one side?)",
			KDCErrorName(ke.Code), s.name.Realm, s.referral.name)
	}
	return res, err
}

// ticketUnreadable tells a KDC's answer that it could not decrypt the
// ticket of a TGS-REQ: a kvno it does not hold (MIT 1.20 answers "No
// matching key in entry" as KRB_ERR_GENERIC with the e-text PROCESS_TGS,
// the status of its AP-REQ check) or a key that does not match.
func ticketUnreadable(e *Error) bool {
	switch e.Code {
	case errorcode.KRB_AP_ERR_BADKEYVER, errorcode.KRB_AP_ERR_MODIFIED, errorcode.KRB_AP_ERR_BAD_INTEGRITY:
		return true
	case errorcode.KRB_ERR_GENERIC:
		return e.Text == "PROCESS_TGS"
	}
	return false
}

// hop is one TGS exchange with ticket t for s; accept, if set, takes the
// checked reply (its error is the hop's); clock, if set, the offset of a
// KRB-ERROR.
func (c *Client) hop(ctx context.Context, t *tgtState, s *Service, phase string, res *TGSResult, clock *RemoteResult, accept func(*kdcRep, *encRepPart) error) error {
	if err := t.schedules(); err != nil {
		return wrapError(ClassMalformedReply, phase, err) // the session key came from a KDC's reply
	}
	now := c.now()
	nonce := c.patch(&s.body, now)
	if err := c.buildTGSReqWith(t, s, now); err != nil {
		return err
	}
	var st exchangeStats
	sent := time.Now()
	reply, err := c.roundTrip(ctx, phase, &st)
	rt := time.Since(sent)
	res.Retransmits, res.TCPFallback = st.retransmits, st.tcpFallback
	if err != nil {
		return err
	}
	if clock != nil && len(reply) > 0 && reply[0] == der.App(appKRBError) && parseKRBError(reply, &c.kerr) == nil {
		clock.ClockOffset, clock.HasClockOffset = offsetAt(c.kerr.stime, sent, rt), true
	}
	var rep kdcRep
	var ep encRepPart
	if err := c.openTGSRepWith(t, phase, reply, &rep, &ep); err != nil {
		return err
	}
	if ep.nonce != nonce {
		return errorf(ClassMalformedReply, phase, "TGS-REP nonce %d does not match the request's %d", ep.nonce, nonce)
	}
	res.Etypes = Etypes{Reply: rep.enc.etype, Ticket: rep.ticketEtype, Session: ep.keyType}
	if c.log != nil {
		c.debug("msg", "ticket issued", "phase", phase, "service", s.name.String(), "duration", rt,
			"tkt_etype", EtypeName(res.Etypes.Ticket), "ses_etype", EtypeName(res.Etypes.Session))
	}
	if accept != nil {
		return accept(&rep, &ep)
	}
	return nil
}

// kdcConn is the KDC a Client talks to and its idle UDP socket.
type kdcConn struct {
	kdc     string
	kdcAddr netip.AddrPort
	udp     *udpSocket
	udpUsed time.Time
}

func (c *Client) kdcConn() kdcConn {
	return kdcConn{kdc: c.kdc, kdcAddr: c.kdcAddr, udp: c.udp, udpUsed: c.udpUsed}
}

func (c *Client) setKDCConn(k kdcConn) {
	if !k.kdcAddr.IsValid() {
		if ap, err := netip.ParseAddrPort(k.kdc); err == nil {
			k.kdcAddr = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		}
	}
	c.kdc, c.kdcAddr, c.udp, c.udpUsed = k.kdc, k.kdcAddr, k.udp, k.udpUsed
}
