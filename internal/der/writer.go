package der

// Writer builds DER back to front: members are prepended in reverse order
// and a constructed element is closed once its contents are written, so every
// length is known when its header is emitted and nothing is copied twice.
// The zero Writer is ready after Reset; NewWriter sizes its buffer.
type Writer struct {
	buf []byte // data lives in buf[off:]
	off int
}

// NewWriter returns an empty Writer with room for size bytes.
func NewWriter(size int) Writer { return Writer{buf: make([]byte, size), off: size} }

// Reset empties the Writer, keeping its buffer.
func (w *Writer) Reset() { w.off = len(w.buf) }

// Len returns the number of bytes written so far; it marks where a
// constructed element's contents begin (see Close).
func (w *Writer) Len() int { return len(w.buf) - w.off }

// Bytes returns the encoding; valid until the next write.
func (w *Writer) Bytes() []byte { return w.buf[w.off:] }

func (w *Writer) grow(n int) {
	if w.off >= n {
		return
	}
	size := 2*len(w.buf) + n
	nb := make([]byte, size)
	used := w.Len()
	copy(nb[size-used:], w.buf[w.off:])
	w.buf, w.off = nb, size-used
}

// Raw prepends already-encoded bytes.
func (w *Writer) Raw(p []byte) {
	w.grow(len(p))
	w.off -= len(p)
	copy(w.buf[w.off:], p)
}

// RawString prepends the bytes of s.
func (w *Writer) RawString(s string) {
	w.grow(len(s))
	w.off -= len(s)
	copy(w.buf[w.off:], s)
}

// Header prepends an identifier and a definite length. It writes in place
// rather than through AppendHeader, which measured a third slower here;
// FuzzReadTLV and TestHeaderLengthForms hold the two to the same bytes.
func (w *Writer) Header(tag byte, n int) {
	w.grow(5)
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

// Close prepends the header of a constructed element whose contents were
// written since mark (a value returned by Len).
func (w *Writer) Close(tag byte, mark int) { w.Header(tag, w.Len()-mark) }

// Primitive prepends a primitive element.
func (w *Writer) Primitive(tag byte, p []byte) {
	w.Raw(p)
	w.Header(tag, len(p))
}

// Integer prepends a minimally encoded INTEGER.
func (w *Writer) Integer(v int64) {
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
	w.Primitive(TagInteger, b[i:])
}

// ExplicitInt prepends [n] INTEGER.
func (w *Writer) ExplicitInt(n int, v int64) {
	m := w.Len()
	w.Integer(v)
	w.Close(Ctx(n), m)
}

// ExplicitOctets prepends [n] OCTET STRING.
func (w *Writer) ExplicitOctets(n int, p []byte) {
	m := w.Len()
	w.Primitive(TagOctetString, p)
	w.Close(Ctx(n), m)
}

// ExplicitString prepends [n] GeneralString.
func (w *Writer) ExplicitString(n int, s string) {
	m := w.Len()
	w.RawString(s)
	w.Header(TagGeneralString, len(s))
	w.Close(Ctx(n), m)
}

// ExplicitTime prepends [n] KerberosTime (GeneralizedTime YYYYMMDDHHMMSSZ).
func (w *Writer) ExplicitTime(n int, t *[15]byte) {
	m := w.Len()
	w.Primitive(TagGeneralizedTime, t[:])
	w.Close(Ctx(n), m)
}

// Appending front to back, for encoders that compute every size first.

// HeaderLen returns the size of an identifier and length for n content bytes.
func HeaderLen(n int) int {
	switch {
	case n < 0x80:
		return 2
	case n <= 0xff:
		return 3
	case n <= 0xffff:
		return 4
	}
	return 5
}

// TLVLen returns the size of an element with n content bytes.
func TLVLen(n int) int { return HeaderLen(n) + n }

// AppendHeader appends an identifier and a definite length.
func AppendHeader(dst []byte, tag byte, n int) []byte {
	switch {
	case n < 0x80:
		return append(dst, tag, byte(n))
	case n <= 0xff:
		return append(dst, tag, 0x81, byte(n))
	case n <= 0xffff:
		return append(dst, tag, 0x82, byte(n>>8), byte(n))
	}
	return append(dst, tag, 0x83, byte(n>>16), byte(n>>8), byte(n))
}
