package krb5

import (
	"bytes"
	"encoding/asn1"
	"math"
	"testing"
	"time"
)

func TestIntegerMatchesEncodingASN1(t *testing.T) {
	values := []int64{0, 1, -1, 5, 127, 128, 255, 256, -128, -129, 32767, 32768, -32768, -32769,
		0x7fffff, 0x800000, 0x01000000, 0x7fffffff, 0x80000000, math.MaxInt32, math.MinInt32,
		math.MaxInt64, math.MinInt64}
	for _, v := range values {
		var w derWriter
		w.reset()
		w.integer(v)
		want, err := asn1.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(w.bytes(), want) {
			t.Errorf("integer(%d) = %x, want %x", v, w.bytes(), want)
		}
		got, err := parseInt(w.bytes())
		if err != nil || got != v {
			t.Errorf("parseInt(%x) = %d, %v; want %d", w.bytes(), got, err, v)
		}
	}
}

func TestHeaderLengthForms(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 255, 256, 65535, 65536, 1 << 20} {
		var w derWriter
		w.reset()
		w.primitive(tagOctetString, make([]byte, n))
		want, _ := asn1.Marshal(make([]byte, n))
		if !bytes.Equal(w.bytes(), want) {
			t.Fatalf("length %d: header %x, want %x", n, w.bytes()[:6], want[:6])
		}
		body, err := parseOctets(w.bytes())
		if err != nil || len(body) != n {
			t.Fatalf("length %d: parsed %d, %v", n, len(body), err)
		}
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
		if _, _, _, err := readTLV(b); err == nil {
			t.Errorf("%s: %x accepted", name, b)
		}
	}
}

func TestFieldsOrder(t *testing.T) {
	var w derWriter
	w.reset()
	w.explicitInt(1, 1)
	w.explicitInt(1, 2)
	if err := fields(w.bytes(), func(int, []byte) error { return nil }); err == nil {
		t.Error("repeated member accepted")
	}
}

func TestKrbTime(t *testing.T) {
	for _, tm := range []time.Time{
		time.Date(2025, 11, 30, 6, 12, 59, 999, time.UTC),
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2037, 12, 31, 23, 59, 59, 0, time.FixedZone("X", 3600)),
	} {
		var b [15]byte
		formatKrbTime(&b, tm)
		if want := tm.UTC().Format("20060102150405Z"); string(b[:]) != want {
			t.Errorf("format %v = %s, want %s", tm, b[:], want)
		}
		var w derWriter
		w.reset()
		w.primitive(tagGeneralizedTime, b[:])
		got, err := parseKrbTime(w.bytes())
		if err != nil || !got.Equal(tm.Truncate(time.Second)) {
			t.Errorf("parse %s = %v, %v", b[:], got, err)
		}
	}
	for _, bad := range []string{"2025113006125Z", "20251130061259+", "2025113a061259Z", "20251330061259Z", "20251130241259Z"} {
		var w derWriter
		w.reset()
		w.primitive(tagGeneralizedTime, []byte(bad))
		if _, err := parseKrbTime(w.bytes()); err == nil {
			t.Errorf("parse %q accepted", bad)
		}
	}
}
