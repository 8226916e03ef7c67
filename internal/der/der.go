// Package der is the DER codec of the Kerberos engine and its SPAKE
// pre-authentication: a reader that slices its input (no copies, no
// reflection, no allocation on success) and two writers, one that builds back
// to front (Writer: every length is known when its header is emitted) and one
// that appends front to back when the caller knows the sizes (AppendHeader,
// TLVLen). Only low tag numbers and definite lengths of up to three octets are
// accepted or written, which is all DER-encoded Kerberos uses (RFC 4120
// section 5). It imports nothing of the project.
package der

import (
	"errors"
	"fmt"
)

// ASN.1 identifier octets used by Kerberos.
const (
	TagInteger         = 0x02
	TagBitString       = 0x03
	TagOctetString     = 0x04
	TagSequence        = 0x30
	TagGeneralizedTime = 0x18
	TagGeneralString   = 0x1b
)

// Ctx returns the identifier of the constructed context-specific tag [n].
func Ctx(n int) byte { return 0xa0 | byte(n) }

// App returns the identifier of the constructed application tag [APPLICATION n].
func App(n int) byte { return 0x60 | byte(n) }

// ErrMalformed is wrapped by every error of the reader.
var ErrMalformed = errors.New("malformed DER")

// The reader's own errors are values, so that rejecting garbage allocates
// nothing either.
var (
	errTruncated = fmt.Errorf("%w: truncated element", ErrMalformed)
	errHighTag   = fmt.Errorf("%w: high tag number", ErrMalformed)
	errLength    = fmt.Errorf("%w: bad length", ErrMalformed)
	errBeyond    = fmt.Errorf("%w: length beyond the input", ErrMalformed)
	errTrailing  = fmt.Errorf("%w: bytes after the element", ErrMalformed)
	errInteger   = fmt.Errorf("%w: INTEGER out of range", ErrMalformed)
)

// ReadTLV splits b into the first element's identifier, its contents and the
// rest.
func ReadTLV(b []byte) (tag byte, body, rest []byte, err error) {
	if len(b) < 2 {
		return 0, nil, nil, errTruncated
	}
	tag = b[0]
	if tag&0x1f == 0x1f {
		return 0, nil, nil, errHighTag
	}
	n := int(b[1])
	off := 2
	if n >= 0x80 {
		k := n & 0x7f
		if k == 0 || k > 3 || len(b) < 2+k {
			return 0, nil, nil, errLength
		}
		n = 0
		for _, c := range b[2 : 2+k] {
			n = n<<8 | int(c)
		}
		off = 2 + k
	}
	if n > len(b)-off {
		return 0, nil, nil, errBeyond
	}
	return tag, b[off : off+n], b[off+n:], nil
}

// Expect reads one element that must carry identifier want.
func Expect(b []byte, want byte) (body, rest []byte, err error) {
	tag, body, rest, err := ReadTLV(b)
	if err != nil {
		return nil, nil, err
	}
	if tag != want {
		return nil, nil, fmt.Errorf("%w: tag 0x%02x, want 0x%02x", ErrMalformed, tag, want)
	}
	return body, rest, nil
}

// Only reads b as exactly one element with identifier want.
func Only(b []byte, want byte) ([]byte, error) {
	body, rest, err := Expect(b, want)
	if err != nil {
		return nil, err
	}
	if len(rest) != 0 {
		return nil, errTrailing
	}
	return body, nil
}

// Fields walks the elements of a SEQUENCE body whose members are all
// context-tagged [n] EXPLICIT, handing each member's inner element to fn.
// Members must appear in increasing tag order, as DER requires.
func Fields(seq []byte, fn func(n int, inner []byte) error) error {
	last := -1
	for len(seq) > 0 {
		tag, body, rest, err := ReadTLV(seq)
		if err != nil {
			return err
		}
		if tag&0xe0 != 0xa0 {
			return fmt.Errorf("%w: member tag 0x%02x is not [n]", ErrMalformed, tag)
		}
		n := int(tag & 0x1f)
		if n <= last {
			return fmt.Errorf("%w: member [%d] out of order", ErrMalformed, n)
		}
		last = n
		if err := fn(n, body); err != nil {
			return err
		}
		seq = rest
	}
	return nil
}

// Int64 reads an INTEGER element that must fit in an int64.
func Int64(b []byte) (int64, error) {
	body, rest, err := Expect(b, TagInteger)
	if err != nil {
		return 0, err
	}
	if len(rest) != 0 || len(body) == 0 || len(body) > 8 {
		return 0, errInteger
	}
	v := int64(int8(body[0])) // sign-extend the first octet
	for _, c := range body[1:] {
		v = v<<8 | int64(c)
	}
	return v, nil
}

// Int32 reads an INTEGER element that must fit in an int32.
func Int32(b []byte) (int32, error) {
	v, err := Int64(b)
	if err != nil {
		return 0, err
	}
	if v != int64(int32(v)) {
		return 0, errInteger
	}
	return int32(v), nil
}

// Octets reads an OCTET STRING element.
func Octets(b []byte) ([]byte, error) { return Only(b, TagOctetString) }

// GeneralString reads a GeneralString (KerberosString, Realm) element.
func GeneralString(b []byte) ([]byte, error) { return Only(b, TagGeneralString) }
