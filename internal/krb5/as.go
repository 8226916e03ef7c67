package krb5

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jcmturner/gokrb5/v8/iana/errorcode"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/iana/msgtype"
	"github.com/jcmturner/gokrb5/v8/iana/patype"

	"github.com/krb5-exporter/krb5-exporter/internal/der"
)

// Phases (round trips) of the exchanges, as reported in errors and metrics.
const (
	PhasePreauthRequired = "preauth_required" // AS-REQ without pre-authentication → KDC_ERR_PREAUTH_REQUIRED
	PhaseASRep           = "as_rep"           // AS-REQ (with PA-ENC-TIMESTAMP or the SPAKE response) → AS-REP
	PhaseTGSRep          = "tgs_rep"          // TGS-REQ → TGS-REP
	PhaseKeys            = "keys"             // local key lookup before any traffic
)

// Etypes reports the enctypes of a reply, as the MIT KDC logs them.
type Etypes struct {
	Reply   int32 // the reply's encrypted part (the client's or the TGT session key)
	Ticket  int32 // the ticket (the service's key)
	Session int32 // the new session key
}

// ASResult describes one AS exchange (a login).
type ASResult struct {
	Duration        time.Duration // the whole exchange, including the client's own work
	PreauthRequired time.Duration // first round trip; zero when pre-authentication went up front
	ASRep           time.Duration // the round trip answered by the AS-REP (or the final error)
	RoundTrips      int
	Etypes          Etypes
	// ClockOffset is the KDC's clock minus the local clock, taken from a
	// KRB-ERROR's stime/susec (microseconds) or else from the AS-REP's
	// authtime (seconds). Valid when HasClockOffset is set.
	ClockOffset    time.Duration
	HasClockOffset bool
	// SPAKEChallenge is the round trip that sent the SPAKE support message
	// (zero when the KDC's optimistic challenge made it unnecessary).
	SPAKEChallenge time.Duration
	// Method is the pre-authentication used: MethodSPAKE,
	// MethodEncTimestamp or MethodNone.
	Method      string
	Retransmits int  // UDP requests sent again
	TCPFallback bool // a reply was RESPONSE_TOO_BIG and the exchange moved to TCP
}

// preauthChoice is the key the pre-authentication is made with, and how.
type preauthChoice struct {
	etype     int32
	salt      string
	s2kparams string
	spake     spakeStage // spakeOff: PA-ENC-TIMESTAMP
}

// Login performs an AS exchange for a TGT, which the Client keeps for
// ServiceTicket. Errors are *Error; the result carries the timings measured
// up to the failure.
func (c *Client) Login(ctx context.Context) (ASResult, error) {
	var res ASResult
	start := time.Now()
	err := c.login(ctx, &res)
	res.Duration = time.Since(start)
	if err != nil {
		return res, err
	}
	return res, nil
}

func (c *Client) login(ctx context.Context, res *ASResult) error {
	c.loginCtx = ctx
	defer func() { c.loginCtx = nil }()
	gen, err := c.creds.refresh(time.Now())
	if err != nil {
		return wrapError(ClassKeytab, PhaseKeys, err)
	}
	if gen != c.ltGen {
		c.lt, c.ltGen = c.lt[:0], gen
	}
	var st exchangeStats
	defer func() { res.Retransmits, res.TCPFallback = st.retransmits, st.tcpFallback }()

	var choice preauthChoice
	if c.upfront {
		var ok bool
		if choice, ok = c.firstOwnEtype(); !ok {
			return errorf(ClassKeytab, PhaseKeys, "no key for any of the enctypes %v", c.etypes)
		}
		if c.preauth == PreauthSPAKE {
			// SPAKE up front: the support message in the first request.
			choice.spake, c.sp.hasCookie = spakeSupport, false
		}
	} else {
		reply, rt, err := c.asRoundTrip(ctx, nil, PhasePreauthRequired, res, &st)
		res.PreauthRequired = rt
		if err != nil {
			return err
		}
		if reply[0] == der.App(appASRep) {
			// The principal does not require pre-authentication: one round trip.
			res.PreauthRequired, res.ASRep, res.Method = 0, rt, MethodNone
			return c.acceptASRep(reply, nil, PhaseASRep, res)
		}
		if choice, err = c.choosePreauth(PhasePreauthRequired); err != nil {
			return err
		}
		if err := c.pickMethod(&choice, PhasePreauthRequired); err != nil {
			if c.preauth == PreauthSPAKE {
				res.Method = MethodSPAKE // the method that failed
			}
			return err
		}
	}
	res.Method = choice.method()
	if c.log != nil {
		c.debug("msg", "pre-authentication", "method", res.Method, "etype", EtypeName(choice.etype),
			"spake_challenge_given", choice.spake == spakeResponse)
	}
	for attempt := 0; ; attempt++ {
		phase := PhaseASRep
		if choice.spake == spakeSupport {
			phase = PhaseSPAKEChallenge
		}
		reply, rt, err := c.asRoundTrip(ctx, &choice, phase, res, &st)
		if phase == PhaseSPAKEChallenge {
			res.SPAKEChallenge = rt
		} else {
			res.ASRep = rt
		}
		if err != nil {
			// PREAUTH_FAILED to a support message: the KDC shares no SPAKE
			// group with us. kinit then falls back to encrypted timestamp.
			if pe, ok := err.(*Error); ok && phase == PhaseSPAKEChallenge && pe.Code == errorcode.KDC_ERR_PREAUTH_FAILED {
				if c.preauth == PreauthSPAKE {
					return wrapError(ClassPreauthUnsupported, phase, fmt.Errorf("the KDC supports none of the client's SPAKE groups (edwards25519, P-256): %w", err))
				}
				choice.spake = spakeOff
				res.Method = choice.method()
				continue
			}
			// With pre-authentication up front the KDC may still ask for a
			// different key; follow its ETYPE-INFO2 once, as libkrb5 does.
			if pe, ok := err.(*Error); ok && c.upfront && attempt == 0 && pe.Code == errorcode.KDC_ERR_PREAUTH_REQUIRED {
				res.PreauthRequired, res.ASRep, res.SPAKEChallenge = rt, 0, 0
				if choice, err = c.choosePreauth(PhasePreauthRequired); err != nil {
					return err
				}
				if err := c.pickMethod(&choice, PhasePreauthRequired); err != nil {
					return err
				}
				res.Method = choice.method()
				continue
			}
			return err
		}
		if phase == PhaseSPAKEChallenge {
			if reply[0] == der.App(appASRep) {
				// SPAKE up front for a principal that needs no
				// pre-authentication: the KDC ignored it.
				res.Method = MethodNone
				return c.acceptASRep(reply, nil, phase, res)
			}
			// MORE_PREAUTH_DATA_REQUIRED with the KDC's challenge.
			if attempt >= 2 {
				return errorf(ClassMalformedReply, phase, "the KDC keeps asking for more pre-authentication data")
			}
			if err := c.takeMoreData(&choice, phase); err != nil {
				return err
			}
			res.Method = choice.method() // encrypted timestamp if the challenge was unusable
			continue
		}
		if reply[0] != der.App(appASRep) {
			return errorf(ClassMalformedReply, PhaseASRep, "unexpected message 0x%02x", reply[0])
		}
		return c.acceptASRep(reply, &choice, PhaseASRep, res)
	}
}

// asRoundTrip sends one AS-REQ (pre-authenticated as choice says, if set) and
// returns an AS-REP, or the KRB-ERROR as *Error. It times the round trip and
// takes the clock offset from any KRB-ERROR.
func (c *Client) asRoundTrip(ctx context.Context, choice *preauthChoice, phase string, res *ASResult, st *exchangeStats) ([]byte, time.Duration, error) {
	now := c.now()
	c.asNonce = c.patch(&c.asBody, now)
	c.sentWall = now
	if err := c.buildASReq(choice, now); err != nil {
		return nil, 0, err
	}
	res.RoundTrips++
	sent := time.Now()
	reply, err := c.roundTrip(ctx, phase, st)
	rt := time.Since(sent)
	if err != nil {
		return nil, rt, err
	}
	if c.log != nil {
		c.debug("msg", "round trip", "phase", phase, "duration", rt, "bytes", len(reply))
	}
	// The KRB-ERROR that is a step of the exchange rather than its failure.
	var next int32 = errorcode.KDC_ERR_PREAUTH_REQUIRED
	if choice != nil {
		next = 0
		if choice.spake == spakeSupport {
			next = kdcErrMorePreauthDataRequired
		}
	}
	if err := c.checkASReply(reply, next, phase, res, now, rt); err != nil {
		return nil, rt, err
	}
	return reply, rt, nil
}

// checkASReply accepts an AS-REP, or the KRB-ERROR with code next that
// continues the exchange (PREAUTH_REQUIRED in answer to a request without
// pre-authentication, MORE_PREAUTH_DATA_REQUIRED to a SPAKE support message;
// the caller reads its e-data from c.kerr); any other reply is the exchange's
// error. Every KRB-ERROR gives the clock offset.
func (c *Client) checkASReply(reply []byte, next int32, phase string, res *ASResult, sent time.Time, rt time.Duration) error {
	switch {
	case len(reply) == 0:
		return errorf(ClassMalformedReply, phase, "empty reply")
	case reply[0] == der.App(appASRep):
		return nil
	case reply[0] == der.App(appKRBError):
		if err := parseKRBError(reply, &c.kerr); err != nil {
			return wrapError(ClassMalformedReply, phase, err)
		}
		res.ClockOffset, res.HasClockOffset = offsetAt(c.kerr.stime, sent, rt), true
		if next != 0 && c.kerr.code == next {
			return nil
		}
		return kdcError(phase, c.kerr.code, string(c.kerr.text))
	default:
		return errorf(ClassMalformedReply, phase, "unexpected message 0x%02x", reply[0])
	}
}

// offsetAt estimates the KDC's clock minus ours, assuming the KDC stamped its
// reply halfway through the round trip.
func offsetAt(kdc, sent time.Time, rt time.Duration) time.Duration {
	return kdc.Sub(sent.Add(rt / 2))
}

// authtimeOffset estimates the clock offset from an AS-REP's authtime, the
// KDC's clock when it issued the ticket, truncated to the second: the middle
// of that second is the best estimate (±0.5 s).
func authtimeOffset(authtime, sent time.Time, rt time.Duration) time.Duration {
	return offsetAt(authtime.Add(500*time.Millisecond), sent, rt)
}

// firstOwnEtype picks the first configured enctype the credentials can serve
// without asking the KDC (default salt for passwords).
func (c *Client) firstOwnEtype() (preauthChoice, bool) {
	for _, e := range c.etypes {
		if c.creds.hasEtype(e) {
			return preauthChoice{etype: e}, true
		}
	}
	return preauthChoice{}, false
}

// choosePreauth reads the ETYPE-INFO2 of the PREAUTH_REQUIRED error in c.kerr
// and picks the first entry the client offered and has a key for.
func (c *Client) choosePreauth(phase string) (preauthChoice, error) {
	if len(c.kerr.edata) == 0 {
		// No hints: MIT always sends ETYPE-INFO2, others may not.
		if ch, ok := c.firstOwnEtype(); ok {
			return ch, nil
		}
		return preauthChoice{}, errorf(ClassKeytab, phase, "no key for any of the enctypes %v", c.etypes)
	}
	e, ok, err := findEtypeInfo2(c.kerr.edata, false, c.usable)
	if err != nil {
		return preauthChoice{}, wrapError(ClassMalformedReply, phase, fmt.Errorf("PREAUTH_REQUIRED e-data: %w", err))
	}
	if !ok {
		// Sending a timestamp the KDC cannot check would only earn a
		// PREAUTH_FAILED (and count towards a lockout policy).
		return preauthChoice{}, errorf(ClassKeytab, phase, "the KDC offers no enctype the client has a key for (client enctypes %v)", c.etypes)
	}
	ch := preauthChoice{etype: e.etype}
	if e.hasSalt {
		// The KDC repeats the same salt on every login: reuse the string.
		if string(e.salt) != c.salt {
			c.salt = string(e.salt)
		}
		ch.salt = c.salt
	}
	if e.hasS2K {
		// The KDC chooses the string-to-key cost: check it before paying it.
		if err := checkS2KParams(e.etype, e.s2kparams, c.maxS2K); err != nil {
			return preauthChoice{}, wrapError(ClassMalformedReply, phase, fmt.Errorf("PREAUTH_REQUIRED ETYPE-INFO2: %w", err))
		}
		ch.s2kparams = hex.EncodeToString(e.s2kparams)
	}
	return ch, nil
}

// usable reports whether an enctype offered by the KDC can be used.
func (c *Client) usable(etype int32) bool {
	for _, e := range c.etypes {
		if e == etype {
			return c.creds.hasEtype(etype)
		}
	}
	return false
}

// maxLTSched bounds the long-term key schedules a Client keeps.
const maxLTSched = 16

// schedule returns the usage-1 and usage-3 schedules of a long-term key,
// deriving them on first use.
func (c *Client) schedule(k ltKey) (*ltSched, error) {
	for i := range c.lt {
		if c.lt[i].key == &k.key[0] && c.lt[i].etype == k.etype {
			return &c.lt[i], nil
		}
	}
	et := lookupEtype(k.etype)
	ts, err := newUsageKey(et, k.key, keyusage.AS_REQ_PA_ENC_TIMESTAMP, false)
	if err != nil {
		return nil, err
	}
	rep, err := newUsageKey(et, k.key, keyusage.AS_REP_ENCPART, false)
	if err != nil {
		return nil, err
	}
	if len(c.lt) >= maxLTSched {
		// Password keys differ per KDC-chosen salt and parameters; keep the
		// schedules of the few in use, not of every one ever announced.
		c.lt = c.lt[:0]
	}
	c.lt = append(c.lt, ltSched{key: &k.key[0], etype: k.etype, ts: ts, rep: rep})
	return &c.lt[len(c.lt)-1], nil
}

// s2kCtx bounds a string-to-key: the login's context, or none outside one.
func (c *Client) s2kCtx() context.Context {
	if c.loginCtx != nil {
		return c.loginCtx
	}
	return context.Background()
}

// s2kError classifies a failed key lookup: only string-to-key fails, on the
// KDC's salt or parameters, or because the login's deadline passed.
func (c *Client) s2kError(phase string, err error) *Error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return c.netError(c.s2kCtx(), phase, err)
	}
	return wrapError(ClassMalformedReply, phase, err)
}

// buildASReq encodes an AS-REQ into c.w: the patched body template, and a
// PA-ENC-TIMESTAMP made with the chosen key or the SPAKE padata when choice
// is set.
func (c *Client) buildASReq(choice *preauthChoice, now time.Time) error {
	w := &c.w
	w.Reset()
	m := w.Len()
	w.Raw(c.asBody.body)
	w.Close(der.Ctx(4), m)
	if choice != nil && choice.spake != spakeOff {
		if err := c.appendSPAKEPadata(choice, c.asBody.body); err != nil {
			return err
		}
	} else if choice != nil {
		k, ok, err := c.creds.keyForCtx(c.s2kCtx(), choice.etype, 0, choice.salt, choice.s2kparams)
		if err != nil {
			return c.s2kError(PhaseASRep, err)
		}
		if !ok {
			return errorf(ClassKeytab, PhaseASRep, "no %s key", EtypeName(choice.etype))
		}
		s, err := c.schedule(k)
		if err != nil {
			return wrapError(ClassKeytab, PhaseASRep, err)
		}
		// PA-ENC-TS-ENC ::= SEQUENCE { patimestamp [0] KerberosTime, pausec [1] Microseconds }
		a := &c.aux
		a.Reset()
		var ts [15]byte
		c.nowT.format(&ts, now)
		a.ExplicitInt(1, int64(now.Nanosecond()/1000))
		a.ExplicitTime(0, &ts)
		a.Close(der.TagSequence, 0)
		c.ct = s.ts.seal(c.ct[:0], a.Bytes(), c.rng)
		pm := w.Len()
		w.encryptedData(k.etype, 0, c.ct)
		w.padata(pm, patype.PA_ENC_TIMESTAMP)
	}
	w.kdcReq(m, msgtype.KRB_AS_REQ, appASReq)
	return nil
}

// padata wraps what was written since mark as the value of the one PA-DATA
// of a KDC-REQ: padata [3] SEQUENCE OF PA-DATA { padata-type [1], padata-value [2] }.
func (w *derWriter) padata(mark int, typ int32) {
	w.Close(der.TagOctetString, mark)
	w.Close(der.Ctx(2), mark)
	w.ExplicitInt(1, int64(typ))
	w.Close(der.TagSequence, mark) // PA-DATA
	w.Close(der.TagSequence, mark) // SEQUENCE OF PA-DATA
	w.Close(der.Ctx(3), mark)
}

// kdcReq closes a KDC-REQ whose padata and req-body were written since mark:
// [APPLICATION tag] SEQUENCE { pvno [1] 5, msg-type [2], padata [3], req-body [4] }.
func (w *derWriter) kdcReq(mark int, msgType int, tag int) {
	w.ExplicitInt(2, int64(msgType))
	w.ExplicitInt(1, 5)
	w.Close(der.TagSequence, mark)
	w.Close(der.App(tag), mark)
}

// openReply decrypts a reply's encrypted part into c.pt. An integrity
// failure means the wrong key (ClassDecrypt); anything else is malformed.
func (c *Client) openReply(u *usageKey, cipher []byte, phase, what string) ([]byte, error) {
	c.ensurePT(len(cipher))
	pt, err := u.open(c.pt[:0], cipher)
	switch {
	case err == errIntegrity:
		return nil, wrapError(ClassDecrypt, phase, fmt.Errorf("%s: %w", what, err))
	case err != nil:
		return nil, wrapError(ClassMalformedReply, phase, fmt.Errorf("%s: %w", what, err))
	}
	return pt, nil
}

// encryptedData prepends EncryptedData { etype [0], kvno [1] OPTIONAL, cipher [2] }.
func (w *derWriter) encryptedData(etype int32, kvno uint32, cipher []byte) {
	m := w.Len()
	w.ExplicitOctets(2, cipher)
	if kvno != 0 {
		w.ExplicitInt(1, int64(kvno))
	}
	w.ExplicitInt(0, int64(etype))
	w.Close(der.TagSequence, m)
}

// acceptASRep decrypts and checks an AS-REP and keeps its TGT.
func (c *Client) acceptASRep(reply []byte, choice *preauthChoice, phase string, res *ASResult) error {
	received := time.Now()
	var rep kdcRep
	if err := parseKDCRep(reply, appASRep, &rep); err != nil {
		return wrapError(ClassMalformedReply, phase, err)
	}
	salt, params := "", ""
	if choice != nil && choice.etype == rep.enc.etype {
		salt, params = choice.salt, choice.s2kparams
	} else if rep.padata != nil {
		// The reply key's salt, if the KDC tells (needed for passwords only).
		e, ok, err := findEtypeInfo2(rep.padata, true, func(e int32) bool { return e == rep.enc.etype })
		if err != nil {
			return wrapError(ClassMalformedReply, phase, err)
		}
		if ok && e.hasSalt {
			salt = string(e.salt)
		}
		if ok && e.hasS2K {
			if err := checkS2KParams(e.etype, e.s2kparams, c.maxS2K); err != nil {
				return wrapError(ClassMalformedReply, phase, fmt.Errorf("AS-REP ETYPE-INFO2: %w", err))
			}
			params = hex.EncodeToString(e.s2kparams)
		}
	}
	if lookupEtype(rep.enc.etype) == nil {
		return errorf(ClassMalformedReply, phase, "AS-REP encrypted with unsupported %s", EtypeName(rep.enc.etype))
	}
	k, ok, err := c.creds.keyForCtx(c.s2kCtx(), rep.enc.etype, rep.enc.kvno, salt, params)
	if err != nil {
		return c.s2kError(phase, err)
	}
	if !ok {
		return errorf(ClassKeytab, phase, "AS-REP encrypted with %s, for which the client has no key", EtypeName(rep.enc.etype))
	}
	s, err := c.schedule(k)
	if err != nil {
		return wrapError(ClassKeytab, phase, err)
	}
	replyKey := s.rep
	if choice != nil && choice.spake == spakeResponse {
		// SPAKE replaced the reply key with K'[0].
		if rep.enc.etype != choice.etype {
			return errorf(ClassMalformedReply, phase, "SPAKE AS-REP encrypted with %s, the challenge was for %s", EtypeName(rep.enc.etype), EtypeName(choice.etype))
		}
		replyKey = &c.sp.k0.u
	}
	pt, err := c.openReply(replyKey, rep.enc.cipher, phase, "AS-REP (wrong or stale key?)")
	if err != nil {
		return err
	}
	var ep encRepPart
	if err := parseEncRepPart(pt, &ep); err != nil {
		return wrapError(ClassMalformedReply, phase, fmt.Errorf("EncASRepPart: %w", err))
	}
	if !c.anyNonce && ep.nonce != c.asNonce {
		return errorf(ClassMalformedReply, phase, "AS-REP nonce %d does not match the request's %d", ep.nonce, c.asNonce)
	}
	c.lastNonce = ep.nonce
	res.Etypes = Etypes{Reply: rep.enc.etype, Ticket: rep.ticketEtype, Session: ep.keyType}
	if !res.HasClockOffset {
		res.ClockOffset, res.HasClockOffset = authtimeOffset(ep.authtime, c.sentWall, res.ASRep), true
	}
	c.tgt.set(&rep, &ep, received)
	if c.log != nil {
		c.debug("msg", "TGT issued", "phase", phase, "rep_etype", EtypeName(res.Etypes.Reply),
			"tkt_etype", EtypeName(res.Etypes.Ticket), "ses_etype", EtypeName(res.Etypes.Session),
			"lifetime", ep.endtime.Sub(ep.authtime), "clock_offset", res.ClockOffset)
	}
	return nil
}

// EncodeLogin appends an AS-REQ for the Client's principal to dst without
// sending it: without pre-authentication (a login's first round trip), or
// with PA-ENC-TIMESTAMP made with the key the last PREAUTH_REQUIRED seen by
// OpenLoginReply asked for. A load generator that keeps many logins in
// flight on one socket sends them itself.
func (c *Client) EncodeLogin(dst []byte, preauth bool) ([]byte, int64, error) {
	gen, err := c.creds.refresh(time.Now())
	if err != nil {
		return dst, 0, wrapError(ClassKeytab, PhaseKeys, err)
	}
	if gen != c.ltGen {
		c.lt, c.ltGen = c.lt[:0], gen
	}
	var choice *preauthChoice
	if preauth {
		if !c.hasChoice {
			return dst, 0, errorf(ClassKeytab, PhaseKeys, "no PREAUTH_REQUIRED seen yet: no key chosen")
		}
		choice = &c.choice
	}
	now := c.now()
	nonce := c.patch(&c.asBody, now)
	c.sentWall = now
	if err := c.buildASReq(choice, now); err != nil {
		return dst, 0, err
	}
	return append(dst, c.w.Bytes()...), nonce, nil
}

// OpenLoginReply reads a reply to a request of EncodeLogin. A
// PREAUTH_REQUIRED error (the first round trip's answer; it carries no
// nonce) returns preauthRequired and remembers the key it asks for; an
// AS-REP is decrypted with the Client's key, its TGT kept, and its nonce
// returned, which says which request it answers. Any other KRB-ERROR is an
// *Error.
func (c *Client) OpenLoginReply(reply []byte) (nonce int64, preauthRequired bool, err error) {
	switch {
	case len(reply) == 0:
		return 0, false, errorf(ClassMalformedReply, PhaseASRep, "empty reply")
	case reply[0] == der.App(appKRBError):
		if err := parseKRBError(reply, &c.kerr); err != nil {
			return 0, false, wrapError(ClassMalformedReply, PhaseASRep, err)
		}
		if c.kerr.code != errorcode.KDC_ERR_PREAUTH_REQUIRED {
			return 0, false, kdcError(PhaseASRep, c.kerr.code, string(c.kerr.text))
		}
		ch, err := c.choosePreauth(PhasePreauthRequired)
		if err != nil {
			return 0, true, err
		}
		c.choice, c.hasChoice = ch, true
		return 0, true, nil
	case reply[0] != der.App(appASRep):
		return 0, false, errorf(ClassMalformedReply, PhaseASRep, "unexpected message 0x%02x", reply[0])
	}
	var choice *preauthChoice
	if c.hasChoice {
		choice = &c.choice
	}
	var res ASResult
	c.anyNonce = true
	err = c.acceptASRep(reply, choice, PhaseASRep, &res)
	c.anyNonce = false
	return c.lastNonce, false, err
}
