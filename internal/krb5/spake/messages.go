package spake

import (
	"errors"
	"fmt"

	"github.com/krb5-exporter/krb5-exporter/internal/der"
)

// The PA-SPAKE messages (draft-ietf-kitten-krb-spake-preauth section 8;
// explicit tags, DER):
//
//	PA-SPAKE ::= CHOICE { support [0] SPAKESupport, challenge [1] SPAKEChallenge,
//	                      response [2] SPAKEResponse, encdata [3] EncryptedData, ... }
//	SPAKESupport ::= SEQUENCE { groups [0] SEQUENCE (SIZE(1..MAX)) OF Int32, ... }
//	SPAKEChallenge ::= SEQUENCE { group [0] Int32, pubkey [1] OCTET STRING,
//	                      factors [2] SEQUENCE (SIZE(1..MAX)) OF SPAKESecondFactor, ... }
//	SPAKESecondFactor ::= SEQUENCE { type [0] Int32, data [1] OCTET STRING OPTIONAL }
//	SPAKEResponse ::= SEQUENCE { pubkey [0] OCTET STRING, factor [1] EncryptedData, ... }
//
// Parsing slices the input and allocates nothing; unknown members after the
// known ones (the "..." of the ASN.1) are skipped, as MIT's decoder does.

// MessageType is the CHOICE alternative of a PA-SPAKE message.
type MessageType int

// The PA-SPAKE alternatives.
const (
	MsgSupport   MessageType = 0
	MsgChallenge MessageType = 1
	MsgResponse  MessageType = 2
	MsgEncData   MessageType = 3
)

// ErrMalformed means a PA-SPAKE message that does not decode.
var ErrMalformed = errors.New("malformed PA-SPAKE message")

// Challenge is a parsed SPAKEChallenge; PubKey slices the input.
type Challenge struct {
	Group   int32
	PubKey  []byte // T
	Factors int    // number of second factors offered
	SFNone  bool   // SF-NONE is among them
}

// EncryptedData is a parsed EncryptedData; Cipher slices the input.
type EncryptedData struct {
	Etype   int32
	Kvno    uint32
	HasKvno bool
	Cipher  []byte
}

// Response is a parsed SPAKEResponse; PubKey slices the input.
type Response struct {
	PubKey []byte // S
	Factor EncryptedData
}

func malformed(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, a...)...)
}

// asMalformed makes an error of the DER reader one of ErrMalformed. The
// adapters below call it only on error, so that they inline.
func asMalformed(err error) error {
	if errors.Is(err, ErrMalformed) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrMalformed, err)
}

func readTLV(b []byte) (tag byte, body, rest []byte, err error) {
	tag, body, rest, err = der.ReadTLV(b)
	if err != nil {
		err = asMalformed(err)
	}
	return tag, body, rest, err
}

func only(b []byte, want byte) ([]byte, error) {
	body, err := der.Only(b, want)
	if err != nil {
		err = asMalformed(err)
	}
	return body, err
}

// members walks a SEQUENCE body of [n] EXPLICIT members in increasing order.
func members(seq []byte, fn func(n int, inner []byte) error) error {
	err := der.Fields(seq, fn)
	if err != nil {
		err = asMalformed(err)
	}
	return err
}

// int32Of reads an INTEGER element that must fit in an Int32.
func int32Of(b []byte) (int32, error) {
	body, err := only(b, der.TagInteger)
	if err != nil {
		return 0, err
	}
	if len(body) == 0 || len(body) > 4 {
		return 0, malformed("INTEGER of %d bytes", len(body))
	}
	if len(body) > 1 && (body[0] == 0 && body[1]&0x80 == 0 || body[0] == 0xff && body[1]&0x80 != 0) {
		return 0, malformed("INTEGER not minimally encoded")
	}
	v := int32(int8(body[0]))
	for _, c := range body[1:] {
		v = v<<8 | int32(c)
	}
	return v, nil
}

// uint32Of reads an INTEGER element that must fit in a UInt32.
func uint32Of(b []byte) (uint32, error) {
	body, err := only(b, der.TagInteger)
	if err != nil {
		return 0, err
	}
	if len(body) == 5 && body[0] == 0 {
		body = body[1:]
	} else if len(body) == 0 || len(body) > 4 || body[0]&0x80 != 0 {
		return 0, malformed("UInt32 INTEGER")
	}
	var v uint32
	for _, c := range body {
		v = v<<8 | uint32(c)
	}
	return v, nil
}

// ParseMessage splits an encoded PA-SPAKE message into its alternative and
// the contents of that alternative's tag.
func ParseMessage(b []byte) (MessageType, []byte, error) {
	tag, body, rest, err := readTLV(b)
	if err != nil {
		return 0, nil, err
	}
	if len(rest) != 0 {
		return 0, nil, malformed("%d bytes after message", len(rest))
	}
	if tag&0xe0 != 0xa0 || tag&0x1f > 3 {
		return 0, nil, malformed("unknown PA-SPAKE alternative 0x%02x", tag)
	}
	return MessageType(tag & 0x1f), body, nil
}

// ParseChallenge decodes an encoded PA-SPAKE message that must be a
// SPAKEChallenge.
func ParseChallenge(b []byte, c *Challenge) error {
	typ, body, err := ParseMessage(b)
	if err != nil {
		return err
	}
	if typ != MsgChallenge {
		return malformed("message type %d, want challenge", typ)
	}
	seq, err := only(body, der.TagSequence)
	if err != nil {
		return err
	}
	*c = Challenge{}
	var seen [3]bool
	err = members(seq, func(n int, in []byte) error {
		switch n {
		case 0:
			v, err := int32Of(in)
			c.Group = v
			seen[0] = true
			return err
		case 1:
			v, err := only(in, der.TagOctetString)
			c.PubKey = v
			seen[1] = true
			return err
		case 2:
			seen[2] = true
			return parseFactors(in, c)
		}
		return nil // an extension
	})
	if err != nil {
		return err
	}
	if !seen[0] || !seen[1] || !seen[2] {
		return malformed("challenge lacks group, pubkey or factors")
	}
	if c.Factors == 0 {
		return malformed("challenge with no factors")
	}
	return nil
}

func parseFactors(in []byte, c *Challenge) error {
	list, err := only(in, der.TagSequence)
	if err != nil {
		return err
	}
	for len(list) > 0 {
		tag, f, rest, err := readTLV(list)
		if err != nil {
			return err
		}
		if tag != der.TagSequence {
			return malformed("factor tag 0x%02x", tag)
		}
		typ, _, err := ParseSecondFactorBody(f)
		if err != nil {
			return err
		}
		c.Factors++
		if typ == FactorNone {
			c.SFNone = true
		}
		list = rest
	}
	return nil
}

// ParseSecondFactor decodes an encoded SPAKESecondFactor (the plaintext of a
// SPAKEResponse's factor).
func ParseSecondFactor(b []byte) (typ int32, data []byte, err error) {
	body, err := only(b, der.TagSequence)
	if err != nil {
		return 0, nil, err
	}
	return ParseSecondFactorBody(body)
}

// ParseSecondFactorBody decodes the contents of a SPAKESecondFactor SEQUENCE.
func ParseSecondFactorBody(body []byte) (typ int32, data []byte, err error) {
	seenType := false
	err = members(body, func(n int, in []byte) error {
		switch n {
		case 0:
			v, err := int32Of(in)
			typ, seenType = v, true
			return err
		case 1:
			v, err := only(in, der.TagOctetString)
			data = v
			return err
		}
		return malformed("factor member [%d]", n)
	})
	if err != nil {
		return 0, nil, err
	}
	if !seenType {
		return 0, nil, malformed("factor without type")
	}
	return typ, data, nil
}

// ParseSupport decodes an encoded PA-SPAKE message that must be a
// SPAKESupport, appending its groups to dst.
func ParseSupport(dst []int32, b []byte) ([]int32, error) {
	typ, body, err := ParseMessage(b)
	if err != nil {
		return nil, err
	}
	if typ != MsgSupport {
		return nil, malformed("message type %d, want support", typ)
	}
	seq, err := only(body, der.TagSequence)
	if err != nil {
		return nil, err
	}
	n0 := len(dst)
	seen := false
	err = members(seq, func(n int, in []byte) error {
		if n != 0 {
			return nil
		}
		seen = true
		list, err := only(in, der.TagSequence)
		if err != nil {
			return err
		}
		for len(list) > 0 {
			tag, _, rest, err := readTLV(list)
			if err != nil {
				return err
			}
			if tag != der.TagInteger {
				return malformed("group tag 0x%02x", tag)
			}
			g, err := int32Of(list[:len(list)-len(rest)])
			if err != nil {
				return err
			}
			dst = append(dst, g)
			list = rest
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !seen || len(dst) == n0 {
		return nil, malformed("support without groups")
	}
	return dst, nil
}

// ParseResponse decodes an encoded PA-SPAKE message that must be a
// SPAKEResponse.
func ParseResponse(b []byte, r *Response) error {
	typ, body, err := ParseMessage(b)
	if err != nil {
		return err
	}
	if typ != MsgResponse {
		return malformed("message type %d, want response", typ)
	}
	seq, err := only(body, der.TagSequence)
	if err != nil {
		return err
	}
	*r = Response{}
	var seen [2]bool
	err = members(seq, func(n int, in []byte) error {
		switch n {
		case 0:
			v, err := only(in, der.TagOctetString)
			r.PubKey, seen[0] = v, true
			return err
		case 1:
			seen[1] = true
			return ParseEncryptedData(in, &r.Factor)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !seen[0] || !seen[1] {
		return malformed("response lacks pubkey or factor")
	}
	return nil
}

// ParseEncryptedData decodes an encoded EncryptedData.
func ParseEncryptedData(b []byte, ed *EncryptedData) error {
	seq, err := only(b, der.TagSequence)
	if err != nil {
		return err
	}
	*ed = EncryptedData{}
	var seenEtype, seenCipher bool
	err = members(seq, func(n int, in []byte) error {
		switch n {
		case 0:
			v, err := int32Of(in)
			ed.Etype, seenEtype = v, true
			return err
		case 1:
			v, err := uint32Of(in)
			ed.Kvno, ed.HasKvno = v, true
			return err
		case 2:
			v, err := only(in, der.TagOctetString)
			ed.Cipher, seenCipher = v, true
			return err
		}
		return malformed("EncryptedData member [%d]", n)
	})
	if err != nil {
		return err
	}
	if !seenEtype || !seenCipher {
		return malformed("EncryptedData lacks etype or cipher")
	}
	return nil
}

// Encoding. Every element's length is known before its header is written,
// so the messages are appended front to back with no intermediate buffers.

// intBytes returns the minimal two's-complement octets of v in b's tail.
func intBytes(b *[4]byte, v int32) []byte {
	b[0], b[1], b[2], b[3] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
	i := 0
	for i < 3 && (b[i] == 0 && b[i+1]&0x80 == 0 || b[i] == 0xff && b[i+1]&0x80 != 0) {
		i++
	}
	return b[i:]
}

// explicitIntLen is the size of [n] INTEGER v.
func explicitIntLen(v int32) int {
	var b [4]byte
	return der.TLVLen(der.TLVLen(len(intBytes(&b, v))))
}

func appendExplicitInt(dst []byte, n int, v int32) []byte {
	var b [4]byte
	p := intBytes(&b, v)
	dst = der.AppendHeader(dst, der.Ctx(n), der.TLVLen(len(p)))
	dst = der.AppendHeader(dst, der.TagInteger, len(p))
	return append(dst, p...)
}

func appendExplicitOctets(dst []byte, n int, p []byte) []byte {
	dst = der.AppendHeader(dst, der.Ctx(n), der.TLVLen(len(p)))
	dst = der.AppendHeader(dst, der.TagOctetString, len(p))
	return append(dst, p...)
}

// AppendSupport appends a PA-SPAKE support message listing groups.
func AppendSupport(dst []byte, groups ...int32) []byte {
	ints := 0
	for _, g := range groups {
		var b [4]byte
		ints += der.TLVLen(len(intBytes(&b, g)))
	}
	list := der.TLVLen(ints)   // SEQUENCE OF Int32
	member := der.TLVLen(list) // [0]
	seq := der.TLVLen(member)  // SPAKESupport
	dst = der.AppendHeader(dst, der.Ctx(int(MsgSupport)), seq)
	dst = der.AppendHeader(dst, der.TagSequence, member)
	dst = der.AppendHeader(dst, der.Ctx(0), list)
	dst = der.AppendHeader(dst, der.TagSequence, ints)
	for _, g := range groups {
		var b [4]byte
		p := intBytes(&b, g)
		dst = der.AppendHeader(dst, der.TagInteger, len(p))
		dst = append(dst, p...)
	}
	return dst
}

// AppendFactorNone appends the SPAKESecondFactor { type SF-NONE }.
func AppendFactorNone(dst []byte) []byte {
	return append(dst, der.TagSequence, 0x05, der.Ctx(0), 0x03, der.TagInteger, 0x01, byte(FactorNone))
}

// encryptedDataLen is the contents size of EncryptedData without kvno.
func encryptedDataLen(etype int32, cipher int) int {
	return explicitIntLen(etype) + der.TLVLen(der.TLVLen(cipher))
}

func appendEncryptedData(dst []byte, etype int32, cipher []byte) []byte {
	dst = der.AppendHeader(dst, der.TagSequence, encryptedDataLen(etype, len(cipher)))
	dst = appendExplicitInt(dst, 0, etype)
	return appendExplicitOctets(dst, 2, cipher)
}

// AppendResponse appends a PA-SPAKE response message: the client's public
// element S and the second factor encrypted with K'[1] (key usage 65) under
// enctype etype, without kvno, as MIT sends it.
func AppendResponse(dst []byte, pub []byte, etype int32, cipher []byte) []byte {
	ed := der.TLVLen(encryptedDataLen(etype, len(cipher)))
	body := der.TLVLen(der.TLVLen(len(pub))) + der.TLVLen(ed)
	dst = der.AppendHeader(dst, der.Ctx(int(MsgResponse)), der.TLVLen(body))
	dst = der.AppendHeader(dst, der.TagSequence, body)
	dst = appendExplicitOctets(dst, 0, pub)
	dst = der.AppendHeader(dst, der.Ctx(1), ed)
	return appendEncryptedData(dst, etype, cipher)
}

// AppendChallenge appends a PA-SPAKE challenge message with the given
// second factor types (no factor data), as MIT's KDC sends it.
func AppendChallenge(dst []byte, group int32, pub []byte, factors ...int32) []byte {
	flist := 0
	for _, f := range factors {
		flist += der.TLVLen(explicitIntLen(f))
	}
	body := explicitIntLen(group) + der.TLVLen(der.TLVLen(len(pub))) + der.TLVLen(der.TLVLen(flist))
	dst = der.AppendHeader(dst, der.Ctx(int(MsgChallenge)), der.TLVLen(body))
	dst = der.AppendHeader(dst, der.TagSequence, body)
	dst = appendExplicitInt(dst, 0, group)
	dst = appendExplicitOctets(dst, 1, pub)
	dst = der.AppendHeader(dst, der.Ctx(2), der.TLVLen(flist))
	dst = der.AppendHeader(dst, der.TagSequence, flist)
	for _, f := range factors {
		dst = der.AppendHeader(dst, der.TagSequence, explicitIntLen(f))
		dst = appendExplicitInt(dst, 0, f)
	}
	return dst
}
