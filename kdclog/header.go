package kdclog

import "bytes"

// splitHeader finds the program tag and the message of a log line in one of
// the forms the KDC's lines reach a file in:
//
//	FILE: target    Nov 29 21:00:00 host krb5kdc[1234](info): msg
//	RFC 3164 file   Nov 29 21:00:00 host krb5kdc[1234]: msg   (optionally <PRI> first)
//	RFC 3339 file   2024-11-29T21:00:00.123456+01:00 host krb5kdc[1234]: msg  (rsyslog, journalctl -o short-iso)
//	RFC 5424        <34>1 2024-11-29T21:00:00Z host krb5kdc 1234 - - msg
//
// The timestamp is skipped, not parsed: counting needs no time.
func splitHeader(line []byte) (prog Program, pid int, msg []byte, ok bool) {
	if prog, pid, msg, ok = splitFileHeader(line); ok {
		return prog, pid, msg, true
	}
	i := 0
	if len(line) > 0 && line[0] == '<' {
		j := 1
		for j < len(line) && j < 5 && isDigit(line[j]) {
			j++
		}
		if j == 1 || j >= len(line) || line[j] != '>' {
			return 0, 0, nil, false
		}
		i = j + 1
		if i+1 < len(line) && isDigit(line[i]) && line[i+1] == ' ' {
			return split5424(line[i+2:])
		}
	}
	rest := line[i:]
	switch {
	case len(rest) >= 16 && isMonth(rest) && rest[3] == ' ':
		// "Mmm dd hh:mm:ss " with a zero- (FILE:) or space-padded (syslog) day.
		j := 4
		if rest[j] == ' ' {
			j++
		}
		for j < len(rest) && isDigit(rest[j]) {
			j++
		}
		if j >= len(rest) || rest[j] != ' ' {
			return 0, 0, nil, false
		}
		j++
		if j+8 > len(rest) || rest[j+2] != ':' || rest[j+5] != ':' {
			return 0, 0, nil, false
		}
		j += 8
		for j < len(rest) && rest[j] != ' ' { // fractional seconds, a year
			j++
		}
		rest = rest[j:]
	case len(rest) > 0 && isDigit(rest[0]):
		sp := bytes.IndexByte(rest, ' ')
		if sp < 0 {
			return 0, 0, nil, false
		}
		rest = rest[sp:]
	default:
		return 0, 0, nil, false
	}
	rest = skipSpaces(rest)
	tok, after := nextToken(rest)
	if len(tok) == 0 {
		return 0, 0, nil, false
	}
	if tok[len(tok)-1] != ':' { // a host name; the tag follows
		tok, after = nextToken(skipSpaces(after))
		if len(tok) == 0 || tok[len(tok)-1] != ':' {
			return 0, 0, nil, false
		}
	}
	name, pid, ok := parseTag(tok[:len(tok)-1])
	if !ok {
		return 0, 0, nil, false
	}
	if len(after) > 0 && after[0] == ' ' {
		after = after[1:]
	}
	return programOf(name), pid, after, true
}

// splitFileHeader is the fast path for the common case, the FILE: target
// or RFC 3164 file of krb5kdc or kadmind: "Mmm dd hh:mm:ss host prog[pid](sev): ".
// Anything else falls through to the general code.
func splitFileHeader(line []byte) (prog Program, pid int, msg []byte, ok bool) {
	if len(line) < 32 || !fileTimestamp(line) {
		return 0, 0, nil, false
	}
	h := bytes.IndexByte(line[16:], ' ')
	if h <= 0 {
		return 0, 0, nil, false
	}
	t := line[16+h+1:]
	switch {
	case len(t) > 8 && t[7] == '[' && string(t[:7]) == "krb5kdc":
		prog = ProgramKDC
	case len(t) > 8 && t[7] == '[' && string(t[:7]) == "kadmind":
		prog = ProgramKadmind
	default:
		return 0, 0, nil, false
	}
	i := 8
	for i < len(t) && isDigit(t[i]) && i < 17 {
		pid = pid*10 + int(t[i]-'0')
		i++
	}
	if i == 8 || i >= len(t) || t[i] != ']' {
		return 0, 0, nil, false
	}
	i++
	if i < len(t) && t[i] == '(' {
		j := bytes.IndexByte(t[i:], ')')
		if j < 0 {
			return 0, 0, nil, false
		}
		i += j + 1
	}
	if i+1 >= len(t) || t[i] != ':' || t[i+1] != ' ' {
		return 0, 0, nil, false
	}
	return prog, pid, t[i+2:], true
}

// fileTimestamp reports whether line starts with "Mmm dd hh:mm:ss ".
func fileTimestamp(line []byte) bool {
	return len(line) > 16 && line[3] == ' ' && line[6] == ' ' && line[9] == ':' && line[12] == ':' && line[15] == ' ' && isMonth(line)
}

// split5424 handles what follows "<PRI>1 ": TIMESTAMP HOSTNAME APP-NAME
// PROCID MSGID STRUCTURED-DATA [MSG].
func split5424(rest []byte) (prog Program, pid int, msg []byte, ok bool) {
	var f [5][]byte
	for k := range f {
		f[k], rest = nextToken(rest)
		if len(f[k]) == 0 || len(rest) == 0 {
			return 0, 0, nil, false
		}
		rest = rest[1:]
	}
	// Structured data: "-" or one or more [id param="value" ...] elements,
	// where a value may hold an escaped "\]".
	switch {
	case len(rest) > 0 && rest[0] == '-':
		rest = rest[1:]
	default:
		for len(rest) > 0 && rest[0] == '[' {
			j := 1
			for j < len(rest) && rest[j] != ']' {
				if rest[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(rest) {
				return 0, 0, nil, false
			}
			rest = rest[j+1:]
		}
	}
	if len(rest) > 0 && rest[0] == ' ' {
		rest = rest[1:]
	}
	rest = bytes.TrimPrefix(rest, []byte("\xef\xbb\xbf")) // BOM
	if !bytes.Equal(f[3], []byte("-")) {
		pid, _ = atoi(f[3])
	}
	return programOf(basename(f[2])), pid, rest, true
}

// parseTag splits "krb5kdc[1234](info)", "krb5kdc[1234]" or "krb5kdc".
func parseTag(t []byte) (name []byte, pid int, ok bool) {
	if n := len(t); n > 0 && t[n-1] == ')' { // FILE: severity
		open := bytes.LastIndexByte(t, '(')
		if open < 0 {
			return nil, 0, false
		}
		t = t[:open]
	}
	if n := len(t); n > 0 && t[n-1] == ']' {
		open := bytes.LastIndexByte(t, '[')
		if open < 0 {
			return nil, 0, false
		}
		pid, ok = atoi(t[open+1 : n-1])
		if !ok {
			return nil, 0, false
		}
		t = t[:open]
	}
	if len(t) == 0 {
		return nil, 0, false
	}
	return basename(t), pid, true
}

func programOf(name []byte) Program {
	switch string(name) {
	case "krb5kdc":
		return ProgramKDC
	case "kadmind":
		return ProgramKadmind
	case "kadmin.local", "kdb5_util", "kadmin", "kdb5_ldap_util", "kproplog":
		return ProgramAdminTool
	}
	return ProgramOther
}

func basename(b []byte) []byte {
	if i := bytes.LastIndexByte(b, '/'); i >= 0 {
		return b[i+1:]
	}
	return b
}

// nextToken returns b up to the first space and the rest from that space.
func nextToken(b []byte) (tok, rest []byte) {
	if i := bytes.IndexByte(b, ' '); i >= 0 {
		return b[:i], b[i:]
	}
	return b, nil
}

func skipSpaces(b []byte) []byte {
	for len(b) > 0 && b[0] == ' ' {
		b = b[1:]
	}
	return b
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isMonth checks for an English month abbreviation (strftime %b, C locale).
func isMonth(b []byte) bool {
	switch string(b[:3]) {
	case "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec":
		return true
	}
	return false
}

// atoi parses a non-negative decimal of at most 9 digits.
func atoi(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if !isDigit(c) {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
