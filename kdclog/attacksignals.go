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
	MetricAttackTracked    = "krb5_kdc_attack_tracked_offenders"
	MetricAttackUntracked  = "krb5_kdc_attack_untracked_events_total"
	MetricAttackPrincipals = "krb5_kdc_attack_distinct_principals_total"
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
	descAttackTracked = prometheus.NewDesc(MetricAttackTracked,
		"Distinct offenders of each signal in the current window, each counted exactly, up to attack_signals.tracked_offenders.",
		[]string{"signal"}, nil)
	descAttackUntracked = prometheus.NewDesc(MetricAttackUntracked,
		"Events of offenders beyond attack_signals.tracked_offenders in their window, counted in an overflow sketch (detections of them may be too many, never too few).",
		[]string{"signal"}, nil)
	descAttackPrincipals = prometheus.NewDesc(MetricAttackPrincipals,
		"Principals across all addresses, each counted once in each window in which it had a wrong password (kind=wrong_password) or was asked for and not found (unknown_client): increase() over a window reads its distinct principals. Exact up to 4096 a window, a HyperLogLog beyond.",
		[]string{"kind"}, nil)
)

// attackState is the Manager's detector. Sources feed it under mu, taken
// at a batch's first request line and released by the batch's flush, so
// a line costs no lock; Collect takes mu for its snapshot.
type attackState struct {
	on        atomic.Bool
	followAS  atomic.Bool   // follow_logins
	followTGS atomic.Bool   // follow_service_tickets
	sources   atomic.Uint32 // the last source id given
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

// attackSkips is observeAttack's first test for the commonest lines,
// small enough to be inlined: a service ticket without RC4 and a login's
// pre-authentication step, when not followed, cost no call (nor does a
// TGS line that is no ISSUE: observeAttack never passes one on).
func (s *source) attackSkips(e *Event, si int) bool {
	a := s.c.attack
	if e.Request == RequestTGS {
		return si != idxIssue || !a.on.Load() || !a.followTGS.Load() && e.Rep != etypeRC4 && e.Tkt != etypeRC4
	}
	return (si == idxNeededPreauth || si == idxMorePreauth) && !(a.on.Load() && a.followAS.Load())
}

// observeAttack feeds one request line (not a probe's) to the detector.
// Its pending-failure table is also the request counters' account of
// recovered failures: an AS line's method (m, verified) and the source's
// AS line number go with it, and an ISSUE adds what it recovers to the
// local tally, whether the signals are on or not.
func (s *source) observeAttack(e *Event, si, m int, verified bool) {
	a := s.c.attack
	on := a.on.Load()
	// The common lines, a healthy login's steps and service tickets,
	// matter only when followed (or, for logins, while failures await
	// their recovery): they cost a few loads, no lock and no call.
	switch {
	case si == idxIssue && e.Request == RequestTGS:
		if !on || !a.followTGS.Load() && e.Rep != etypeRC4 && e.Tkt != etypeRC4 {
			return
		}
	case si == idxNeededPreauth || si == idxMorePreauth:
		if !on || !a.followAS.Load() {
			return
		}
	case si == idxIssue:
		if !(on && a.followAS.Load()) && !a.d.Waiting() {
			return
		}
	case si == idxPreauthFailed:
		if e.MorePreauth {
			return // KDC_ERR_MORE_PREAUTH_DATA_REQUIRED: a step, not a failure
		}
	default:
		if !on {
			return
		}
	}
	r := &s.attackReq
	r.TGS, r.Client, r.Addr, r.Outcome, r.SPAKE = e.Request == RequestTGS, e.Client, e.Addr, attack.OutcomeOther, false
	r.Recovered, r.Key, r.Source, r.Seq, r.Method = nil, 0, s.id, s.asSeq+1, 0
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
			r.Key, r.Recovered = s.key(e), s.local.recovered
		}
	case idxNeededPreauth:
		r.Outcome = attack.OutcomeNeededPreauth
	case idxMorePreauth:
		r.Outcome = attack.OutcomeMorePreauth
	case idxPreauthFailed:
		// A wrong key, or a method the client falls back from; not a
		// clock skew or an etype the KDC lacks (those may be recovered,
		// and are never a wrong password).
		r.Outcome = attack.OutcomePreauthFailed
		if bytes.HasSuffix(e.AfterClient, []byte(", Preauthentication failed")) || bytes.HasSuffix(e.AfterClient, []byte(", Decrypt integrity check failed")) {
			r.Outcome = attack.OutcomeWrongKey
		}
		// The verify failure line just before, from the same process,
		// names the method (see countRequest).
		r.SPAKE = verified && s.c.methods.name(m) == "spake"
		if !verified {
			m = s.c.methods.other()
		}
		// A method index fits a uint8: there are at most the known
		// methods, maxDynamicMethods others and other.
		r.Key, r.Method = s.key(e), uint8(m)
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
	ch <- descAttackTracked
	ch <- descAttackUntracked
	ch <- descAttackPrincipals
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
	for k := range attack.NumSpreads {
		counter(ch, descAttackPrincipals, s.Principals[k], attack.SpreadNames[k])
	}
	for sig := range attack.NumSignals {
		counter(ch, descAttackDetections, s.Detections[sig], attack.SignalNames[sig])
		counter(ch, descAttackUntracked, s.Untracked[sig], attack.SignalNames[sig])
		gauge(ch, descAttackTracked, float64(s.Tracked[sig]), attack.SignalNames[sig])
		for _, o := range s.Offenders[sig] {
			gauge(ch, descAttackOffender, o.Score, attack.SignalNames[sig], o.Name)
		}
	}
}
