package krb5

import (
	"encoding/asn1"
	"encoding/binary"
	"net"
	"testing"
	"time"

	gocrypto "github.com/jcmturner/gokrb5/v8/crypto"

	"github.com/krb5-exporter/krb5-exporter/internal/realmtest"
	"github.com/krb5-exporter/krb5-exporter/realm"
)

// The kpasswd reply, encoded here from RFC 4120 and RFC 3244 with Go's
// encoding/asn1 and sealed with gokrb5's crypto: apart from the probe's
// own encoder and ciphers.
type (
	tEncryptedData struct {
		Etype  int32  `asn1:"explicit,tag:0"`
		Cipher []byte `asn1:"explicit,tag:2"`
	}
	tSealed struct { // AP-REP (enc-part [2]) and KRB-PRIV (enc-part [3]) alike
		Pvno    int            `asn1:"explicit,tag:0"`
		MsgType int            `asn1:"explicit,tag:1"`
		EncAP   tEncryptedData `asn1:"optional,explicit,tag:2"`
		EncPriv tEncryptedData `asn1:"optional,explicit,tag:3"`
	}
	tEncAPRepPart struct {
		Ctime time.Time `asn1:"generalized,explicit,tag:0"`
		Cusec int       `asn1:"explicit,tag:1"`
	}
	tHostAddress struct {
		AddrType int32  `asn1:"explicit,tag:0"`
		Address  []byte `asn1:"explicit,tag:1"`
	}
	tEncKrbPrivPart struct {
		UserData []byte       `asn1:"explicit,tag:0"`
		SAddress tHostAddress `asn1:"explicit,tag:4"`
	}
)

// tApp wraps v's DER in [APPLICATION tag].
func tApp(t *testing.T, tag int, v any) []byte {
	t.Helper()
	inner, err := asn1.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	b, err := asn1.Marshal(asn1.RawValue{Class: asn1.ClassApplication, Tag: tag, IsCompound: true, Bytes: inner})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tSeal encrypts pt with the session key for a key usage of RFC 4120.
func tSeal(t *testing.T, etype int32, key, pt []byte, usage uint32) tEncryptedData {
	t.Helper()
	e, err := gocrypto.GetEtype(etype)
	if err != nil {
		t.Fatal(err)
	}
	_, ct, err := e.EncryptMessage(key, pt, usage)
	if err != nil {
		t.Fatal(err)
	}
	return tEncryptedData{Etype: etype, Cipher: ct}
}

// tKpasswdReply is kadmind's reply (RFC 3244): an AP-REP echoing ctime
// and cusec, and a KRB-PRIV whose user-data is the result code and text.
func tKpasswdReply(t *testing.T, etype int32, key []byte, ctime time.Time, cusec int, code uint16, text string) []byte {
	t.Helper()
	const usageAPRep, usagePriv = 12, 13 // RFC 4120 7.5.1
	ap := tApp(t, 15, tSealed{Pvno: 5, MsgType: 15,
		EncAP: tSeal(t, etype, key, tApp(t, 27, tEncAPRepPart{Ctime: ctime.UTC(), Cusec: cusec}), usageAPRep)})
	data := binary.BigEndian.AppendUint16(nil, code)
	priv := tApp(t, 21, tSealed{Pvno: 5, MsgType: 21,
		EncPriv: tSeal(t, etype, key, tApp(t, 28, tEncKrbPrivPart{UserData: append(data, text...),
			SAddress: tHostAddress{AddrType: 2, Address: []byte{127, 0, 0, 1}}}), usagePriv)})
	reply := binary.BigEndian.AppendUint16(nil, uint16(6+len(ap)+len(priv)))
	reply = binary.BigEndian.AppendUint16(reply, 1)
	reply = binary.BigEndian.AppendUint16(reply, uint16(len(ap)))
	return append(append(reply, ap...), priv...)
}

// TestKpasswdSealedReplies: replies sealed properly with the session key
// of a real login for kadmin/changepw, built in the test. The one kadmind
// sends the probe (HARDERROR, the authenticator's time echoed) is healthy;
// the same with any other result code (SUCCESS included: no password can
// change, so a kadmind saying so is not the one probed), or with the
// AP-REP's time a second or a microsecond off the authenticator's (a
// replayed AP-REP), is a failure; so through the probe's whole exchange
// with a fake kadmind on loopback sending them.
func TestKpasswdSealedReplies(t *testing.T) {
	r := realmtest.Realm(t, realm.Options{NoKadmind: true})
	c := changepwClient(t, r)
	if _, err := c.Login(testCtx(t, 30e9)); err != nil {
		t.Fatal(err)
	}
	sent := time.Date(2026, 12, 6, 6, 0, 0, 123456000, time.UTC) // the authenticator's
	ctime, cusec := sent.Truncate(time.Second), 123456
	et := lookupEtype(c.tgt.keyType)
	accept := func(reply []byte) (KpasswdResult, error) {
		var res KpasswdResult
		return res, c.acceptKpasswdReply(reply, et, sent, &res)
	}
	key, etype := c.tgt.key, c.tgt.keyType
	if res, err := accept(tKpasswdReply(t, etype, key, ctime, cusec, KpasswdHardError, "Failed decrypting request")); err != nil || res.Code != KpasswdHardError {
		t.Fatalf("kadmind's answer: %v, result %d", err, res.Code)
	}
	for code := range uint16(9) {
		if code == KpasswdHardError {
			continue
		}
		_, err := accept(tKpasswdReply(t, etype, key, ctime, cusec, code, "Password changed"))
		wantClass(t, err, KpasswdResultName(int(code)))
	}
	// The same through the probe's exchange (Kpasswd over UDP) with a
	// fake kadmind on loopback answering the request with them.
	c.now = func() time.Time { return sent }
	for code, want := range map[uint16]string{KpasswdHardError: ClassSuccess, KpasswdSuccess: "KPASSWD_SUCCESS", KpasswdSoftError: "KPASSWD_SOFTERROR"} {
		srv, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		reply := tKpasswdReply(t, etype, key, ctime, cusec, code, "x")
		go func() {
			buf := make([]byte, 65536)
			if _, from, err := srv.ReadFrom(buf); err == nil {
				srv.WriteTo(reply, from)
			}
		}()
		_, err = c.Kpasswd(testCtx(t, 10e9), srv.LocalAddr().String(), UDP)
		srv.Close()
		if Classify(err) != want {
			t.Errorf("a fake kadmind answering %d: %v (class %s), want %s", code, err, Classify(err), want)
		}
	}
	for what, at := range map[string][2]any{
		"a second later":      {ctime.Add(time.Second), cusec},
		"a second earlier":    {ctime.Add(-time.Second), cusec},
		"a microsecond later": {ctime, cusec + 1},
		"no microseconds":     {ctime, 0},
	} {
		_, err := accept(tKpasswdReply(t, etype, key, at[0].(time.Time), at[1].(int), KpasswdHardError, "Failed decrypting request"))
		if err == nil || Classify(err) != ClassMalformedReply {
			t.Errorf("AP-REP time %s: %v (class %s), want %s", what, err, Classify(err), ClassMalformedReply)
		}
	}
}
