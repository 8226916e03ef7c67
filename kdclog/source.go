package kdclog

import (
	"bytes"
	"hash/maphash"
	"strings"
	"sync/atomic"
	"time"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/kdclog/attack"
)

// sourceStats are a source's parse counters (its tailer has its own).
type sourceStats struct {
	parsed   atomic.Uint64
	unparsed [numReasons]atomic.Uint64
}

// recoverWindow is how many AS lines later an ISSUE still counts as the
// recovery of a PREAUTH_FAILED for the same client and address: the
// attack detector's table decides it for both (attack.RecoverLines). A
// client falling back to another preauth method sends its next request
// at once, so even at thousands of logins per second this is ample.
const recoverWindow = attack.RecoverLines

// source counts the lines of one log file. handle and flush run on the
// file's tailer goroutine only: the local tally and the correlation state
// need no lock, and flush publishes the tally after every batch of lines.
type source struct {
	cfg    config.LogSource
	accept [ProgramAdminTool + 1]bool
	probes [][]byte // "name@REALM", or "name@" to match any realm
	// probeLens has bit n set when a client of n bytes may be a probe:
	// most clients are told apart by their length alone.
	probeLens uint64
	c         *counts
	st        *sourceStats
	local     *tally[uint64]

	parsed   uint64
	unparsed [numReasons]uint64

	parser  Parser
	issued  issuedMemo   // the last ISSUE line's etypes: most ISSUEs have the same three
	ev      Event        // the line being counted: Parse resets it, so it is zeroed once a line
	seed    maphash.Seed // the attack detector's: its requests carry our hashes
	asSeq   uint64
	client  memoHash // the last AS line's client and address, hashed
	addr    memoHash
	rec     recoveries    // recover.go: the method of a worker's verify failure
	id      uint32        // the detector's name of this file (attack.Request.Source)
	workers sourceWorkers // workers.go

	attackHeld bool           // the detector's lock, held until flush (attacksignals.go)
	attackReq  attack.Request // reused
}

func newSource(cfg config.LogSource, c *counts, st *sourceStats) *source {
	s := &source{cfg: cfg, c: c, st: st, local: newTally[uint64](c), seed: c.attack.d.Seed(), workers: sourceWorkers{shared: &c.workers}}
	s.client.n, s.addr.n = -1, -1
	s.id = c.attack.sources.Add(1)
	s.rec.init()
	switch cfg.Type {
	case "kpropd":
		c.kpropd.configured.Store(true)
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
		if p[len(p)-1] == '@' || len(p) >= 64 {
			s.probeLens = ^uint64(0) // a prefix, or too long for the mask: every length may match
		} else {
			s.probeLens |= 1 << len(p)
		}
	}
	return s
}

// flush publishes what handle counted since the last flush.
func (s *source) flush() {
	// A request line counted by its worker is in the request counters
	// through its worker's row (workers.go): totals first, then the rows,
	// so that no scrape sees the rows ahead of the totals.
	s.workers.addTotals(&s.local.requests)
	flush(s.c.tally, s.local)
	s.workers.flush()
	s.flushAttack()
	if s.parsed != 0 {
		s.st.parsed.Add(s.parsed)
		s.parsed = 0
	}
	add(s.st.unparsed[:], s.unparsed[:])
}

// handle counts one line; truncated marks a line cut at the length limit.
func (s *source) handle(line []byte, truncated bool) {
	if truncated {
		s.unparsed[ReasonTooLong]++
		return
	}
	if s.cfg.Type == "kpropd" {
		if reason, ok := s.c.kpropd.handle(line); !ok {
			s.unparsed[reason]++
		} else {
			s.parsed++
		}
		return
	}
	s.handleLine(line)
}

// handleLines counts the whole lines of buf (each ends in a newline) and
// returns how many: a tailer's read at once (tailer.LinesHandler).
func (s *source) handleLines(buf []byte) uint64 {
	n := uint64(0)
	kpropd := s.cfg.Type == "kpropd"
	for {
		j := bytes.IndexByte(buf, '\n')
		if j < 0 {
			return n
		}
		if kpropd {
			s.handle(buf[:j], false)
		} else {
			s.handleLine(buf[:j])
		}
		buf = buf[j+1:]
		n++
	}
}

// handleLine counts one whole line of a daemon other than kpropd.
func (s *source) handleLine(line []byte) {
	e := &s.ev
	if !s.parser.Parse(line, e) {
		s.unparsed[e.Reason]++
		return
	}
	if !s.accept[e.Program] {
		s.unparsed[ReasonOtherProgram]++
		return
	}
	s.parsed++
	if e.Kind == KindRequest { // most lines: count's first case, one call less
		s.countRequest(e)
		return
	}
	s.count(e)
}

// handleEntry counts one journal entry, whose program and pid come apart
// from its message.
func (s *source) handleEntry(ident []byte, pid int, msg []byte) {
	if s.cfg.Type == "kpropd" {
		// journalctl matched kpropd's identifier; its message is bare,
		// as kpropd -d writes it.
		s.handle(msg, false)
		return
	}
	e := &s.ev
	if !s.parser.ParseMessage(ident, pid, msg, e) {
		s.unparsed[e.Reason]++
		return
	}
	if !s.accept[e.Program] {
		s.unparsed[ReasonOtherProgram]++
		return
	}
	s.parsed++
	s.count(e)
}

func (s *source) count(e *Event) {
	c, l := s.c, s.local
	switch e.Kind {
	case KindRequest:
		s.countRequest(e)
	case KindPreauthFailure:
		m := c.methodIndex(e.Method)
		l.preauth[m][e.PreauthReason]++
		s.rec.verifyFailure(e.PID, m)
	case KindRetransmit:
		l.retrans[e.Retransmit]++
	case KindTooManyConns:
		l.tooMany[0]++
	case KindS4U:
		l.s4u[e.S4U]++
	case KindLifecycle:
		if e.Program == ProgramKadmind {
			l.kadmLife[e.Lifecycle]++
		} else {
			l.kdcLife[e.Lifecycle]++
		}
	case KindKadmin:
		l.kadmin[c.ops.index(e.Op)][e.Result]++
	case KindKadminAuthFailure:
		l.kadmAuth[0]++
	}
}

func (s *source) countRequest(e *Event) {
	c, l := s.c, s.local
	si := idxIssue
	if !e.issue {
		si = c.statusIndex(e)
	}
	if n := uint(len(e.Client)); s.probeLens>>min(n, 63)&1 != 0 && s.isProbe(e.Client) {
		l.probe[e.Request][si]++
		return
	}
	if !s.workers.cached(e.PID, e.Request, si) && !s.workers.countSlow(e.PID, e.Request, si, len(l.requests[e.Request])) {
		l.requests[e.Request][si]++ // else flush adds its worker's row
	}
	if si == c.badEtype {
		c.refused.observe(e.Client, time.Now())
	}
	// The verify failure line just before, from the same process, belongs
	// to this AS line whatever its status.
	m, verified := 0, false
	if e.Request == RequestAS {
		m, verified = s.rec.takeMethod(e.PID)
	}
	if !s.attackSkips(e, si) {
		s.observeAttack(e, si, m, verified)
	}
	if e.OfferedWeak > 0 {
		l.weak[e.Request][weakOffered]++
		if e.OfferedWeak == e.Offered {
			l.weak[e.Request][weakOnly]++
		}
	}
	issue := si == idxIssue
	if issue {
		im := &s.issued
		if e.Rep != im.rep || e.Tkt != im.tkt || e.Ses != im.ses || !im.ok {
			*im = issuedMemo{e.Rep, e.Tkt, e.Ses, [numParts]int{etypeLabel(e.Rep), etypeLabel(e.Tkt), etypeLabel(e.Ses)}, e.IssuedWeak(), true}
		}
		iss := &l.issued[e.Request]
		if e.Rep != EtypeNone {
			iss[partRep][im.labels[partRep]]++
		}
		if e.Tkt != EtypeNone {
			iss[partTkt][im.labels[partTkt]]++
		}
		if e.Ses != EtypeNone {
			iss[partSes][im.labels[partSes]]++
		}
		if im.weak {
			l.weak[e.Request][weakIssued]++
		}
	}
	if e.Request != RequestAS {
		return
	}
	s.asSeq++
}

// issuedMemo is an ISSUE line's reply, ticket and session etypes with
// their label indexes and whether one is weak.
type issuedMemo struct {
	rep, tkt, ses Etype
	labels        [numParts]int
	weak          bool
	ok            bool
}

// key identifies a login attempt by client and address.
func (s *source) key(e *Event) uint64 {
	return attack.KeyOf(s.client.of(s.seed, e.Client), s.addr.of(s.seed, e.Addr))
}

// memoHash is the hash of the last value hashed: a login's AS lines
// (NEEDED_PREAUTH, MORE_PREAUTH, ISSUE) mostly follow one another, and
// the recovery matching and the attack signals both hash their client,
// so a login costs one hash of it, not four.
type memoHash struct {
	n int // -1: none (or longer than b)
	h uint64
	b [64]byte
}

func (m *memoHash) of(seed maphash.Seed, v []byte) uint64 {
	if len(v) == m.n && bytes.Equal(m.b[:m.n], v) {
		return m.h
	}
	m.h = maphash.Bytes(seed, v)
	m.n = -1
	if len(v) <= len(m.b) {
		m.n = copy(m.b[:], v)
	}
	return m.h
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
