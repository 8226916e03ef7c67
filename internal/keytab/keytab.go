// Package keytab reads MIT keytab files (the FILE: format, versions 1 and
// 2). It is a leaf: the configuration checks a module's keytab with it and
// the Kerberos engine loads its keys with it, and neither the log parser
// (which imports the configuration) nor anything else links the engine or
// gokrb5 for it.
//
// Errors say where a file goes wrong in words and numbers only: a keytab
// holds keys, so no byte of it is ever quoted.
package keytab

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Bounds of the key files the project reads. A keytab of the bench's
// thousands of users stays far below MaxFile; a password file is one line.
const (
	MaxFile         = 64 << 20
	MaxPasswordFile = 64 << 10
)

// Entry is one key of a keytab.
type Entry struct {
	Realm      string
	Components []string
	NameType   uint32 // 0 in version 1 files, which do not record it
	Timestamp  uint32
	// KVNO is the 32-bit key version where the entry has one that is not
	// zero, else the 8-bit one (as MIT reads it).
	KVNO    uint32
	EncType int32
	Key     []byte
}

// Parse reads the entries of a keytab file's bytes, deleted entries (holes)
// skipped. Key bytes are copied out of b.
func Parse(b []byte) ([]Entry, error) {
	if len(b) < 2 || b[0] != 5 || (b[1] != 1 && b[1] != 2) {
		return nil, errors.New("malformed keytab: not a keytab (bad header)")
	}
	version := b[1]
	order := binary.ByteOrder(binary.BigEndian)
	if version == 1 {
		order = binary.NativeEndian // version 1 wrote the host's order
	}
	var out []Entry
	for n, off := 1, 2; len(b)-off >= 4; n++ {
		size := int64(int32(order.Uint32(b[off:])))
		off += 4
		if size == 0 {
			break // the end, as MIT's reader takes it
		}
		deleted := size < 0
		if deleted {
			size = -size // a hole of that size
		}
		if size > int64(len(b)-off) {
			return nil, fmt.Errorf("malformed keytab: entry %d is truncated", n)
		}
		rec := b[off : off+int(size)]
		off += int(size)
		if deleted {
			continue
		}
		e, ok := parseEntry(rec, version, order)
		if !ok {
			return nil, fmt.Errorf("malformed keytab: entry %d does not parse", n)
		}
		out = append(out, e)
	}
	return out, nil
}

// reader walks one entry's record; any read past its end sets bad.
type reader struct {
	b     []byte
	order binary.ByteOrder
	bad   bool
}

func (r *reader) take(n int) []byte {
	if r.bad || n > len(r.b) {
		r.bad = true
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) u8() uint8 {
	if p := r.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if p := r.take(2); p != nil {
		return r.order.Uint16(p)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if p := r.take(4); p != nil {
		return r.order.Uint32(p)
	}
	return 0
}

// data is a counted string: a 16-bit length and that many bytes.
func (r *reader) data() []byte { return r.take(int(r.u16())) }

func parseEntry(rec []byte, version byte, order binary.ByteOrder) (Entry, bool) {
	r := &reader{b: rec, order: order}
	var e Entry
	count := int(r.u16())
	if version == 1 {
		count-- // version 1 counted the realm among the components
	}
	if count < 0 {
		return e, false
	}
	e.Realm = string(r.data())
	for i := 0; i < count && !r.bad; i++ {
		e.Components = append(e.Components, string(r.data()))
	}
	if version != 1 {
		e.NameType = r.u32()
	}
	e.Timestamp = r.u32()
	e.KVNO = uint32(r.u8())
	e.EncType = int32(int16(r.u16())) // signed, as MIT and gokrb5 read it
	e.Key = append([]byte(nil), r.data()...)
	if r.bad {
		return Entry{}, false
	}
	if len(r.b) >= 4 {
		if v := r.u32(); v != 0 {
			e.KVNO = v
		}
	}
	return e, true
}
