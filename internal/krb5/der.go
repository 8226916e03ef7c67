package krb5

import (
	"errors"
	"fmt"
)

// A minimal DER reader and a back-to-front DER writer for the handful of
// Kerberos structures the engine touches. Parsing slices the input (no copies,
// no reflection), which keeps reply handling allocation-free; gokrb5's
// reflection-based asn1 is used only off the hot path and in tests as the
// reference implementation.

// ASN.1 identifier octets used by Kerberos (RFC 4120 section 5).
const (
	tagInteger         = 0x02
	tagBitString       = 0x03
	tagOctetString     = 0x04
	tagSequence        = 0x30
	tagGeneralizedTime = 0x18
	tagGeneralString   = 0x1b
)

// ctx returns the identifier of the constructed context-specific tag [n].
func ctx(n int) byte { return 0xa0 | byte(n) }

// app returns the identifier of the constructed application tag [APPLICATION n].
func app(n int) byte { return 0x60 | byte(n) }

var errDER = errors.New("malformed DER")

// readTLV splits b into the first element's identifier, its contents and the
// rest. Only low tag numbers (< 31) and definite lengths are accepted, which is
// all DER-encoded Kerberos uses.
func readTLV(b []byte) (tag byte, body, rest []byte, err error) {
	if len(b) < 2 {
		return 0, nil, nil, errDER
	}
	tag = b[0]
	if tag&0x1f == 0x1f {
		return 0, nil, nil, errDER
	}
	n := int(b[1])
	off := 2
	if n >= 0x80 {
		k := n & 0x7f
		if k == 0 || k > 3 || len(b) < 2+k {
			return 0, nil, nil, errDER
		}
		n = 0
		for _, c := range b[2 : 2+k] {
			n = n<<8 | int(c)
		}
		off = 2 + k
	}
	if n > len(b)-off {
		return 0, nil, nil, errDER
	}
	return tag, b[off : off+n], b[off+n:], nil
}

// expect reads one element that must carry identifier want.
func expect(b []byte, want byte) (body, rest []byte, err error) {
	tag, body, rest, err := readTLV(b)
	if err != nil {
		return nil, nil, err
	}
	if tag != want {
		return nil, nil, fmt.Errorf("%w: tag 0x%02x, want 0x%02x", errDER, tag, want)
	}
	return body, rest, nil
}

// fields walks the elements of a SEQUENCE body whose members are all
// context-tagged [n] EXPLICIT, handing each member's inner element to fn.
// Members must appear in increasing tag order, as DER requires.
func fields(seq []byte, fn func(n int, inner []byte) error) error {
	last := -1
	for len(seq) > 0 {
		tag, body, rest, err := readTLV(seq)
		if err != nil {
			return err
		}
		if tag&0xe0 != 0xa0 {
			return fmt.Errorf("%w: member tag 0x%02x is not [n]", errDER, tag)
		}
		n := int(tag & 0x1f)
		if n <= last {
			return fmt.Errorf("%w: member [%d] out of order", errDER, n)
		}
		last = n
		if err := fn(n, body); err != nil {
			return err
		}
		seq = rest
	}
	return nil
}

// parseInt reads an INTEGER element that must fit in an int64.
func parseInt(b []byte) (int64, error) {
	body, rest, err := expect(b, tagInteger)
	if err != nil {
		return 0, err
	}
	if len(rest) != 0 || len(body) == 0 || len(body) > 8 {
		return 0, errDER
	}
	v := int64(int8(body[0])) // sign-extend the first octet
	for _, c := range body[1:] {
		v = v<<8 | int64(c)
	}
	return v, nil
}

// parseInt32 reads an INTEGER element that must fit in an int32.
func parseInt32(b []byte) (int32, error) {
	v, err := parseInt(b)
	if err != nil {
		return 0, err
	}
	if v != int64(int32(v)) {
		return 0, errDER
	}
	return int32(v), nil
}

// parseOctets reads an OCTET STRING element.
func parseOctets(b []byte) ([]byte, error) {
	body, rest, err := expect(b, tagOctetString)
	if err != nil {
		return nil, err
	}
	if len(rest) != 0 {
		return nil, errDER
	}
	return body, nil
}

// parseGeneralString reads a GeneralString (KerberosString, Realm) element.
func parseGeneralString(b []byte) ([]byte, error) {
	body, rest, err := expect(b, tagGeneralString)
	if err != nil {
		return nil, err
	}
	if len(rest) != 0 {
		return nil, errDER
	}
	return body, nil
}

// derWriter builds DER back to front: members are prepended in reverse order
// and a constructed element is closed once its contents are written, so every
// length is known when its header is emitted and nothing is copied twice.
type derWriter struct {
	buf []byte // data lives in buf[off:]
	off int
}

func (w *derWriter) reset() { w.off = len(w.buf) }

// len returns the number of bytes written so far.
func (w *derWriter) len() int { return len(w.buf) - w.off }

// bytes returns the encoding; valid until the next write.
func (w *derWriter) bytes() []byte { return w.buf[w.off:] }

func (w *derWriter) grow(n int) {
	if w.off >= n {
		return
	}
	size := 2*len(w.buf) + n
	nb := make([]byte, size)
	used := w.len()
	copy(nb[size-used:], w.buf[w.off:])
	w.buf, w.off = nb, size-used
}

// raw prepends already-encoded bytes.
func (w *derWriter) raw(p []byte) {
	w.grow(len(p))
	w.off -= len(p)
	copy(w.buf[w.off:], p)
}

// header prepends an identifier and a definite length.
func (w *derWriter) header(tag byte, n int) {
	w.grow(6)
	switch {
	case n < 0x80:
		w.off -= 2
		w.buf[w.off], w.buf[w.off+1] = tag, byte(n)
	case n <= 0xff:
		w.off -= 3
		w.buf[w.off], w.buf[w.off+1], w.buf[w.off+2] = tag, 0x81, byte(n)
	case n <= 0xffff:
		w.off -= 4
		w.buf[w.off], w.buf[w.off+1], w.buf[w.off+2], w.buf[w.off+3] = tag, 0x82, byte(n>>8), byte(n)
	default:
		w.off -= 5
		w.buf[w.off], w.buf[w.off+1] = tag, 0x83
		w.buf[w.off+2], w.buf[w.off+3], w.buf[w.off+4] = byte(n>>16), byte(n>>8), byte(n)
	}
}

// close prepends the header of a constructed element whose contents were
// written since mark (a value returned by len()).
func (w *derWriter) close(tag byte, mark int) { w.header(tag, w.len()-mark) }

// primitive prepends a primitive element.
func (w *derWriter) primitive(tag byte, p []byte) {
	w.raw(p)
	w.header(tag, len(p))
}

// integer prepends a minimally encoded INTEGER.
func (w *derWriter) integer(v int64) {
	var b [9]byte
	i := len(b)
	for {
		i--
		b[i] = byte(v)
		v >>= 8
		// Stop once the rest is pure sign extension of the octet just written.
		if (v == 0 && b[i]&0x80 == 0) || (v == -1 && b[i]&0x80 != 0) {
			break
		}
	}
	w.primitive(tagInteger, b[i:])
}

// explicitInt prepends [n] INTEGER.
func (w *derWriter) explicitInt(n int, v int64) {
	m := w.len()
	w.integer(v)
	w.close(ctx(n), m)
}

// explicitOctets prepends [n] OCTET STRING.
func (w *derWriter) explicitOctets(n int, p []byte) {
	m := w.len()
	w.primitive(tagOctetString, p)
	w.close(ctx(n), m)
}

// explicitString prepends [n] GeneralString.
func (w *derWriter) explicitString(n int, s string) {
	m := w.len()
	w.grow(len(s))
	w.off -= len(s)
	copy(w.buf[w.off:], s)
	w.header(tagGeneralString, len(s))
	w.close(ctx(n), m)
}

// explicitTime prepends [n] KerberosTime.
func (w *derWriter) explicitTime(n int, t *[15]byte) {
	m := w.len()
	w.primitive(tagGeneralizedTime, t[:])
	w.close(ctx(n), m)
}
