package krb5

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"time"

	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/iana/msgtype"

	"github.com/krb5-exporter/krb5-exporter/internal/der"
)

// The password-change probe (RFC 3244, MIT's kpasswd on port 464): the
// Client logs in for kadmin/changepw (Options.ASService), as kpasswd does,
// and sends kadmind a request whose AP-REQ is genuine and whose KRB-PRIV
// carries no ciphertext at all. kadmind verifies the AP-REQ (krb5_rd_req
// with the kadmin/changepw key), builds its AP-REP, fails to decrypt the
// KRB-PRIV and answers KRB5_KPASSWD_HARDERROR "Failed decrypting request"
// inside a KRB-PRIV sealed with the session key (MIT src/kadmin/server/
// schpw.c, chpwfail). No password can change: there is none in the request.
//
// A healthy kadmind is one whose reply carries an AP-REP that decrypts with
// the ticket's session key and echoes the authenticator's time (only the
// holder of the kadmin/changepw key can make it), and a KRB-PRIV that
// decrypts and says HARDERROR. Anything else fails: a KRB-ERROR (kadmind
// could not verify the AP-REQ: KPASSWD_AUTHERROR, ...), another result
// code, or a reply that does not parse (malformed_reply).

// PhaseKpasswd is the round trip with kadmind's password-change service.
const PhaseKpasswd = "kpasswd"

// RFC 3244 result codes.
const (
	KpasswdSuccess           = 0
	KpasswdMalformed         = 1
	KpasswdHardError         = 2
	KpasswdAuthError         = 3
	KpasswdSoftError         = 4
	KpasswdAccessDenied      = 5
	KpasswdBadVersion        = 6
	KpasswdInitialFlagNeeded = 7
)

// kpasswdNames are the result classes of the codes: a bounded label set.
var kpasswdNames = map[int]string{
	KpasswdSuccess:           "KPASSWD_SUCCESS",
	KpasswdMalformed:         "KPASSWD_MALFORMED",
	KpasswdHardError:         "KPASSWD_HARDERROR",
	KpasswdAuthError:         "KPASSWD_AUTHERROR",
	KpasswdSoftError:         "KPASSWD_SOFTERROR",
	KpasswdAccessDenied:      "KPASSWD_ACCESSDENIED",
	KpasswdBadVersion:        "KPASSWD_BAD_VERSION",
	KpasswdInitialFlagNeeded: "KPASSWD_INITIAL_FLAG_NEEDED",
}

// KpasswdResultName is the class of a kpasswd result code, KPASSWD_UNKNOWN
// for one RFC 3244 does not define.
func KpasswdResultName(code int) string {
	if n, ok := kpasswdNames[code]; ok {
		return n
	}
	return "KPASSWD_UNKNOWN"
}

// Application tags of the kpasswd messages.
const (
	appAPRep          = 15
	appKRBPriv        = 21
	appEncAPRepPart   = 27
	appEncKrbPrivPart = 28
)

// maxKpasswdText bounds the result string kept from kadmind's reply.
const maxKpasswdText = 256

// KpasswdResult describes one password-change probe exchange.
type KpasswdResult struct {
	Duration time.Duration // the round trip with kadmind plus the client's own work
	Code     int           // kadmind's result code (KpasswdHardError when healthy)
	Text     string        // kadmind's result string, cut at 256 bytes
	Etype    int32         // the enctype of the AP-REP (the ticket's session key)
}

// Kpasswd sends the password-change probe to kadmind's kpasswd service at
// addr over tr, with the ticket of the last Login (which must have asked for
// kadmin/changepw). It never resends over UDP: kadmind's replay cache would
// refuse the copy.
func (c *Client) Kpasswd(ctx context.Context, addr string, tr Transport) (KpasswdResult, error) {
	var res KpasswdResult
	start := time.Now()
	err := c.kpasswd(ctx, addr, tr, &res)
	res.Duration = time.Since(start)
	return res, err
}

func (c *Client) kpasswd(ctx context.Context, addr string, tr Transport, res *KpasswdResult) error {
	t := &c.tgt
	if !t.ok {
		return errorf(ClassMalformedReply, PhaseKpasswd, "no kadmin/changepw ticket: log in first")
	}
	et := lookupEtype(t.keyType)
	auth, err := newUsageKey(et, t.key, keyusage.AP_REQ_AUTHENTICATOR, false)
	if err != nil {
		return wrapError(ClassMalformedReply, PhaseKpasswd, err)
	}
	now := c.now()
	c.sealAuthenticator(auth, now, nil, nil)

	// KRB-PRIV ::= [APPLICATION 21] SEQUENCE { pvno [0], msg-type [1],
	//   enc-part [3] EncryptedData }, with an empty ciphertext: nothing
	//   kadmind can decrypt, so nothing it can act on.
	w := &c.w
	w.Reset()
	pm := w.Len()
	w.encryptedData(t.keyType, 0, nil)
	w.Close(der.Ctx(3), pm)
	w.ExplicitInt(1, msgtype.KRB_PRIV)
	w.ExplicitInt(0, 5)
	w.Close(der.TagSequence, pm)
	w.Close(der.App(appKRBPriv), pm)
	privLen := w.Len()
	w.apReq(t.ticket, t.keyType, 0x20, c.ct) // mutual-required: we want the AP-REP
	apLen := w.Len() - privLen
	// message length, version 1 (change password), AP-REQ length.
	var hdr [6]byte
	total := 6 + w.Len()
	if total > 0xffff {
		return errorf(ClassMalformedReply, PhaseKpasswd, "request of %d bytes is too long for kpasswd", total)
	}
	binary.BigEndian.PutUint16(hdr[0:], uint16(total))
	binary.BigEndian.PutUint16(hdr[2:], 1)
	binary.BigEndian.PutUint16(hdr[4:], uint16(apLen))
	w.Raw(hdr[:])
	if tr == TCP {
		var l [4]byte
		binary.BigEndian.PutUint32(l[:], uint32(total))
		w.Raw(l[:])
	}
	reply, err := c.exchangeWith(ctx, addr, tr, w.Bytes())
	if err != nil {
		return c.netError(ctx, PhaseKpasswd, err)
	}
	return c.acceptKpasswdReply(reply, et, now, res)
}

// exchangeWith sends req to addr (a server other than the KDC) and returns
// the reply: one datagram over UDP, or a length-prefixed record over TCP
// (req carries its prefix).
func (c *Client) exchangeWith(ctx context.Context, addr string, tr Transport, req []byte) ([]byte, error) {
	if tr == TCP {
		return c.tcpRoundTripTo(ctx, addr, req)
	}
	var d net.Dialer
	if c.localAddr.IsValid() {
		d.LocalAddr = &net.UDPAddr{IP: c.localAddr.AsSlice()}
	}
	conn, err := d.DialContext(ctx, "udp", addr)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	stop := watch(ctx, conn)
	defer stop()
	if _, err := conn.Write(req); err != nil {
		return nil, err
	}
	n, err := conn.Read(c.rbuf)
	if err != nil {
		return nil, err
	}
	return c.rbuf[:n], nil
}

// acceptKpasswdReply checks kadmind's reply: length, version 1, AP-REP
// length, then the AP-REP and KRB-PRIV, or a KRB-ERROR alone.
func (c *Client) acceptKpasswdReply(reply []byte, et *etypeInfo, sent time.Time, res *KpasswdResult) error {
	if len(reply) < 6 {
		return errorf(ClassMalformedReply, PhaseKpasswd, "reply of %d bytes", len(reply))
	}
	if n := int(binary.BigEndian.Uint16(reply)); n != len(reply) {
		return errorf(ClassMalformedReply, PhaseKpasswd, "reply says %d bytes, has %d", n, len(reply))
	}
	if v := binary.BigEndian.Uint16(reply[2:]); v != 1 {
		return errorf(ClassMalformedReply, PhaseKpasswd, "reply version %d, want 1", v)
	}
	apLen := int(binary.BigEndian.Uint16(reply[4:]))
	if 6+apLen > len(reply) {
		return errorf(ClassMalformedReply, PhaseKpasswd, "AP-REP of %d bytes beyond the reply", apLen)
	}
	apRep, rest := reply[6:6+apLen], reply[6+apLen:]
	if apLen == 0 {
		// kadmind could not verify the AP-REQ (or seal its answer): a
		// KRB-ERROR whose e-data is the result code and string.
		if err := parseKRBError(rest, &c.kerr); err != nil {
			return wrapError(ClassMalformedReply, PhaseKpasswd, fmt.Errorf("KRB-ERROR: %w", err))
		}
		code, text, err := kpasswdResult(c.kerr.edata)
		if err != nil {
			return wrapError(ClassMalformedReply, PhaseKpasswd, fmt.Errorf("KRB-ERROR e-data: %w", err))
		}
		res.Code, res.Text = code, text
		return &Error{Class: KpasswdResultName(code), Code: c.kerr.code, Phase: PhaseKpasswd, Text: text}
	}
	t := &c.tgt
	res.Etype = t.keyType
	repKey, err := newUsageKey(et, t.key, keyusage.AP_REP_ENCPART, false)
	if err != nil {
		return wrapError(ClassMalformedReply, PhaseKpasswd, err)
	}
	cipher, err := parseSealedMessage(apRep, appAPRep, msgtype.KRB_AP_REP, 2, t.keyType)
	if err != nil {
		return wrapError(ClassMalformedReply, PhaseKpasswd, fmt.Errorf("AP-REP: %w", err))
	}
	pt, err := c.openReply(repKey, cipher, PhaseKpasswd, "AP-REP")
	if err != nil {
		return err
	}
	if err := checkEncAPRepPart(pt, sent); err != nil {
		return wrapError(ClassMalformedReply, PhaseKpasswd, fmt.Errorf("EncAPRepPart: %w", err))
	}
	privKey, err := newUsageKey(et, t.key, keyusage.KRB_PRIV_ENCPART, false)
	if err != nil {
		return wrapError(ClassMalformedReply, PhaseKpasswd, err)
	}
	if cipher, err = parseSealedMessage(rest, appKRBPriv, msgtype.KRB_PRIV, 3, t.keyType); err != nil {
		return wrapError(ClassMalformedReply, PhaseKpasswd, fmt.Errorf("KRB-PRIV: %w", err))
	}
	if pt, err = c.openReply(privKey, cipher, PhaseKpasswd, "KRB-PRIV"); err != nil {
		return err
	}
	data, err := encKrbPrivUserData(pt)
	if err != nil {
		return wrapError(ClassMalformedReply, PhaseKpasswd, fmt.Errorf("EncKrbPrivPart: %w", err))
	}
	code, text, err := kpasswdResult(data)
	if err != nil {
		return wrapError(ClassMalformedReply, PhaseKpasswd, fmt.Errorf("result: %w", err))
	}
	res.Code, res.Text = code, text
	if code != KpasswdHardError {
		return &Error{Class: KpasswdResultName(code), Phase: PhaseKpasswd, Text: text}
	}
	if c.log != nil {
		c.debug("msg", "kadmind verified the AP-REQ and refused the empty KRB-PRIV", "result", KpasswdResultName(code), "text", text)
	}
	return nil
}

// parseSealedMessage parses an AP-REP or KRB-PRIV: [APPLICATION tag]
// SEQUENCE { pvno [0] 5, msg-type [1], enc-part [encField] EncryptedData }
// and returns the ciphertext, which must be of the session key's etype.
func parseSealedMessage(b []byte, tag, msgType, encField int, etype int32) ([]byte, error) {
	body, rest, err := der.Expect(b, der.App(tag))
	if err != nil {
		return nil, err
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the message", der.ErrMalformed, len(rest))
	}
	var ed encryptedData
	err = sequence(body, "message", 1<<0|1<<1|1<<uint(encField), func(n int, in []byte) error {
		switch n {
		case 0:
			return wantInt(in, 5, "pvno")
		case 1:
			return wantInt(in, int64(msgType), "msg-type")
		case encField:
			return parseEncryptedData(in, &ed)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if ed.etype != etype {
		return nil, fmt.Errorf("encrypted with %s, the session key is %s", EtypeName(ed.etype), EtypeName(etype))
	}
	return ed.cipher, nil
}

// checkEncAPRepPart checks that the AP-REP echoes the authenticator's time:
// EncAPRepPart ::= [APPLICATION 27] SEQUENCE { ctime [0], cusec [1], ... }.
func checkEncAPRepPart(b []byte, sent time.Time) error {
	body, _, err := der.Expect(b, der.App(appEncAPRepPart))
	if err != nil {
		return err
	}
	var ctime time.Time
	var cusec int64
	err = sequence(body, "EncAPRepPart", 1<<0|1<<1, func(n int, in []byte) error {
		var err error
		switch n {
		case 0:
			ctime, err = parseKrbTime(in)
		case 1:
			cusec, err = der.Int64(in)
		}
		return err
	})
	if err != nil {
		return err
	}
	if !ctime.Equal(sent.Truncate(time.Second)) || cusec != int64(sent.Nanosecond()/1000) {
		return fmt.Errorf("ctime %s.%06d is not the authenticator's %s", ctime.UTC().Format(time.RFC3339), cusec, sent.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

// encKrbPrivUserData returns the user-data of EncKrbPrivPart ::=
// [APPLICATION 28] SEQUENCE { user-data [0] OCTET STRING, ... }.
func encKrbPrivUserData(b []byte) ([]byte, error) {
	body, _, err := der.Expect(b, der.App(appEncKrbPrivPart))
	if err != nil {
		return nil, err
	}
	var data []byte
	err = sequence(body, "EncKrbPrivPart", 1<<0, func(n int, in []byte) error {
		var err error
		if n == 0 {
			data, err = der.Octets(in)
		}
		return err
	})
	return data, err
}

// kpasswdResult splits a result: a 2-octet code, then a UTF-8 string.
func kpasswdResult(b []byte) (int, string, error) {
	if len(b) < 2 {
		return 0, "", fmt.Errorf("%d bytes, want a 2-byte result code", len(b))
	}
	text := b[2:]
	if len(text) > maxKpasswdText {
		text = text[:maxKpasswdText]
	}
	return int(binary.BigEndian.Uint16(b)), string(text), nil
}
