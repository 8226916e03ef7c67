package kdclog

import "bytes"

// Parser is Parse with a memory of the last etype lists it read: a KDC's
// clients send the same few lists over and over, so comparing with the
// previous one (a vectorised memcmp) replaces scanning it most of the
// time. A Parser is not safe for concurrent use; its zero value is ready.
type Parser struct {
	offered     []byte // the last requested etype list and what it held
	offeredWeak int
	rep         []byte // the last "rep=..., tkt=..., ses=..." of an ISSUE line
	reps        [3]Etype
	hdr         []byte // the last " host krb5kdc[pid](sev): " after a FILE: timestamp
	hdrProg     Program
	hdrPID      int
}

// Parse reads one log line (without its newline) into e and reports
// whether it was understood; if not, e.Reason says why. Parse allocates
// nothing and keeps no state: e's byte slices point into line.
func Parse(line []byte, e *Event) bool {
	return parseLine(nil, line, e)
}

// Parse is the package's Parse with the Parser's memory.
func (p *Parser) Parse(line []byte, e *Event) bool {
	return parseLine(p, line, e)
}

func parseLine(p *Parser, line []byte, e *Event) bool {
	e.reset()
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	prog, pid, msg, ok := p.header(line)
	if !ok {
		e.Reason = ReasonNoHeader
		return false
	}
	return parseMessage(p, prog, pid, msg, e)
}

// ParseMessage reads one message whose program and pid come apart from it,
// as the systemd journal keeps them (SYSLOG_IDENTIFIER, _PID, MESSAGE):
// the same parser as Parse, without a header to split.
func (p *Parser) ParseMessage(program []byte, pid int, msg []byte, e *Event) bool {
	e.reset()
	if n := len(msg); n > 0 && msg[n-1] == '\r' {
		msg = msg[:n-1]
	}
	return parseMessage(p, programOf(program), pid, msg, e)
}

func parseMessage(p *Parser, prog Program, pid int, msg []byte, e *Event) bool {
	e.Program, e.PID = prog, pid
	switch prog {
	case ProgramKDC:
		e.Reason = parseKDC(p, msg, e)
	case ProgramKadmind:
		e.Reason = parseKadmind(msg, e)
	case ProgramAdminTool:
		e.Kind = KindInfo
	default:
		e.Reason = ReasonOtherProgram
	}
	if e.Reason != ReasonNone {
		e.Kind = KindUnknown
		return false
	}
	return true
}

// header is splitHeader through the Parser's memory: the lines of one
// process differ from each other before the header's end only in their
// timestamp.
func (p *Parser) header(line []byte) (prog Program, pid int, msg []byte, ok bool) {
	if p == nil {
		return splitHeader(line)
	}
	if n := 15 + len(p.hdr); p.hdr != nil && len(line) > n && fileTimestamp(line) && bytes.Equal(line[15:n], p.hdr) {
		return p.hdrProg, p.hdrPID, line[n:], true
	}
	prog, pid, msg, ok = splitHeader(line)
	if ok && (prog == ProgramKDC || prog == ProgramKadmind) && fileTimestamp(line) {
		p.hdr = append(p.hdr[:0], line[15:len(line)-len(msg)]...)
		p.hdrProg, p.hdrPID = prog, pid
	}
	return prog, pid, msg, ok
}

// list returns the etype list at the start of m, up to its '}', through
// the Parser's memory: a list equal to the last one is not scanned again.
// weak is the number of weak types in it.
func (p *Parser) list(m []byte) (list []byte, weak int, ok bool) {
	if p != nil && len(p.offered) > 0 && len(m) > len(p.offered) && m[len(p.offered)] == '}' && bytes.Equal(m[:len(p.offered)], p.offered) {
		return m[:len(p.offered)], p.offeredWeak, true
	}
	end := bytes.IndexByte(m, '}')
	if end < 0 {
		return nil, 0, false
	}
	weak = countWeak(m[:end])
	if p != nil {
		p.offered = append(p.offered[:0], m[:end]...)
		p.offeredWeak = weak
	}
	return m[:end], weak, true
}

// repEtypes reads the "rep=..., tkt=..., ses=...}" at the start of m into
// e through the Parser's memory and returns its length, up to the '}'.
func (p *Parser) repEtypes(m []byte, e *Event, issue bool) (int, bool) {
	if p != nil && len(p.rep) > 0 && len(m) > len(p.rep) && m[len(p.rep)] == '}' && bytes.Equal(m[:len(p.rep)], p.rep) {
		if issue {
			e.Rep, e.Tkt, e.Ses = p.reps[0], p.reps[1], p.reps[2]
		}
		return len(p.rep), true
	}
	end := bytes.IndexByte(m, '}')
	if end < 0 {
		return 0, false
	}
	if issue {
		parseRepEtypes(m[:end], e)
		if p != nil {
			p.reps = [3]Etype{e.Rep, e.Tkt, e.Ses}
			p.rep = append(p.rep[:0], m[:end]...)
		}
	}
	return end, true
}
