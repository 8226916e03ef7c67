package der

import (
	"bytes"
	"encoding/asn1"
	"errors"
	"math"
	"testing"
)

// encoding/asn1 is the reference: an independent DER encoder.
func TestIntegerMatchesEncodingASN1(t *testing.T) {
	values := []int64{0, 1, -1, 5, 127, 128, 255, 256, -128, -129, 32767, 32768, -32768, -32769,
		0x7fffff, 0x800000, 0x01000000, 0x7fffffff, 0x80000000, math.MaxInt32, math.MinInt32,
		math.MaxInt64, math.MinInt64}
	for _, v := range values {
		var w Writer
		w.Reset()
		w.Integer(v)
		want, err := asn1.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(w.Bytes(), want) {
			t.Errorf("Integer(%d) = %x, want %x", v, w.Bytes(), want)
		}
		got, err := Int64(w.Bytes())
		if err != nil || got != v {
			t.Errorf("Int64(%x) = %d, %v; want %d", w.Bytes(), got, err, v)
		}
		if g32, err := Int32(w.Bytes()); (err == nil) != (v == int64(int32(v))) || err == nil && int64(g32) != v {
			t.Errorf("Int32(%x) = %d, %v", w.Bytes(), g32, err)
		}
	}
}

// Both writers produce encoding/asn1's headers for every length form.
func TestHeaderLengthForms(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 255, 256, 65535, 65536, 1 << 20} {
		w := NewWriter(16) // grows
		w.Primitive(TagOctetString, make([]byte, n))
		want, _ := asn1.Marshal(make([]byte, n))
		if !bytes.Equal(w.Bytes(), want) {
			t.Fatalf("length %d: header %x, want %x", n, w.Bytes()[:6], want[:6])
		}
		if a := append(AppendHeader(nil, TagOctetString, n), make([]byte, n)...); !bytes.Equal(a, want) || TLVLen(n) != len(want) {
			t.Fatalf("length %d: AppendHeader %x, TLVLen %d; want %x", n, a[:6], TLVLen(n), want[:6])
		}
		body, err := Octets(w.Bytes())
		if err != nil || len(body) != n {
			t.Fatalf("length %d: parsed %d, %v", n, len(body), err)
		}
	}
}

func TestExplicitMatchesEncodingASN1(t *testing.T) {
	type s struct {
		A int64  `asn1:"explicit,tag:0"`
		B []byte `asn1:"explicit,tag:1"`
		C string `asn1:"explicit,tag:2,utf8"`
	}
	want, err := asn1.Marshal(s{A: -300, B: []byte{1, 2, 3}, C: "HTTP"})
	if err != nil {
		t.Fatal(err)
	}
	want[len(want)-6] = TagGeneralString // encoding/asn1 has no GeneralString
	var w Writer
	w.Reset()
	w.ExplicitString(2, "HTTP")
	w.ExplicitOctets(1, []byte{1, 2, 3})
	w.ExplicitInt(0, -300)
	w.Close(TagSequence, 0)
	if !bytes.Equal(w.Bytes(), want) {
		t.Fatalf("got %x, want %x", w.Bytes(), want)
	}
	seq, err := Only(w.Bytes(), TagSequence)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	err = Fields(seq, func(n int, in []byte) error {
		got = append(got, n)
		switch n {
		case 0:
			v, err := Int64(in)
			if v != -300 {
				t.Errorf("[0] = %d", v)
			}
			return err
		case 1:
			_, err := Octets(in)
			return err
		}
		v, err := GeneralString(in)
		if string(v) != "HTTP" {
			t.Errorf("[2] = %q", v)
		}
		return err
	})
	if err != nil || len(got) != 3 {
		t.Fatalf("fields %v, %v", got, err)
	}
}

func TestReadTLVRejects(t *testing.T) {
	for name, b := range map[string][]byte{
		"empty":            {},
		"one byte":         {0x30},
		"indefinite":       {0x30, 0x80, 0, 0},
		"long form 0":      {0x30, 0x80},
		"length too long":  {0x04, 0x05, 1, 2},
		"5 length octets":  {0x04, 0x85, 0, 0, 0, 0, 1, 0},
		"high tag number":  {0x1f, 0x01, 0x00},
		"truncated length": {0x04, 0x82, 0x01},
	} {
		if _, _, _, err := ReadTLV(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %x gives %v", name, b, err)
		}
	}
	for name, b := range map[string][]byte{
		"trailing":    {0x02, 0x01, 0x00, 0x00},
		"empty int":   {0x02, 0x00},
		"9-byte int":  {0x02, 0x09, 0, 0, 0, 0, 0, 0, 0, 0, 1},
		"octets":      {0x04, 0x01, 0x00},
		"wide int32":  {0x02, 0x05, 1, 0, 0, 0, 0},
		"constructed": {0x30, 0x03, 0x02, 0x01, 0x00},
	} {
		if _, err := Int32(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("Int32 %s: %x gives %v", name, b, err)
		}
	}
}

func TestFieldsOrder(t *testing.T) {
	for name, build := range map[string]func(w *Writer){
		"repeated": func(w *Writer) { w.ExplicitInt(1, 1); w.ExplicitInt(1, 2) },
		"reversed": func(w *Writer) { w.ExplicitInt(0, 1); w.ExplicitInt(1, 2) },
		"not [n]":  func(w *Writer) { w.Integer(1) },
	} {
		var w Writer
		w.Reset()
		build(&w)
		if err := Fields(w.Bytes(), func(int, []byte) error { return nil }); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// The engine's hot path relies on these allocating nothing, rejections of
// malformed lengths included.
func TestZeroAllocation(t *testing.T) {
	w := NewWriter(256)
	var enc []byte
	buf := make([]byte, 0, 64)
	if n := testing.AllocsPerRun(100, func() {
		w.Reset()
		w.ExplicitString(2, "EXAMPLE.ORG")
		w.ExplicitOctets(1, []byte{1, 2, 3})
		w.ExplicitInt(0, 1<<40)
		w.Close(TagSequence, 0)
		enc = w.Bytes()
		buf = AppendHeader(buf[:0], TagSequence, 300)
	}); n != 0 {
		t.Errorf("writing: %v allocations", n)
	}
	fn := func(n int, in []byte) error {
		_, _, _, err := ReadTLV(in)
		return err
	}
	if n := testing.AllocsPerRun(100, func() {
		seq, err := Only(enc, TagSequence)
		if err == nil {
			err = Fields(seq, fn)
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := ReadTLV([]byte{0x04, 0x82, 0x01}); err == nil {
			t.Fatal("accepted")
		}
	}); n != 0 {
		t.Errorf("reading: %v allocations", n)
	}
}

// What ReadTLV accepts re-encodes to the same bytes; no input panics.
func FuzzReadTLV(f *testing.F) {
	f.Add([]byte{0x30, 0x03, 0x02, 0x01, 0x05})
	f.Add([]byte{0x04, 0x81, 0x80})
	f.Add([]byte{0x04, 0x82, 0x01, 0x00})
	f.Add([]byte{0xa1, 0x83, 0x01, 0x00, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		tag, body, rest, err := ReadTLV(b)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("%v is not ErrMalformed", err)
			}
			return
		}
		n := len(b) - len(rest)
		if minimal := HeaderLen(len(body)) == n-len(body); minimal {
			if a := append(AppendHeader(nil, tag, len(body)), body...); !bytes.Equal(a, b[:n]) {
				t.Fatalf("AppendHeader re-encodes %x as %x", b[:n], a)
			}
			var w Writer
			w.Reset()
			w.Primitive(tag, body)
			if !bytes.Equal(w.Bytes(), b[:n]) {
				t.Fatalf("Writer re-encodes %x as %x", b[:n], w.Bytes())
			}
		}
		_ = Fields(body, func(int, []byte) error { return nil })
		_, _ = Int64(b)
	})
}

func BenchmarkDERWrite(b *testing.B) {
	w := NewWriter(256)
	var t [15]byte
	b.ReportAllocs()
	for b.Loop() {
		w.Reset()
		w.ExplicitTime(3, &t)
		w.ExplicitString(2, "EXAMPLE.ORG")
		w.ExplicitOctets(1, make([]byte, 200))
		w.ExplicitInt(0, 1<<40)
		w.Close(TagSequence, 0)
	}
}

func BenchmarkDERRead(b *testing.B) {
	w := NewWriter(256)
	w.ExplicitString(2, "EXAMPLE.ORG")
	w.ExplicitOctets(1, make([]byte, 200))
	w.ExplicitInt(0, 1<<40)
	w.Close(TagSequence, 0)
	enc := w.Bytes()
	fn := func(n int, in []byte) error {
		_, _, _, err := ReadTLV(in)
		return err
	}
	b.ReportAllocs()
	for b.Loop() {
		seq, err := Only(enc, TagSequence)
		if err == nil {
			err = Fields(seq, fn)
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}
