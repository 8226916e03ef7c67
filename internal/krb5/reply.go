package krb5

import (
	"fmt"
	"time"

	"github.com/jcmturner/gokrb5/v8/iana/msgtype"
	"github.com/jcmturner/gokrb5/v8/iana/patype"

	"github.com/krb5-exporter/krb5-exporter/internal/der"
)

// Parsing of KDC replies (RFC 4120 5.4.2, 5.9.1). The parsed structures point
// into the receive buffer; nothing is copied until a reply is accepted.

// Application tags of the messages the engine sends and receives.
const (
	appTicket        = 1
	appAuthenticator = 2
	appASReq         = 10
	appASRep         = 11
	appTGSReq        = 12
	appTGSRep        = 13
	appAPReq         = 14
	appEncASRepPart  = 25
	appEncTGSRepPart = 26
	appKRBError      = 30
)

// sequence parses a SEQUENCE of [n] EXPLICIT members, handing each to fn,
// and checks that every member in required (bit n for [n]) was present.
func sequence(b []byte, what string, required uint32, fn func(n int, inner []byte) error) error {
	seq, _, err := der.Expect(b, der.TagSequence)
	if err != nil {
		return err
	}
	var seen uint32
	err = der.Fields(seq, func(n int, in []byte) error {
		seen |= 1 << n
		return fn(n, in)
	})

	if err != nil {
		return err
	}
	if seen&required != required {
		return fmt.Errorf("%w: %s lacks required fields", der.ErrMalformed, what)
	}
	return nil
}

// krbError is a parsed KRB-ERROR.
type krbError struct {
	code  int32
	stime time.Time // the KDC's clock, to the microsecond
	text  []byte
	edata []byte
}

// parseKRBError parses a KRB-ERROR message.
func parseKRBError(b []byte, e *krbError) error {
	*e = krbError{}
	body, _, err := der.Expect(b, der.App(appKRBError))
	if err != nil {
		return err
	}
	var susec int64
	const required = 1<<0 | 1<<1 | 1<<4 | 1<<5 | 1<<6 | 1<<9 | 1<<10
	err = sequence(body, "KRB-ERROR", required, func(n int, in []byte) error {
		var err error
		switch n {
		case 0:
			err = wantInt(in, 5, "pvno")
		case 1:
			err = wantInt(in, msgtype.KRB_ERROR, "msg-type")
		case 4:
			e.stime, err = parseKrbTime(in)
		case 5:
			susec, err = der.Int64(in)
			if err == nil && (susec < 0 || susec > 999999) {
				err = fmt.Errorf("%w: susec %d", der.ErrMalformed, susec)
			}
		case 6:
			e.code, err = der.Int32(in)
		case 11:
			e.text, err = der.GeneralString(in)
		case 12:
			e.edata, err = der.Octets(in)
		}
		return err
	})
	if err != nil {
		return err
	}
	e.stime = e.stime.Add(time.Duration(susec) * time.Microsecond)
	return nil
}

func wantInt(in []byte, want int64, what string) error {
	v, err := der.Int64(in)
	if err != nil {
		return err
	}
	if v != want {
		return fmt.Errorf("%w: %s %d, want %d", der.ErrMalformed, what, v, want)
	}
	return nil
}

// encryptedData is a parsed EncryptedData.
type encryptedData struct {
	etype  int32
	kvno   uint32 // 0 when absent
	cipher []byte
}

func parseEncryptedData(b []byte, ed *encryptedData) error {
	*ed = encryptedData{}
	return sequence(b, "EncryptedData", 1<<0|1<<2, func(n int, in []byte) error {
		var err error
		switch n {
		case 0:
			ed.etype, err = der.Int32(in)
		case 1:
			var v int64
			v, err = der.Int64(in)
			ed.kvno = uint32(v)
		case 2:
			ed.cipher, err = der.Octets(in)
		}
		return err
	})
}

// kdcRep is a parsed AS-REP or TGS-REP.
type kdcRep struct {
	padata      []byte // body of the PA-DATA sequence, if any
	ticket      []byte // the complete Ticket element, re-sent verbatim in TGS-REQs
	ticketEtype int32
	enc         encryptedData
}

// parseKDCRep parses an AS-REP (appASRep) or TGS-REP (appTGSRep).
func parseKDCRep(b []byte, tag int, r *kdcRep) error {
	*r = kdcRep{}
	body, _, err := der.Expect(b, der.App(tag))
	if err != nil {
		return err
	}
	const required = 1<<0 | 1<<1 | 1<<3 | 1<<4 | 1<<5 | 1<<6
	return sequence(body, "KDC-REP", required, func(n int, in []byte) error {
		var err error
		switch n {
		case 0:
			err = wantInt(in, 5, "pvno")
		case 1:
			err = wantInt(in, int64(tag), "msg-type")
		case 2:
			r.padata, _, err = der.Expect(in, der.TagSequence)
		case 5:
			r.ticket = in
			r.ticketEtype, err = parseTicketEtype(in)
		case 6:
			err = parseEncryptedData(in, &r.enc)
		}
		return err
	})
}

// parseTicketEtype checks a Ticket's outer structure and returns the enctype
// of its encrypted part (the service key the KDC chose).
func parseTicketEtype(b []byte) (int32, error) {
	body, rest, err := der.Expect(b, der.App(appTicket))
	if err != nil {
		return 0, err
	}
	if len(rest) != 0 {
		return 0, der.ErrMalformed
	}
	var ed encryptedData
	err = sequence(body, "Ticket", 0b1111, func(n int, in []byte) error {
		if n == 3 {
			return parseEncryptedData(in, &ed)
		}
		return nil
	})
	return ed.etype, err
}

// encRepPart is a parsed EncASRepPart or EncTGSRepPart.
type encRepPart struct {
	keyType   int32
	key       []byte
	nonce     int64
	authtime  time.Time
	starttime time.Time // zero when absent
	endtime   time.Time
	srealm    []byte // the ticket's server, into the plaintext
	sname     []byte // its PrincipalName, undecoded (namesEqual reads it)
}

// parseEncRepPart parses the decrypted part of a KDC reply. Both application
// tags are accepted for either reply: some KDCs send EncTGSRepPart in AS-REPs.
func parseEncRepPart(b []byte, p *encRepPart) error {
	*p = encRepPart{}
	tag, body, _, err := der.ReadTLV(b)
	if err != nil {
		return err
	}
	if tag != der.App(appEncASRepPart) && tag != der.App(appEncTGSRepPart) {
		return fmt.Errorf("%w: tag 0x%02x is not EncKDCRepPart", der.ErrMalformed, tag)
	}
	const required = 1<<0 | 1<<1 | 1<<2 | 1<<4 | 1<<5 | 1<<7 | 1<<9 | 1<<10
	return sequence(body, "EncKDCRepPart", required, func(n int, in []byte) error {
		var err error
		switch n {
		case 0:
			err = parseEncryptionKey(in, p)
		case 2:
			p.nonce, err = der.Int64(in)
		case 5:
			p.authtime, err = parseKrbTime(in)
		case 6:
			p.starttime, err = parseKrbTime(in)
		case 7:
			p.endtime, err = parseKrbTime(in)
		case 9:
			p.srealm, err = der.GeneralString(in)
		case 10:
			p.sname = in
		}
		return err
	})
}

// namesEqual reports whether an undecoded PrincipalName holds exactly
// the components want (the name type aside).
func namesEqual(name []byte, want []string) (bool, error) {
	eq := false
	err := sequence(name, "PrincipalName", 0b11, func(n int, in []byte) error {
		if n != 1 {
			return nil
		}
		seq, _, err := der.Expect(in, der.TagSequence)
		if err != nil {
			return err
		}
		i := 0
		eq = true
		for len(seq) > 0 {
			var c []byte
			tag, body, rest, err := der.ReadTLV(seq)
			if err != nil {
				return err
			}
			if tag != der.TagGeneralString {
				return fmt.Errorf("%w: name component tag 0x%02x", der.ErrMalformed, tag)
			}
			c, seq = body, rest
			if i >= len(want) || string(c) != want[i] {
				eq = false
			}
			i++
		}
		eq = eq && i == len(want)
		return nil
	})
	return eq, err
}

func parseEncryptionKey(b []byte, p *encRepPart) error {
	return sequence(b, "EncryptionKey", 0b11, func(n int, in []byte) error {
		var err error
		switch n {
		case 0:
			p.keyType, err = der.Int32(in)
		case 1:
			p.key, err = der.Octets(in)
		}
		return err
	})
}

// nextPAData splits the first PA-DATA { padata-type [1], padata-value [2] }
// off a SEQUENCE OF PA-DATA body.
func nextPAData(b []byte) (typ int32, val, rest []byte, err error) {
	if _, _, rest, err = der.ReadTLV(b); err != nil {
		return 0, nil, nil, err
	}
	err = sequence(b[:len(b)-len(rest)], "PA-DATA", 0b110, func(n int, in []byte) error {
		var err error
		switch n {
		case 1:
			typ, err = der.Int32(in)
		case 2:
			val, err = der.Octets(in)
		}
		return err
	})
	return typ, val, rest, err
}

// etypeInfo2Entry is one ETYPE-INFO2-ENTRY.
type etypeInfo2Entry struct {
	etype     int32
	salt      []byte
	s2kparams []byte
	hasSalt   bool
	hasS2K    bool
}

// findEtypeInfo2 scans METHOD-DATA (a KRB-ERROR's e-data, or the PA-DATA
// sequence body of a KDC-REP when padataBody is set) for PA-ETYPE-INFO2 and
// returns the first entry accepted by use.
func findEtypeInfo2(b []byte, padataBody bool, use func(etype int32) bool) (etypeInfo2Entry, bool, error) {
	var found etypeInfo2Entry
	if !padataBody {
		var err error
		if b, _, err = der.Expect(b, der.TagSequence); err != nil {
			return found, false, err
		}
	}
	for len(b) > 0 {
		typ, val, rest, err := nextPAData(b)
		if err != nil {
			return found, false, err
		}
		b = rest
		if typ != patype.PA_ETYPE_INFO2 {
			continue
		}
		entries, _, err := der.Expect(val, der.TagSequence)
		if err != nil {
			return found, false, err
		}
		for len(entries) > 0 {
			_, _, rest, err := der.ReadTLV(entries)
			if err != nil {
				return found, false, err
			}
			ent := entries[:len(entries)-len(rest)]
			entries = rest
			var e etypeInfo2Entry
			err = sequence(ent, "ETYPE-INFO2-ENTRY", 1, func(n int, in []byte) error {
				var err error
				switch n {
				case 0:
					e.etype, err = der.Int32(in)
				case 1:
					e.salt, err = der.GeneralString(in)
					e.hasSalt = true
				case 2:
					e.s2kparams, err = der.Octets(in)
					e.hasS2K = true
				}
				return err
			})
			if err != nil {
				return found, false, err
			}
			if use(e.etype) {
				return e, true, nil
			}
		}
	}
	return found, false, nil
}
