package journal

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonEntry reads the fields this package needs out of one line of
// `journalctl --output=json`: a flat object whose values are strings, null
// (a field too large or absent) or arrays of byte values (a field that is
// not valid UTF-8). A hand-written scanner rather than encoding/json: it
// runs once per KDC request and allocates nothing once its buffers have
// grown. Field slices are valid until the next parse.
type jsonEntry struct {
	message, ident, cursor []byte
	pid                    int
	// What journald recorded of the sender, which no client can set: its
	// process name, uid and unit (uid -1 when absent); for a suppression
	// entry the same of the process it is about (OBJECT_*).
	comm, unit       []byte
	uid              int64
	objComm, objUnit []byte
	objUID           int64
	// Where the entry is in the journal: __REALTIME_TIMESTAMP,
	// __MONOTONIC_TIMESTAMP (µs, 0 when absent) and _BOOT_ID.
	realtime, monotonic uint64
	boot                []byte
	// dropped: MESSAGE_ID is journald's suppression entry's and
	// _TRANSPORT is "driver" (journald's own, a field no client can set);
	// nDropped is N_DROPPED.
	dropped  bool
	nDropped uint64

	// one scratch buffer per field kept: unescaped strings land here
	// (slotScratch for keys and fields not kept)
	bufs [nSlots][]byte
}

const (
	fMessage = iota
	fIdent
	fCursor
	fPID
	fSyslogPID
	fMessageID
	fTransport
	fNDropped
	fComm
	fUID
	fUnit
	fObjComm
	fObjUID
	fObjUnit
	fRealtime
	fMonotonic
	fBoot
	fOther
)

// slotOf is the scratch buffer of a kept string field.
var slotOf = [fOther + 1]int8{fMessage: 1, fIdent: 2, fCursor: 3, fComm: 4, fUnit: 5, fObjComm: 6, fObjUnit: 7, fBoot: 8}

const (
	slotScratch = 0
	nSlots      = 9
)

func fieldOf(key []byte) int {
	switch string(key) { // no allocation: the conversion is only compared
	case "MESSAGE":
		return fMessage
	case "SYSLOG_IDENTIFIER":
		return fIdent
	case "__CURSOR":
		return fCursor
	case "_PID":
		return fPID
	case "SYSLOG_PID":
		return fSyslogPID
	case "MESSAGE_ID":
		return fMessageID
	case "_TRANSPORT":
		return fTransport
	case "N_DROPPED":
		return fNDropped
	case "_COMM":
		return fComm
	case "_UID":
		return fUID
	case "_SYSTEMD_UNIT":
		return fUnit
	case "OBJECT_COMM":
		return fObjComm
	case "OBJECT_UID":
		return fObjUID
	case "OBJECT_SYSTEMD_UNIT":
		return fObjUnit
	case "__REALTIME_TIMESTAMP":
		return fRealtime
	case "__MONOTONIC_TIMESTAMP":
		return fMonotonic
	case "_BOOT_ID":
		return fBoot
	}
	return fOther
}

// parse reports whether line is a well-formed JSON object of string,
// null and byte-array values.
func (j *jsonEntry) parse(line []byte) bool {
	j.message, j.ident, j.cursor, j.pid = nil, nil, nil, 0
	j.dropped, j.nDropped = false, 0
	j.comm, j.unit, j.uid, j.objComm, j.objUnit, j.objUID = nil, nil, -1, nil, nil, -1
	j.realtime, j.monotonic, j.boot = 0, 0, nil
	syslogPID := 0
	droppedID, driver := false, false
	s := scanner{b: line}
	if !s.skip('{') {
		return false
	}
	if s.peek() == '}' {
		s.i++
		return s.end()
	}
	for {
		key, ok := s.str(&j.bufs[slotScratch])
		if !ok || !s.skip(':') {
			return false
		}
		f := fieldOf(key)
		slot := slotOf[f]
		var val []byte
		switch s.peek() {
		case '"':
			val, ok = s.str(&j.bufs[slot])
		case '[':
			val, ok = s.bytesArray(&j.bufs[slot])
		case 'n':
			ok = s.literal("null")
		default:
			return false
		}
		if !ok {
			return false
		}
		switch f {
		case fMessage:
			j.message = val
		case fIdent:
			j.ident = val
		case fCursor:
			j.cursor = val
		case fPID:
			j.pid = atoiPID(val)
		case fSyslogPID:
			syslogPID = atoiPID(val)
		case fMessageID:
			droppedID = string(val) == DroppedMessageID
		case fTransport:
			driver = string(val) == "driver"
		case fNDropped:
			j.nDropped, _ = strconv.ParseUint(string(val), 10, 32)
		case fComm:
			j.comm = val
		case fUID:
			j.uid = atoiUID(val)
		case fUnit:
			j.unit = val
		case fObjComm:
			j.objComm = val
		case fObjUID:
			j.objUID = atoiUID(val)
		case fObjUnit:
			j.objUnit = val
		case fRealtime:
			j.realtime, _ = strconv.ParseUint(string(val), 10, 64)
		case fMonotonic:
			j.monotonic, _ = strconv.ParseUint(string(val), 10, 64)
		case fBoot:
			j.boot = val
		}
		switch s.next() {
		case ',':
			continue
		case '}':
			if j.pid == 0 {
				j.pid = syslogPID
			}
			j.dropped = droppedID && driver
			return s.end()
		default:
			return false
		}
	}
}

func atoiPID(b []byte) int {
	n, err := strconv.Atoi(string(b)) // compiler avoids the allocation
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// atoiUID is a uid field's value, -1 if it is none.
func atoiUID(b []byte) int64 {
	n, err := strconv.ParseUint(string(b), 10, 32)
	if err != nil {
		return -1
	}
	return int64(n)
}

type scanner struct {
	b []byte
	i int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) next() byte {
	c := s.peek()
	if c != 0 {
		s.i++
	}
	return c
}

func (s *scanner) skip(c byte) bool { return s.next() == c }

func (s *scanner) end() bool {
	s.ws()
	return s.i == len(s.b)
}

func (s *scanner) literal(lit string) bool {
	s.ws()
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

// str reads a string; without escapes it returns a slice of the line,
// otherwise the unescaped bytes in *buf.
func (s *scanner) str(buf *[]byte) ([]byte, bool) {
	if !s.skip('"') {
		return nil, false
	}
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return s.b[start : s.i-1], true
		case c == '\\':
			return s.strEscaped(start, buf)
		case c < 0x20:
			return nil, false
		}
		s.i++
	}
	return nil, false
}

func (s *scanner) strEscaped(start int, buf *[]byte) ([]byte, bool) {
	out := append((*buf)[:0], s.b[start:s.i]...)
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			*buf = out
			return out, true
		case c < 0x20:
			return nil, false
		case c != '\\':
			out = append(out, c)
			s.i++
			continue
		}
		if s.i+1 >= len(s.b) {
			return nil, false
		}
		e := s.b[s.i+1]
		s.i += 2
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return nil, false
			}
			if utf16.IsSurrogate(r) {
				// A pair makes one rune; a lone half is U+FFFD and the
				// escape after it is read on its own, as encoding/json does.
				d := utf8.RuneError
				if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
					save := s.i
					s.i += 2
					if r2, ok := s.hex4(); ok {
						d = utf16.DecodeRune(r, r2)
					}
					if d == utf8.RuneError {
						s.i = save
					}
				}
				r = d
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, false
		}
	}
	return nil, false
}

func (s *scanner) hex4() (rune, bool) {
	if s.i+4 > len(s.b) {
		return 0, false
	}
	var r rune
	for _, c := range s.b[s.i : s.i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	s.i += 4
	return r, true
}

// bytesArray reads [n, n, ...] of byte values into *buf.
func (s *scanner) bytesArray(buf *[]byte) ([]byte, bool) {
	if !s.skip('[') {
		return nil, false
	}
	out := (*buf)[:0]
	if s.peek() == ']' {
		s.i++
		*buf = out
		return out, true
	}
	for {
		s.ws()
		n, digits := 0, 0
		for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' && digits < 4 {
			n = n*10 + int(s.b[s.i]-'0')
			s.i++
			digits++
		}
		if digits == 0 || n > 255 {
			return nil, false
		}
		out = append(out, byte(n))
		switch s.next() {
		case ',':
		case ']':
			*buf = out
			return out, true
		default:
			return nil, false
		}
	}
}
