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
	prog, pid, msg, ok := splitHeader(line)
	if !ok {
		e.Reason = ReasonNoHeader
		return false
	}
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

// weakIn is countWeak through the Parser's memory.
func (p *Parser) weakIn(list []byte) int {
	if p == nil {
		return countWeak(list)
	}
	if !bytes.Equal(list, p.offered) || p.offered == nil {
		p.offeredWeak = countWeak(list)
		p.offered = append(p.offered[:0], list...)
	}
	return p.offeredWeak
}

// repEtypes is parseRepEtypes through the Parser's memory.
func (p *Parser) repEtypes(b []byte, e *Event) {
	if p == nil {
		parseRepEtypes(b, e)
		return
	}
	if p.rep == nil || !bytes.Equal(b, p.rep) {
		parseRepEtypes(b, e)
		p.reps = [3]Etype{e.Rep, e.Tkt, e.Ses}
		p.rep = append(p.rep[:0], b...)
		return
	}
	e.Rep, e.Tkt, e.Ses = p.reps[0], p.reps[1], p.reps[2]
}
