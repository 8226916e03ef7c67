package kdclog

import (
	"bytes"
	"hash/maphash"
	"math/bits"
	"strings"
	"sync/atomic"

	"github.com/krb5-exporter/krb5-exporter/config"
)

// sourceStats are a source's parse counters (its tailer has its own).
type sourceStats struct {
	parsed   atomic.Uint64
	unparsed [numReasons]atomic.Uint64
}

// recoverWindow is how many AS lines later an ISSUE still counts as the
// recovery of a PREAUTH_FAILED for the same client and address. A client
// falling back to another preauth method sends its next request at once,
// so even at thousands of logins per second this is ample.
const recoverWindow = 1024

// pendingSlots is the size of the table of recent preauth failures.
const pendingSlots = 1024

type pendingFailure struct {
	key    uint64
	seq    uint64
	method int
}

// source counts the lines of one log file. handle runs on the file's
// tailer goroutine only, so the correlation state needs no lock; the
// counters it feeds are shared atomics.
type source struct {
	cfg    config.LogSource
	accept [ProgramAdminTool + 1]bool
	probes [][]byte // "name@REALM", or "name@" to match any realm
	c      *counts
	st     *sourceStats

	seed      maphash.Seed
	asSeq     uint64
	pending   [pendingSlots]pendingFailure
	pidMethod [16]struct{ pid, method int }

	idxIssue int
}

func newSource(cfg config.LogSource, c *counts, st *sourceStats) *source {
	s := &source{cfg: cfg, c: c, st: st, seed: maphash.MakeSeed()}
	for i := range s.pidMethod {
		s.pidMethod[i].pid = -1
	}
	switch cfg.Type {
	case "kdc":
		s.accept[ProgramKDC] = true
	case "kadmind":
		s.accept[ProgramKadmind], s.accept[ProgramAdminTool] = true, true
	default:
		s.accept[ProgramKDC], s.accept[ProgramKadmind], s.accept[ProgramAdminTool] = true, true, true
	}
	for _, p := range cfg.ProbePrincipals {
		if !strings.Contains(p, "@") {
			p += "@"
		}
		s.probes = append(s.probes, []byte(p))
	}
	s.idxIssue = c.statuses.known["ISSUE"]
	return s
}

// handle counts one line; truncated marks a line cut at the length limit.
func (s *source) handle(line []byte, truncated bool) {
	if truncated {
		s.st.unparsed[ReasonTooLong].Add(1)
		return
	}
	var e Event
	if !Parse(line, &e) {
		s.st.unparsed[e.Reason].Add(1)
		return
	}
	if !s.accept[e.Program] {
		s.st.unparsed[ReasonOtherProgram].Add(1)
		return
	}
	s.st.parsed.Add(1)
	s.count(&e)
}

func (s *source) count(e *Event) {
	c := s.c
	switch e.Kind {
	case KindRequest:
		s.countRequest(e)
	case KindPreauthFailure:
		m := c.methods.index(e.Method)
		c.preauth[m][e.PreauthReason].Add(1)
		slot := &s.pidMethod[uint(e.PID)%uint(len(s.pidMethod))]
		slot.pid, slot.method = e.PID, m
	case KindRetransmit:
		c.retrans[e.Retransmit].Add(1)
	case KindTooManyConns:
		c.tooMany.Add(1)
	case KindS4U:
		c.s4u[e.S4U].Add(1)
	case KindLifecycle:
		if e.Program == ProgramKadmind {
			c.kadmLife[e.Lifecycle].Add(1)
		} else {
			c.kdcLife[e.Lifecycle].Add(1)
		}
	case KindKadmin:
		c.kadmin[c.ops.index(e.Op)][e.Result].Add(1)
	case KindKadminAuthFailure:
		c.kadmAuth.Add(1)
	}
}

func (s *source) countRequest(e *Event) {
	c := s.c
	si := c.statusIndex(e)
	if s.isProbe(e.Client) {
		c.probe[e.Request][si].Add(1)
		return
	}
	c.requests[e.Request][si].Add(1)
	if e.OfferedWeak > 0 {
		c.weak[e.Request][weakOffered].Add(1)
		if e.OfferedWeak == e.Offered {
			c.weak[e.Request][weakOnly].Add(1)
		}
	}
	issue := si == s.idxIssue
	if issue {
		for p, et := range [numParts]Etype{e.Rep, e.Tkt, e.Ses} {
			if et != EtypeNone {
				c.issued[e.Request][p][etypeLabel(et)].Add(1)
			}
		}
		if e.IssuedWeak() {
			c.weak[e.Request][weakIssued].Add(1)
		}
	}
	if e.Request != RequestAS {
		return
	}
	s.asSeq++
	switch {
	case issue:
		key := s.key(e)
		p := &s.pending[key%pendingSlots]
		if p.key == key && p.seq != 0 {
			if s.asSeq-p.seq <= recoverWindow {
				c.recovered[p.method].Add(1)
			}
			*p = pendingFailure{}
		}
	case !e.MorePreauth && string(e.Status) == "PREAUTH_FAILED":
		key := s.key(e)
		m := c.methods.other()
		// The verify failure line just before, from the same process.
		if slot := &s.pidMethod[uint(e.PID)%uint(len(s.pidMethod))]; slot.pid == e.PID {
			m = slot.method
			slot.pid = -1
		}
		s.pending[key%pendingSlots] = pendingFailure{key: key, seq: s.asSeq, method: m}
	}
}

// key identifies a login attempt by client and address.
func (s *source) key(e *Event) uint64 {
	return maphash.Bytes(s.seed, e.Client) ^ bits.RotateLeft64(maphash.Bytes(s.seed, e.Addr), 17)
}

func (s *source) isProbe(client []byte) bool {
	for _, p := range s.probes {
		if p[len(p)-1] == '@' {
			if bytes.HasPrefix(client, p) {
				return true
			}
		} else if bytes.Equal(client, p) {
			return true
		}
	}
	return false
}
