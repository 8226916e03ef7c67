package krb5

import (
	"errors"
	"fmt"
	"slices"

	"github.com/jcmturner/gokrb5/v8/iana/keyusage"

	"github.com/krb5-exporter/krb5-exporter/internal/der"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5/spake"
)

// SPAKE pre-authentication in the AS exchange, as MIT's client does it
// (src/plugins/preauth/spake/spake_client.c). Without the KDC's optimistic
// challenge a login takes three round trips:
//
//	AS-REQ                              → PREAUTH_REQUIRED (METHOD-DATA: PA-SPAKE empty, PA-FX-COOKIE)
//	AS-REQ PA-FX-COOKIE, PA-SPAKE support  → MORE_PREAUTH_DATA_REQUIRED (PA-SPAKE challenge, PA-FX-COOKIE)
//	AS-REQ PA-FX-COOKIE, PA-SPAKE response → AS-REP encrypted with K'[0]
//
// With `spake_preauth_kdc_challenge` the first error carries the challenge
// and the support round trip is skipped. The KDC keeps its SPAKE state in
// the cookie, which is echoed back verbatim.

// PreauthMode selects how a login pre-authenticates.
type PreauthMode string

// The pre-authentication modes of a module.
const (
	PreauthAuto         PreauthMode = "auto"                // SPAKE when the KDC offers it, else encrypted timestamp (kinit's choice)
	PreauthSPAKE        PreauthMode = "spake"               // SPAKE only; a KDC without it fails the login
	PreauthEncTimestamp PreauthMode = "encrypted_timestamp" // PA-ENC-TIMESTAMP only
)

// ParsePreauthMode checks a mode name; "" is auto.
func ParsePreauthMode(s string) (PreauthMode, error) {
	switch m := PreauthMode(s); m {
	case "":
		return PreauthAuto, nil
	case PreauthAuto, PreauthSPAKE, PreauthEncTimestamp:
		return m, nil
	}
	return "", fmt.Errorf("unknown preauth mode %q (auto, spake or encrypted_timestamp)", s)
}

// Methods a login uses, as reported in ASResult.Method (a bounded label;
// set once the method is chosen, so failed logins report it too).
const (
	MethodNone         = "none" // the principal needs no pre-authentication
	MethodEncTimestamp = "encrypted_timestamp"
	MethodSPAKE        = "spake"
)

// PhaseSPAKEChallenge is the round trip that sends the SPAKE support message
// and is answered by the KDC's challenge (MORE_PREAUTH_DATA_REQUIRED).
const PhaseSPAKEChallenge = "spake_challenge"

// ClassPreauthUnsupported means the module requires a pre-authentication
// method the KDC does not offer: SPAKE absent, or no SPAKE group or second
// factor in common.
const ClassPreauthUnsupported = "preauth_unsupported"

// kdcErrMorePreauthDataRequired is KDC_ERR_MORE_PREAUTH_DATA_REQUIRED (RFC
// 6113), which gokrb5 does not define.
const kdcErrMorePreauthDataRequired = 91

// Padata types the engine handles besides PA-ENC-TIMESTAMP and ETYPE-INFO2.
const (
	paFXCookie = 133
	paSPAKE    = spake.PADataType
)

// spakeStage is where a SPAKE login stands.
type spakeStage uint8

const (
	spakeOff      spakeStage = iota // encrypted timestamp
	spakeSupport                    // the next request carries the support message
	spakeResponse                   // the next request carries the response
)

// method names the pre-authentication of a choice.
func (ch *preauthChoice) method() string {
	if ch.spake != spakeOff {
		return MethodSPAKE
	}
	return MethodEncTimestamp
}

// spakeState is a Client's SPAKE scratch, reused across logins.
type spakeState struct {
	support   []byte // the encoded support message (constant)
	cookie    []byte // the KDC's last PA-FX-COOKIE, echoed in the next request
	msg       []byte // the PA-SPAKE message of the request being built
	factor    []byte // the encoded SPAKESecondFactor (constant)
	kbuf      []byte // K'[n]
	ex        spake.Exchange
	key       *spake.Key // the prepared key of this login
	k0, k1    *freshKey  // K'[0] (usage 3: the AS-REP) and K'[1] (usage 65: the factor)
	hasCookie bool
}

func newSPAKEState() spakeState {
	return spakeState{
		support: spake.AppendSupport(nil, spake.Groups...),
		factor:  spake.AppendFactorNone(nil),
		cookie:  make([]byte, 0, 256),
		msg:     make([]byte, 0, 256),
		kbuf:    make([]byte, 0, 32),
	}
}

// methodData finds PA-SPAKE and PA-FX-COOKIE in METHOD-DATA (a KRB-ERROR's
// e-data); their values slice b.
func methodData(b []byte) (spakeVal []byte, hasSPAKE bool, cookie []byte, hasCookie bool, err error) {
	seq, _, err := der.Expect(b, der.TagSequence)
	if err != nil {
		return nil, false, nil, false, err
	}
	for len(seq) > 0 {
		typ, val, rest, err := nextPAData(seq)
		if err != nil {
			return nil, false, nil, false, err
		}
		seq = rest
		switch typ {
		case paSPAKE:
			spakeVal, hasSPAKE = val, true
		case paFXCookie:
			cookie, hasCookie = val, true
		}
	}
	return spakeVal, hasSPAKE, cookie, hasCookie, nil
}

// pickMethod decides, from the PREAUTH_REQUIRED error in c.kerr, how the
// next request pre-authenticates, and takes the KDC's optimistic challenge
// when there is one.
func (c *Client) pickMethod(choice *preauthChoice, phase string) error {
	choice.spake = spakeOff
	if c.preauth == PreauthEncTimestamp {
		return nil
	}
	var val, cookie []byte
	var offered, hasCookie bool
	if len(c.kerr.edata) > 0 {
		var err error
		if val, offered, cookie, hasCookie, err = methodData(c.kerr.edata); err != nil {
			return wrapError(ClassMalformedReply, phase, fmt.Errorf("PREAUTH_REQUIRED e-data: %w", err))
		}
	}
	if !offered {
		if c.preauth == PreauthSPAKE {
			return errorf(ClassPreauthUnsupported, phase, "the KDC does not offer SPAKE pre-authentication")
		}
		return nil
	}
	s := &c.sp
	s.cookie, s.hasCookie = append(s.cookie[:0], cookie...), hasCookie
	choice.spake = spakeSupport
	if len(val) == 0 {
		return nil // SPAKE offered without a challenge: send support
	}
	return c.takeChallenge(choice, val, phase, false)
}

// takeChallenge processes a PA-SPAKE challenge; a challenge in a group we
// lack is answered with a support message once, as MIT does. A challenge
// the client cannot use ends SPAKE for this login (spakeFailed).
func (c *Client) takeChallenge(choice *preauthChoice, msg []byte, phase string, afterSupport bool) error {
	s := &c.sp
	var ch spake.Challenge
	if err := spake.ParseChallenge(msg, &ch); err != nil {
		return c.spakeFailed(choice, wrapError(ClassMalformedReply, phase, fmt.Errorf("SPAKE challenge: %w", err)))
	}
	if !spake.Supported(ch.Group) {
		if afterSupport {
			return c.spakeFailed(choice, errorf(ClassPreauthUnsupported, phase, "the KDC chose SPAKE group %s, which the client did not offer", spake.GroupName(ch.Group)))
		}
		choice.spake = spakeSupport
		return nil
	}
	key, err := c.spakeKey(choice, ch.Group, phase)
	if err != nil {
		return err // the long-term key: encrypted timestamp would fail too
	}
	s.key = key
	var rnd [32]byte
	_, _ = c.rng.Read(rnd[:]) // never fails
	var support []byte
	if afterSupport {
		support = s.support
	}
	err = s.ex.Challenge(s.key, support, msg, &ch, &rnd)
	clear(rnd[:])
	switch {
	case errors.Is(err, spake.ErrNoFactor):
		return c.spakeFailed(choice, wrapError(ClassPreauthUnsupported, phase, err))
	case err != nil:
		return c.spakeFailed(choice, wrapError(ClassMalformedReply, phase, fmt.Errorf("SPAKE challenge: %w", err)))
	}
	choice.spake = spakeResponse
	return nil
}

// spakeFailed handles a KDC challenge the client cannot use (err, already
// classified: it does not decode, its public key is no group element, it
// offers no SF-NONE factor, or it is in a group the client did not offer).
// MIT's SPAKE module then fails, and libkrb5 goes on with the next real
// pre-authentication type of the PREAUTH_REQUIRED METHOD-DATA, encrypted
// timestamp (preauth2.c process_pa_data; after the support round trip
// get_in_tkt.c retries the method data of the first error): auto does the
// same, in the same round trips as kinit; spake fails with err.
func (c *Client) spakeFailed(choice *preauthChoice, err error) error {
	if c.preauth == PreauthSPAKE {
		return err
	}
	c.debug("msg", "SPAKE challenge not usable, falling back to encrypted timestamp as kinit does", "err", err)
	choice.spake = spakeOff
	return nil
}

// takeMoreData handles the MORE_PREAUTH_DATA_REQUIRED answer to a support
// message: its METHOD-DATA holds the challenge and a new cookie.
func (c *Client) takeMoreData(choice *preauthChoice, phase string) error {
	val, offered, cookie, hasCookie, err := methodData(c.kerr.edata)
	if err != nil {
		return wrapError(ClassMalformedReply, phase, fmt.Errorf("MORE_PREAUTH_DATA_REQUIRED e-data: %w", err))
	}
	if !offered || len(val) == 0 {
		return c.spakeFailed(choice, errorf(ClassMalformedReply, phase, "MORE_PREAUTH_DATA_REQUIRED without a SPAKE challenge"))
	}
	s := &c.sp
	s.cookie, s.hasCookie = append(s.cookie[:0], cookie...), hasCookie
	return c.takeChallenge(choice, val, phase, true)
}

// spakeKey returns the SPAKE form of the long-term key of the choice in
// group, prepared once per key and group (w, w·M, w·N).
func (c *Client) spakeKey(choice *preauthChoice, group int32, phase string) (*spake.Key, error) {
	k, ok, err := c.creds.keyForCtx(c.s2kCtx(), choice.etype, 0, choice.salt, choice.s2kparams)
	if err != nil {
		return nil, c.s2kError(phase, err)
	}
	if !ok {
		return nil, errorf(ClassKeytab, phase, "no %s key", EtypeName(choice.etype))
	}
	sc, err := c.schedule(k)
	if err != nil {
		return nil, wrapError(ClassKeytab, phase, err)
	}
	i := slices.Index(spake.Groups, group)
	if sc.spake[i] == nil {
		if sc.spake[i], err = spake.NewKey(k.etype, k.key, group); err != nil {
			return nil, wrapError(ClassKeytab, phase, err)
		}
	}
	return sc.spake[i], nil
}

// appendSPAKEPadata writes the padata of a SPAKE request (PA-FX-COOKIE, then
// PA-SPAKE, as MIT orders them) in front of the req-body already in w. The
// response's K'[n] are bound to reqBody, the body of this request.
func (c *Client) appendSPAKEPadata(choice *preauthChoice, reqBody []byte) error {
	s := &c.sp
	switch choice.spake {
	case spakeSupport:
		s.msg = append(s.msg[:0], s.support...)
	case spakeResponse:
		if et := lookupEtype(choice.etype); s.k0 == nil || s.k0.et != et {
			s.k0 = newFreshKey(et, keyusage.AS_REP_ENCPART)
			s.k1 = newFreshKey(et, spake.KeyUsage)
		}
		var err error
		if s.kbuf, err = s.ex.DeriveKey(s.kbuf[:0], reqBody, 1); err == nil {
			err = s.k1.set(s.kbuf)
		}
		if err != nil {
			return wrapError(ClassKeytab, PhaseASRep, err)
		}
		c.ct = s.k1.u.seal(c.ct[:0], s.factor, c.rng)
		s.msg = spake.AppendResponse(s.msg[:0], s.ex.Public(), choice.etype, c.ct)
		if s.kbuf, err = s.ex.DeriveKey(s.kbuf[:0], reqBody, 0); err == nil {
			err = s.k0.set(s.kbuf)
		}
		clear(s.kbuf)
		if err != nil {
			return wrapError(ClassKeytab, PhaseASRep, err)
		}
	}
	w := &c.w
	m := w.Len()
	w.paData(paSPAKE, s.msg)
	if s.hasCookie {
		w.paData(paFXCookie, s.cookie)
	}
	w.Close(der.TagSequence, m) // SEQUENCE OF PA-DATA
	w.Close(der.Ctx(3), m)
	return nil
}

// paData prepends one PA-DATA { padata-type [1], padata-value [2] }.
func (w *derWriter) paData(typ int32, value []byte) {
	m := w.Len()
	w.ExplicitOctets(2, value)
	w.ExplicitInt(1, int64(typ))
	w.Close(der.TagSequence, m)
}
