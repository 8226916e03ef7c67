package krb5

import (
	"bytes"
	"fmt"

	"github.com/jcmturner/gokrb5/v8/iana/errorcode"

	"github.com/krb5-exporter/krb5-exporter/internal/der"
)

// Logins in flight: message-level calls for a load generator that keeps
// many logins of one Client in flight on one socket and sends the
// requests itself (package bench). Each login is what a fresh `kinit -k`
// does, with the Client's PreauthMode: a first AS-REQ without
// pre-authentication, then PA-ENC-TIMESTAMP or SPAKE (support and
// response) as the KDC's answers ask.
//
// A KRB-ERROR carries no nonce, so the caller gives the answer to the
// request waiting longest for that kind of answer (the KDC answers in
// order); what the error says (the key, the SPAKE challenge and cookie)
// goes into the next request at once. An AS-REP carries its nonce inside
// the encrypted part, and a SPAKE AS-REP is encrypted with the K'[0] of
// its own exchange: the caller tries the waiting logins in order
// (OpenLoginFlight fails with ClassDecrypt on the wrong one).

// LoginStage is what the last request of a login in flight carried, and
// so which answer it waits for.
type LoginStage uint8

// Stages of a login in flight.
const (
	StageFirst     LoginStage = iota // no pre-authentication: waits for PREAUTH_REQUIRED
	StageTimestamp                   // PA-ENC-TIMESTAMP: waits for the AS-REP
	StageSupport                     // SPAKE support: waits for MORE_PREAUTH_DATA_REQUIRED
	StageResponse                    // SPAKE response: waits for the AS-REP
)

// LoginFlight is the client's state of one login in flight: its stage and,
// after a SPAKE response, the reply key K'[0] of its own exchange.
type LoginFlight struct {
	Stage LoginStage
	Nonce int64 // of the last request
	k0    *freshKey
}

// LoginReply is the kind of a reply to a login in flight.
type LoginReply uint8

// Kinds of replies.
const (
	ReplyASRep           LoginReply = iota // open it with OpenLoginFlight
	ReplyPreauthRequired                   // answers a StageFirst request
	ReplyMoreData                          // answers a StageSupport request
)

// ReadLoginReply reads a reply to a login in flight. A KRB-ERROR asking for
// pre-authentication is taken in (key and method chosen, SPAKE challenge
// processed) for the next EncodeLoginNext; any other KRB-ERROR is an *Error.
func (c *Client) ReadLoginReply(reply []byte) (LoginReply, error) {
	switch {
	case len(reply) == 0:
		return 0, errorf(ClassMalformedReply, PhaseASRep, "empty reply")
	case reply[0] == der.App(appASRep):
		return ReplyASRep, nil
	case reply[0] != der.App(appKRBError):
		return 0, errorf(ClassMalformedReply, PhaseASRep, "unexpected message 0x%02x", reply[0])
	}
	if err := parseKRBError(reply, &c.kerr); err != nil {
		return 0, wrapError(ClassMalformedReply, PhaseASRep, err)
	}
	switch c.kerr.code {
	case errorcode.KDC_ERR_PREAUTH_REQUIRED:
		ch, err := c.flightPreauth()
		if err != nil {
			return ReplyPreauthRequired, err
		}
		if err := c.pickMethod(&ch, PhasePreauthRequired); err != nil {
			return ReplyPreauthRequired, err
		}
		c.choice, c.hasChoice = ch, true
		return ReplyPreauthRequired, nil
	case kdcErrMorePreauthDataRequired:
		if !c.hasChoice {
			return ReplyMoreData, errorf(ClassMalformedReply, PhaseSPAKEChallenge, "MORE_PREAUTH_DATA_REQUIRED before any PREAUTH_REQUIRED")
		}
		// It answers some login's support message (other logins may have
		// moved the Client's choice on since): the challenge follows.
		c.choice.spake = spakeSupport
		if err := c.takeMoreData(&c.choice, PhaseSPAKEChallenge); err != nil {
			return ReplyMoreData, err
		}
		return ReplyMoreData, nil
	}
	return 0, kdcError(PhaseASRep, c.kerr.code, string(c.kerr.text))
}

// flightPreauth is choosePreauth for the PREAUTH_REQUIRED in c.kerr,
// remembered: a KDC sends the same METHOD-DATA in every PREAUTH_REQUIRED
// to one principal (MIT: ETYPE-INFO2, the methods offered), so a load of
// logins reads the same e-data each time. One byte for byte the last one
// read, with the same keys (the Credentials' generation), makes the same
// choice: the ETYPE-INFO2 walk, the S2K parameter check and their hex
// are done again only when the e-data or the keys change. (A SPAKE
// challenge or cookie in the e-data is still taken by pickMethod each
// time.)
func (c *Client) flightPreauth() (preauthChoice, error) {
	gen := c.creds.gen()
	if c.pc.ok && c.pc.gen == gen && bytes.Equal(c.pc.edata, c.kerr.edata) {
		return c.pc.choice, nil
	}
	ch, err := c.choosePreauth(PhasePreauthRequired)
	c.pc.ok = err == nil
	if err == nil {
		c.pc.edata, c.pc.gen, c.pc.choice = append(c.pc.edata[:0], c.kerr.edata...), gen, ch
	}
	return ch, err
}

// preauthCache is the last choice flightPreauth made and what it was made
// from.
type preauthCache struct {
	ok     bool
	gen    uint64 // Credentials generation
	edata  []byte // the PREAUTH_REQUIRED's e-data
	choice preauthChoice
}

// EncodeLoginFirst appends the first AS-REQ of a new login (no
// pre-authentication) to dst and sets f's stage and nonce.
func (c *Client) EncodeLoginFirst(dst []byte, f *LoginFlight) ([]byte, error) {
	dst, nonce, err := c.EncodeLogin(dst, false)
	if err == nil {
		f.Stage, f.Nonce = StageFirst, nonce
	}
	return dst, err
}

// EncodeLoginNext appends the next AS-REQ of login f, as the last reply
// read by ReadLoginReply asked (PA-ENC-TIMESTAMP, SPAKE support or SPAKE
// response), to dst: once per reply read. After a SPAKE response f keeps
// its K'[0].
func (c *Client) EncodeLoginNext(dst []byte, f *LoginFlight) ([]byte, error) {
	if !c.hasChoice {
		return dst, errorf(ClassKeytab, PhaseKeys, "no PREAUTH_REQUIRED seen yet: no key chosen")
	}
	stage := StageTimestamp
	switch c.choice.spake {
	case spakeSupport:
		stage = StageSupport
	case spakeResponse:
		stage = StageResponse
		// The response derives K'[0] into the Client's key: lend it f's
		// (allocated once per flight, then reused).
		c.sp.k0, f.k0 = f.k0, c.sp.k0
	}
	dst, nonce, err := c.EncodeLogin(dst, true)
	if stage == StageResponse {
		c.sp.k0, f.k0 = f.k0, c.sp.k0
		// One challenge, one response: the next response needs the next
		// challenge (ReadLoginReply).
		c.choice.spake = spakeOff
	}
	if err == nil {
		f.Stage, f.Nonce = stage, nonce
	}
	return dst, err
}

// OpenLoginFlight decrypts an AS-REP (ReplyASRep) as the answer to login f
// and keeps its TGT: with the Client's long-term key after
// PA-ENC-TIMESTAMP, with f's K'[0] after a SPAKE response. It returns the
// nonce inside, which says which request it answers; a SPAKE AS-REP of
// another login fails with ClassDecrypt.
func (c *Client) OpenLoginFlight(reply []byte, f *LoginFlight) (int64, error) {
	ch := preauthChoice{etype: c.choice.etype, salt: c.choice.salt, s2kparams: c.choice.s2kparams}
	if f.Stage == StageResponse {
		if f.k0 == nil {
			return 0, errorf(ClassMalformedReply, PhaseASRep, "no SPAKE reply key for this login")
		}
		ch.etype, ch.spake = f.k0etype(), spakeResponse
		c.sp.k0, f.k0 = f.k0, c.sp.k0
		defer func() { c.sp.k0, f.k0 = f.k0, c.sp.k0 }()
	}
	var res ASResult
	c.anyNonce = true
	err := c.acceptASRep(reply, &ch, PhaseASRep, &res)
	c.anyNonce = false
	return c.lastNonce, err
}

// k0etype is the enctype of f's K'[0].
func (f *LoginFlight) k0etype() int32 {
	if f.k0 == nil || f.k0.et == nil {
		return 0
	}
	return f.k0.et.id
}

// SPAKERefused handles err, the answer to the SPAKE support message of a
// login in flight. PREAUTH_FAILED there is the KDC sharing no SPAKE group
// with the client: under PreauthAuto the next EncodeLoginNext sends
// PA-ENC-TIMESTAMP instead, as kinit (and Login) do, and it returns
// (true, nil); under PreauthSPAKE the login fails with
// ClassPreauthUnsupported. Any other error is returned as it is.
func (c *Client) SPAKERefused(err error) (fallback bool, _ error) {
	pe, ok := err.(*Error)
	if !ok || pe.Code != errorcode.KDC_ERR_PREAUTH_FAILED || !c.hasChoice {
		return false, err
	}
	if c.preauth == PreauthSPAKE {
		return false, wrapError(ClassPreauthUnsupported, PhaseSPAKEChallenge, fmt.Errorf("the KDC supports none of the client's SPAKE groups (edwards25519, P-256): %w", err))
	}
	c.choice.spake = spakeOff
	return true, nil
}

// TGT is a ticket-granting ticket held apart from its Client: sessions in
// flight on one Client (a login, then service tickets with that login's
// TGT) each keep their own. A Client has one TGT at a time, the one
// EncodeServiceTicket and OpenServiceTicketReply use and OpenLoginFlight
// replaces: SwapTGT moves the TGT of the login just opened into its
// session, and a session's TGT in and out around those calls. A TGS-REP
// is encrypted with the session key of the TGT its request carried:
// opened with another, OpenServiceTicketReply fails with ClassDecrypt.
type TGT struct{ t tgtState }

// SwapTGT exchanges the Client's TGT with t (no copy: each keeps its own
// buffers and key schedules).
func (c *Client) SwapTGT(t *TGT) { c.tgt, t.t = t.t, c.tgt }

// OK reports whether t holds a usable TGT.
func (t *TGT) OK() bool { return t.t.ok }
