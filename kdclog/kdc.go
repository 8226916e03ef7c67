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
	morePreauthSuffix = []byte(", More preauthentication data is required")
)

// parseKDC reads the message part of a krb5kdc line into e.
func parseKDC(p *Parser, m []byte, e *Event) Reason {
	if len(m) < 9 {
		return parseKDCOther(m, e)
	}
	switch m[0] {
	case 'A':
		if string(m[:7]) == "AS_REQ " {
			e.Request = RequestAS
			return parseRequest(p, m[7:], e)
		}
	case 'T':
		if string(m[:8]) == "TGS_REQ " {
			e.Request = RequestTGS
			if m[8] != '(' {
				// SERVER_NOMATCH form without the etype list:
				// "TGS_REQ 10.0.0.1: STATUS: authtime 0, client for server, 2nd tkt client X".
				return parseAfterEtypes(p, m[8:], e)
			}
			return parseRequest(p, m[8:], e)
		}
		if string(m[:8]) == "TGS_REQ:" { // "issuing TGT", old "SESSION KEY or MUTUAL"
			e.Kind = KindInfo
			return ReasonNone
		}
	case 'p':
		if bytes.HasPrefix(m, prefixPreauth) {
			return parsePreauth(m[len(prefixPreauth):], e)
		}
	case 'D':
		if bytes.HasPrefix(m, prefixDispatch) {
			e.Kind = KindRetransmit
			if bytes.HasSuffix(m, suffixDropping) {
				e.Retransmit = RetransmitDropped
			}
			return ReasonNone
		}
	case '.':
		switch {
		case bytes.HasPrefix(m, []byte("... PROTOCOL-TRANSITION ")):
			e.Kind, e.S4U = KindS4U, S4UProtocolTransition
			return ReasonNone
		case bytes.HasPrefix(m, []byte("... CONSTRAINED-DELEGATION ")):
			e.Kind, e.S4U = KindS4U, S4UConstrainedDelegation
			return ReasonNone
		}
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
	case isNetInfo(m):
		e.Kind = KindInfo
	default:
		return ReasonUnknownMessage
	}
	return ReasonNone
}

// parseRequest reads "(N etypes {...}) ADDR: STATUS: ...", after "AS_REQ ".
func parseRequest(p *Parser, m []byte, e *Event) Reason {
	if len(m) < 2 || m[0] != '(' {
		return ReasonMalformed
	}
	i, n := 1, 0
	for i < len(m) && isDigit(m[i]) && i < 10 {
		n = n*10 + int(m[i]-'0')
		i++
	}
	if i == 1 || len(m) < i+9 || string(m[i:i+9]) != " etypes {" {
		return ReasonMalformed
	}
	m = m[i+9:]
	list, weak, ok := p.list(m)
	end := len(list)
	if !ok || end+2 >= len(m) || m[end+1] != ')' || m[end+2] != ' ' {
		return ReasonMalformed
	}
	e.Offered, e.OfferedWeak = n, weak
	return parseAfterEtypes(p, m[end+3:], e)
}

// countWeak counts the weak types in a requested etype list in either
// format: "18 17 16 23" (before 1.18, possibly cut with "...") or
// "aes256-cts-hmac-sha1-96(18), DEPRECATED:arcfour-hmac(23)" (1.18+).
// One pass, no calls: this runs for every request line.
func countWeak(list []byte) int {
	weak := 0
	if len(list) == 0 {
		return 0
	}
	if c := list[0]; isDigit(c) || c == '-' {
		// Bare numbers separated by spaces.
		for i := 0; i < len(list); {
			et, j, ok := scanEtype(list, i)
			if ok && (j == len(list) || list[j] == ' ') && et.IsWeak() {
				weak++
			}
			for j < len(list) && list[j] != ' ' {
				j++
			}
			i = j + 1
		}
		return weak
	}
	// Names with the number in parentheses; names hold no '('.
	for i := 0; ; {
		j := bytes.IndexByte(list[i:], '(')
		if j < 0 {
			return weak
		}
		et, k, ok := scanEtype(list, i+j+1)
		if ok && k < len(list) && list[k] == ')' && et.IsWeak() {
			weak++
		}
		i = k
	}
}

// scanEtype reads an optionally negative decimal at b[i:] and returns it
// with the index after it.
func scanEtype(b []byte, i int) (Etype, int, bool) {
	neg := false
	if i < len(b) && b[i] == '-' {
		neg = true
		i++
	}
	start, n := i, 0
	for i < len(b) && isDigit(b[i]) && i-start < 9 {
		n = n*10 + int(b[i]-'0')
		i++
	}
	if i == start {
		return 0, i, false
	}
	if neg {
		n = -n
	}
	return Etype(n), i, true
}

// cut returns b up to the first ": " and the rest after it. The fields
// cut this way (an address, a status) are short: a plain loop beats a
// vectorised search.
func cut(b []byte) (before, after []byte, ok bool) {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == ':' && b[i+1] == ' ' {
			return b[:i], b[i+2:], true
		}
	}
	return nil, nil, false
}

// parseAfterEtypes reads "ADDR: STATUS: rest". The address has no ": "
// (IPv6 uses bare colons) and neither has any MIT status.
func parseAfterEtypes(p *Parser, m []byte, e *Event) Reason {
	addr, m, ok := cut(m)
	if !ok || len(addr) == 0 {
		return ReasonMalformed
	}
	status, m, ok := cut(m)
	if !ok || !validLabel(status, statusWordChar) {
		// Not a status but text with an address, principal or path in it
		// (a forged or foreign line). Old releases' lower-case statuses
		// ("making state") pass here and count as status="other".
		return ReasonMalformed
	}
	e.Addr, e.Status = addr, status
	e.Kind = KindRequest

	issue := string(status) == "ISSUE"
	e.issue = issue
	if len(m) > 9 && string(m[:9]) == "authtime " {
		// TGS lines always, AS lines on ISSUE: "authtime N, etypes {...}, client for server".
		j := 9
		for j < len(m) && isDigit(m[j]) {
			j++
		}
		if j == 9 || j+1 >= len(m) || m[j] != ',' || m[j+1] != ' ' {
			return ReasonMalformed
		}
		m = m[j+2:]
		if len(m) > 8 && string(m[:8]) == "etypes {" {
			m = m[8:]
			end, ok := p.repEtypes(m, e, issue)
			if !ok {
				return ReasonMalformed
			}
			m = m[end+1:]
			if len(m) > 0 && m[0] == ',' {
				m = m[1:]
			}
		}
		for len(m) > 0 && m[0] == ' ' {
			m = m[1:]
		}
	}
	// The client, up to " for ".
	e.Client = m
	for i := 0; i+4 < len(m); i++ {
		if m[i] == ' ' && m[i+1] == 'f' && m[i+2] == 'o' && m[i+3] == 'r' && m[i+4] == ' ' {
			e.Client, e.AfterClient = m[:i], m[i:]
			break
		}
	}
	if e.Request == RequestAS && string(status) == "PREAUTH_FAILED" && bytes.HasSuffix(m, morePreauthSuffix) {
		e.MorePreauth = true
	}
	return ReasonNone
}

// parseRepEtypes reads "rep=18 tkt=18 ses=18" or
// "rep=aes256-cts-hmac-sha1-96(18), tkt=..., ses=...".
func parseRepEtypes(b []byte, e *Event) {
	for i := 0; i+4 < len(b); {
		// At the start of "key=value".
		if b[i+3] != '=' {
			return
		}
		key := b[i : i+3]
		j := i + 4
		if c := b[j]; !isDigit(c) && c != '-' {
			p := bytes.IndexByte(b[j:], '(')
			if p < 0 {
				return
			}
			j += p + 1
		}
		et, k, ok := scanEtype(b, j)
		if ok {
			switch string(key) {
			case "rep":
				e.Rep = et
			case "tkt":
				e.Tkt = et
			case "ses":
				e.Ses = et
			}
		}
		// To the next item: past ")" and ", " or " ".
		if k < len(b) && b[k] == ')' {
			k++
		}
		if k < len(b) && b[k] == ',' {
			k++
		}
		i = k + 1
	}
}

// parsePreauth reads "METHOD) verify failure: MESSAGE" after "preauth (".
func parsePreauth(m []byte, e *Event) Reason {
	i := bytes.IndexByte(m, ')')
	if i <= 0 || !bytes.HasPrefix(m[i:], suffixVerifyFail) || !validLabel(m[:i], identChar) {
		return ReasonUnknownMessage
	}
	e.Kind = KindPreauthFailure
	e.Method = m[:i]
	e.PreauthReason = classifyPreauth(m[i+len(suffixVerifyFail):])
	return ReasonNone
}

// isNetInfo reports a message of MIT's network code (net-server.c), which
// krb5kdc and kadmind share: nothing to count.
func isNetInfo(m []byte) bool {
	return bytes.HasPrefix(m, []byte("closing down fd ")) ||
		bytes.HasPrefix(m, []byte("set up ")) ||
		bytes.HasPrefix(m, []byte("dropping ")) ||
		bytes.HasPrefix(m, []byte("Setting up ")) ||
		bytes.HasPrefix(m, []byte("listening on "))
}
