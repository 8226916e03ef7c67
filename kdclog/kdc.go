package kdclog

import "bytes"

var (
	prefixAS          = []byte("AS_REQ ")
	prefixTGS         = []byte("TGS_REQ ")
	prefixPreauth     = []byte("preauth (")
	suffixVerifyFail  = []byte(") verify failure: ")
	prefixDispatch    = []byte("DISPATCH: repeated (retransmitted?) request from ")
	suffixDropping    = []byte("dropping repeated request")
	sepColon          = []byte(": ")
	sepFor            = []byte(" for ")
	prefixAuthtime    = []byte("authtime ")
	prefixEtypes      = []byte("etypes {")
	morePreauthSuffix = []byte(", More preauthentication data is required")
)

// parseKDC reads the message part of a krb5kdc line into e.
func parseKDC(m []byte, e *Event) Reason {
	switch {
	case bytes.HasPrefix(m, prefixAS):
		e.Request = RequestAS
		return parseRequest(m[len(prefixAS):], e)
	case bytes.HasPrefix(m, prefixTGS):
		e.Request = RequestTGS
		if len(m) > len(prefixTGS) && m[len(prefixTGS)] != '(' {
			// SERVER_NOMATCH form without the etype list:
			// "TGS_REQ 10.0.0.1: STATUS: authtime 0, client for server, 2nd tkt client X".
			return parseAfterEtypes(m[len(prefixTGS):], e)
		}
		return parseRequest(m[len(prefixTGS):], e)
	case bytes.HasPrefix(m, []byte("TGS_REQ: ")): // "issuing TGT", old "SESSION KEY or MUTUAL"
		e.Kind = KindInfo
		return ReasonNone
	case bytes.HasPrefix(m, prefixPreauth):
		return parsePreauth(m[len(prefixPreauth):], e)
	case bytes.HasPrefix(m, prefixDispatch):
		e.Kind = KindRetransmit
		if bytes.HasSuffix(m, suffixDropping) {
			e.Retransmit = RetransmitDropped
		}
		return ReasonNone
	case bytes.HasPrefix(m, []byte("... ")):
		switch {
		case bytes.HasPrefix(m[4:], []byte("PROTOCOL-TRANSITION ")):
			e.Kind, e.S4U = KindS4U, S4UProtocolTransition
		case bytes.HasPrefix(m[4:], []byte("CONSTRAINED-DELEGATION ")):
			e.Kind, e.S4U = KindS4U, S4UConstrainedDelegation
		default:
			return ReasonUnknownMessage
		}
		return ReasonNone
	}
	return parseKDCOther(m, e)
}

// parseKDCOther handles the rare lines: lifecycle, network set-up.
func parseKDCOther(m []byte, e *Event) Reason {
	switch string(m) {
	case "commencing operation":
		e.Kind, e.Lifecycle = KindLifecycle, LifecycleStarted
		return ReasonNone
	case "shutting down":
		e.Kind, e.Lifecycle = KindLifecycle, LifecycleStopping
		return ReasonNone
	case "too many connections":
		e.Kind = KindTooManyConns
		return ReasonNone
	case "setting up network...", "Got signal to reset", "Got signal to request exit", "creating worker processes":
		e.Kind = KindInfo
		return ReasonNone
	}
	switch {
	case bytes.HasPrefix(m, []byte("creating ")) && bytes.HasSuffix(m, []byte(" worker processes")):
		n, ok := atoi(m[len("creating ") : len(m)-len(" worker processes")])
		if !ok {
			return ReasonMalformed
		}
		e.Kind, e.Lifecycle, e.Workers = KindLifecycle, LifecycleWorkersCreated, n
	case bytes.HasPrefix(m, []byte("worker ")) && bytes.Contains(m, []byte(" exited with status ")):
		e.Kind, e.Lifecycle = KindLifecycle, LifecycleWorkerExited
	case bytes.HasPrefix(m, []byte("signal ")) && bytes.HasSuffix(m, []byte(" received in supervisor")):
		e.Kind, e.Lifecycle = KindLifecycle, LifecycleSupervisorSignal
	case bytes.HasPrefix(m, []byte("preauth ")) && bytes.Contains(m, []byte(" failed to initialize: ")):
		e.Kind, e.Lifecycle = KindLifecycle, LifecyclePreauthInitFailed
	case bytes.HasPrefix(m, []byte("closing down fd ")),
		bytes.HasPrefix(m, []byte("set up ")),
		bytes.HasPrefix(m, []byte("dropping ")),
		bytes.HasPrefix(m, []byte("Setting up ")),
		bytes.HasPrefix(m, []byte("listening on ")):
		e.Kind = KindInfo
	default:
		return ReasonUnknownMessage
	}
	return ReasonNone
}

// parseRequest reads "(N etypes {...}) ADDR: STATUS: ...", after "AS_REQ ".
func parseRequest(m []byte, e *Event) Reason {
	if len(m) < 2 || m[0] != '(' {
		return ReasonMalformed
	}
	m = m[1:]
	sp := bytes.IndexByte(m, ' ')
	if sp <= 0 {
		return ReasonMalformed
	}
	n, ok := atoi(m[:sp])
	if !ok || !bytes.HasPrefix(m[sp:], []byte(" etypes {")) {
		return ReasonMalformed
	}
	m = m[sp+len(" etypes {"):]
	end := bytes.Index(m, []byte("}) "))
	if end < 0 {
		return ReasonMalformed
	}
	e.Offered = n
	e.OfferedWeak = countWeak(m[:end])
	return parseAfterEtypes(m[end+3:], e)
}

// countWeak counts the weak types in a requested etype list in either
// format: "18 17 16 23" (before 1.18, possibly cut with "...") or
// "aes256-cts-hmac-sha1-96(18), DEPRECATED:arcfour-hmac(23)" (1.18+).
func countWeak(list []byte) int {
	weak := 0
	for len(list) > 0 {
		var item []byte
		if i := bytes.IndexByte(list, ' '); i >= 0 {
			item, list = list[:i], list[i+1:]
		} else {
			item, list = list, nil
		}
		if et, ok := itemEtype(item); ok && et.IsWeak() {
			weak++
		}
	}
	return weak
}

// itemEtype reads "23", "23," or "name(23)" / "name(23),".
func itemEtype(item []byte) (Etype, bool) {
	if n := len(item); n > 0 && item[n-1] == ',' {
		item = item[:n-1]
	}
	if n := len(item); n > 0 && item[n-1] == ')' {
		open := bytes.LastIndexByte(item, '(')
		if open < 0 {
			return 0, false
		}
		item = item[open+1 : n-1]
	}
	return parseEtypeNum(item)
}

func parseEtypeNum(b []byte) (Etype, bool) {
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg, b = true, b[1:]
	}
	n, ok := atoi(b)
	if !ok {
		return 0, false
	}
	if neg {
		n = -n
	}
	return Etype(n), true
}

// parseAfterEtypes reads "ADDR: STATUS: rest". The address has no ": "
// (IPv6 uses bare colons) and neither has any MIT status.
func parseAfterEtypes(m []byte, e *Event) Reason {
	i := bytes.Index(m, sepColon)
	if i <= 0 {
		return ReasonMalformed
	}
	e.Addr = m[:i]
	m = m[i+2:]
	i = bytes.Index(m, sepColon)
	if i <= 0 {
		return ReasonMalformed
	}
	e.Status = m[:i]
	m = m[i+2:]
	e.Kind = KindRequest

	issue := string(e.Status) == "ISSUE"
	if bytes.HasPrefix(m, prefixAuthtime) {
		// TGS lines always, AS lines on ISSUE: "authtime N, etypes {...}, client for server".
		m = m[len(prefixAuthtime):]
		j := 0
		for j < len(m) && isDigit(m[j]) {
			j++
		}
		if j == 0 || !bytes.HasPrefix(m[j:], []byte(", ")) {
			return ReasonMalformed
		}
		m = m[j+2:]
		if bytes.HasPrefix(m, prefixEtypes) {
			m = m[len(prefixEtypes):]
			end := bytes.IndexByte(m, '}')
			if end < 0 {
				return ReasonMalformed
			}
			if issue {
				parseRepEtypes(m[:end], e)
			}
			m = m[end+1:]
			if len(m) > 0 && m[0] == ',' {
				m = m[1:]
			}
		}
		m = skipSpaces(m)
	}
	if i := bytes.Index(m, sepFor); i >= 0 {
		e.Client = m[:i]
	} else {
		e.Client = m
	}
	if e.Request == RequestAS && string(e.Status) == "PREAUTH_FAILED" && bytes.HasSuffix(m, morePreauthSuffix) {
		e.MorePreauth = true
	}
	return ReasonNone
}

// parseRepEtypes reads "rep=18 tkt=18 ses=18" or
// "rep=aes256-cts-hmac-sha1-96(18), tkt=..., ses=...".
func parseRepEtypes(b []byte, e *Event) {
	for len(b) > 0 {
		var item []byte
		if i := bytes.IndexByte(b, ' '); i >= 0 {
			item, b = b[:i], b[i+1:]
		} else {
			item, b = b, nil
		}
		if len(item) < 5 || item[3] != '=' {
			continue
		}
		et, ok := itemEtype(item[4:])
		if !ok {
			continue
		}
		switch string(item[:3]) {
		case "rep":
			e.Rep = et
		case "tkt":
			e.Tkt = et
		case "ses":
			e.Ses = et
		}
	}
}

// parsePreauth reads "METHOD) verify failure: MESSAGE" after "preauth (".
func parsePreauth(m []byte, e *Event) Reason {
	i := bytes.Index(m, suffixVerifyFail)
	if i <= 0 {
		return ReasonUnknownMessage
	}
	e.Kind = KindPreauthFailure
	e.Method = m[:i]
	e.PreauthReason = classifyPreauth(m[i+len(suffixVerifyFail):])
	return ReasonNone
}
