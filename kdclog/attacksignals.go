package kdclog

import (
	"bytes"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/kdclog/attack"
)

// The attack signals' series (top reads them); docs/metrics.md, section
// "Attack signals".
const (
	MetricAttackEvents     = "krb5_kdc_attack_events_total"
	MetricAttackDetections = "krb5_kdc_attack_detections_total"
	MetricAttackOffender   = "krb5_kdc_attack_offender_score"
)

var (
	descAttackEvents = prometheus.NewDesc(MetricAttackEvents,
		"Request lines behind the attack signals, counted exactly: wrong_password (a PREAUTH_FAILED attempt no ISSUE recovered), lockout, unknown_client, rc4_service_ticket, no_preauth_ticket.",
		[]string{"event"}, nil)
	descAttackDetections = prometheus.NewDesc(MetricAttackDetections,
		"Offenders (addresses or principals) that crossed a signal's threshold within a window, each once per window.",
		[]string{"signal"}, nil)
	descAttackOffender = prometheus.NewDesc(MetricAttackOffender,
		"The top-k offenders of each signal in the current window, with the score the threshold applies to (distinct principals or services, failures for brute_force); offender is the address or principal, escaped and cut to 48 bytes.",
		[]string{"signal", "offender"}, nil)
)

// attackState is the Manager's detector. Sources feed it under mu, taken
// at a batch's first request line and released by the batch's flush, so
// a line costs no lock; Collect takes mu for its snapshot.
type attackState struct {
	on        atomic.Bool
	followAS  atomic.Bool // follow_logins
	followTGS atomic.Bool // follow_service_tickets
	mu        sync.Mutex
	d         *attack.Detector
}

func newAttackState() *attackState {
	a := &attackState{d: attack.New(config.AttackSignals{})}
	a.on.Store(true)
	return a
}

// apply sets the configuration of the attack signals.
func (a *attackState) apply(c config.AttackSignals) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.d.SetConfig(c)
	a.on.Store(!c.Disabled)
	a.followAS.Store(c.FollowLogins)
	a.followTGS.Store(c.FollowServiceTickets)
}

// observeAttack feeds one request line (not a probe's) to the detector.
func (s *source) observeAttack(e *Event, si int) {
	a := s.c.attack
	if !a.on.Load() {
		return
	}
	// The common lines, a healthy login's steps and service tickets,
	// matter only when followed (or, for logins, while failures await
	// their recovery): they cost a few loads, no lock and no call.
	switch {
	case si == idxIssue && e.Request == RequestTGS:
		if !a.followTGS.Load() && e.Rep != etypeRC4 && e.Tkt != etypeRC4 {
			return
		}
	case si == idxNeededPreauth || si == idxMorePreauth:
		if !a.followAS.Load() {
			return
		}
	case si == idxIssue:
		if !a.followAS.Load() && !a.d.Waiting() {
			return
		}
	}
	r := &s.attackReq
	r.TGS, r.Client, r.Addr, r.Outcome, r.SPAKE = e.Request == RequestTGS, e.Client, e.Addr, attack.OutcomeOther, false
	if !r.TGS {
		r.Hash = s.client.of(s.seed, e.Client)
	}
	switch si {
	case idxIssue:
		r.Outcome = attack.OutcomeIssue
		if r.TGS {
			r.Server = serverOf(e.AfterClient)
			r.RC4 = e.Rep == etypeRC4 || e.Tkt == etypeRC4
		} else {
			r.Server, r.RC4 = nil, false
		}
	case idxNeededPreauth:
		r.Outcome = attack.OutcomeNeededPreauth
	case idxMorePreauth:
		r.Outcome = attack.OutcomeMorePreauth
	case idxPreauthFailed:
		// A wrong key, or a method the client falls back from; not a
		// clock skew or an etype the KDC lacks.
		if bytes.HasSuffix(e.AfterClient, []byte(", Preauthentication failed")) || bytes.HasSuffix(e.AfterClient, []byte(", Decrypt integrity check failed")) {
			r.Outcome = attack.OutcomeWrongKey
			// The verify failure line just before, from the same
			// process, names the method (see countRequest).
			m, ok := s.rec.peekMethod(e.PID)
			r.SPAKE = ok && s.c.methods.name(m) == "spake"
		}
	case idxClientNotFound:
		r.Outcome = attack.OutcomeUnknownClient
	default:
		if string(e.Status) == "LOCKED_OUT" {
			r.Outcome = attack.OutcomeLockedOut
		}
	}
	if r.TGS && r.Outcome != attack.OutcomeIssue {
		return
	}
	if !s.attackHeld {
		a.mu.Lock()
		s.attackHeld = true
		a.d.Tick(time.Now())
	}
	a.d.Observe(r)
}

// flushAttack ends the batch: Collect may take the detector.
func (s *source) flushAttack() {
	if s.attackHeld {
		s.attackHeld = false
		s.c.attack.mu.Unlock()
	}
}

// etypeRC4 is arcfour-hmac (internal/enctype), the etype Kerberoasting
// asks for: its ticket is cracked as an NT hash.
const etypeRC4 Etype = 23

// serverOf reads SERVER from " for SERVER[, TEXT]".
func serverOf(after []byte) []byte {
	after = bytes.TrimPrefix(after, []byte(" for "))
	if i := bytes.IndexByte(after, ','); i >= 0 { // ", 2nd tkt client ...", an error text
		return after[:i]
	}
	return after
}

func describeAttack(ch chan<- *prometheus.Desc) {
	ch <- descAttackEvents
	ch <- descAttackDetections
	ch <- descAttackOffender
}

func (a *attackState) collect(ch chan<- prometheus.Metric) {
	if !a.on.Load() {
		return
	}
	var s attack.Snapshot
	a.mu.Lock()
	a.d.Tick(time.Now())
	a.d.Snapshot(&s)
	a.mu.Unlock()
	for e := range attack.NumEvents {
		counter(ch, descAttackEvents, s.Events[e], attack.EventNames[e])
	}
	for sig := range attack.NumSignals {
		counter(ch, descAttackDetections, s.Detections[sig], attack.SignalNames[sig])
		for _, o := range s.Offenders[sig] {
			gauge(ch, descAttackOffender, o.Score, attack.SignalNames[sig], o.Name)
		}
	}
}
