package kdclog

// Parse reads one log line (without its newline) into e and reports
// whether it was understood; if not, e.Reason says why. Parse allocates
// nothing and keeps no state: e's byte slices point into line.
func Parse(line []byte, e *Event) bool {
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
		e.Reason = parseKDC(msg, e)
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
