package ulog

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// realHeader is the header of a harness primary's update log
// (collector/testdata/ulog, as kproplog -h printed it).
func realHeader(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile("../../collector/testdata/ulog/primary.ulog-header")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParse(t *testing.T) {
	b := realHeader(t)
	h, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Header{Magic: HeaderMagic, Version: 1, Entries: 5, FirstSerial: 1, LastSerial: 5, State: StateStable, BlockSize: 2048,
		FirstTime: time.Unix(1796092277, 694997000), LastTime: time.Unix(1796092589, 110517000)}
	if h != want {
		t.Errorf("got %+v\nwant %+v", h, want)
	}
	// The same header as a big-endian host writes it.
	be := make([]byte, HeaderSize)
	binary.BigEndian.PutUint32(be[0:], HeaderMagic)
	binary.BigEndian.PutUint16(be[4:], 1)
	for _, off := range []int{8, 12, 16, 20, 24, 28, 32} {
		binary.BigEndian.PutUint32(be[off:], binary.LittleEndian.Uint32(b[off:]))
	}
	binary.BigEndian.PutUint16(be[36:], 1)
	binary.BigEndian.PutUint16(be[38:], 2048)
	if h, err := Parse(be); err != nil || h != want {
		t.Errorf("big-endian: %+v, %v", h, err)
	}
}

func TestReadFileErrors(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		data []byte
		want error
	}{
		"short":   {[]byte{0x23, 0x23, 0x66, 0x06}, ErrShort},
		"empty":   {nil, ErrShort},
		"foreign": {make([]byte, 100), ErrBadMagic},
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, tc.data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadFile(p); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	if _, err := ReadFile(filepath.Join(dir, "none")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
}

// FuzzParse: any bytes parse or fail cleanly; a parsed header re-read
// from the same bytes is the same.
func FuzzParse(f *testing.F) {
	f.Add(realHeader(f))
	f.Add(make([]byte, 40))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Parse(b)
		if err != nil {
			if len(b) >= HeaderSize && !errors.Is(err, ErrBadMagic) {
				t.Fatalf("%v for %d bytes", err, len(b))
			}
			return
		}
		if h.Magic != HeaderMagic || len(b) < HeaderSize {
			t.Fatalf("parsed %+v from %x", h, b)
		}
	})
}
