package prober

import (
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/go-kit/log"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/probestatus"
)

// The continuous probes' recent history, kept for the status page as
// blackbox_exporter keeps its last probes' logs: bounded by targets ×
// HistoryProbes × MaxProbeLogBytes, whatever a KDC answers.
const (
	HistoryProbes    = 5
	MaxProbeLogBytes = 4 << 10
)

// ProbeRecord and TargetStatus are the leaf package's records, so that the
// pages that show them need not link the engine.
type (
	ProbeRecord  = probestatus.Record
	TargetStatus = probestatus.Target
)

// Status returns the continuous targets by name with their last probes:
// copies, read when asked; the probes record whether anyone asks or not.
func (m *Manager) Status() []TargetStatus {
	m.mu.Lock()
	out := make([]TargetStatus, 0, len(m.loops))
	for _, l := range m.loops {
		out = append(out, TargetStatus{Name: l.cfg.Name, Address: l.cfg.Address, Module: l.cfg.Module,
			Transport: l.target.Transport().String(), Prober: l.target.Prober(), Interval: l.cfg.EffectiveInterval(), Recent: l.history.recent(), FailingSince: l.history.failingSince()})
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// history is a ring of a target's last HistoryProbes records.
type history struct {
	mu   sync.Mutex
	ring [HistoryProbes]ProbeRecord
	n    int // records ever added
	// failing is the start of the first failure since the last success.
	failing time.Time
}

func (h *history) add(r ProbeRecord) {
	h.mu.Lock()
	h.ring[h.n%HistoryProbes] = r
	h.n++
	switch {
	case r.Success:
		h.failing = time.Time{}
	case h.failing.IsZero():
		h.failing = r.Start
	}
	h.mu.Unlock()
}

func (h *history) failingSince() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failing
}

func (h *history) recent() []ProbeRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := min(h.n, HistoryProbes)
	out := make([]ProbeRecord, k)
	for i := range k {
		out[i] = h.ring[(h.n-1-i)%HistoryProbes]
	}
	return out
}

// probeLog is one probe's debug log: the loop's goroutine writes it during
// the probe and takes it after; what passes MaxProbeLogBytes is dropped.
type probeLog struct {
	buf  []byte
	full bool
}

func (p *probeLog) Write(b []byte) (int, error) {
	if room := MaxProbeLogBytes - len(p.buf); len(b) > room {
		p.buf = append(p.buf, b[:max(room, 0)]...)
		p.full = true
	} else {
		p.buf = append(p.buf, b...)
	}
	return len(b), nil
}

// take returns the log so far and empties it.
func (p *probeLog) take() string {
	s := string(p.buf)
	if p.full {
		s += "\n[log cut at " + strconv.Itoa(MaxProbeLogBytes) + " bytes]"
	}
	p.buf, p.full = p.buf[:0], false
	return s
}

// newProbeLogger is the debug logger of a continuous target's client,
// writing into w with a timestamp per line.
func newProbeLogger(w *probeLog) log.Logger {
	return log.With(log.NewLogfmtLogger(w), "ts", log.DefaultTimestampUTC)
}

// recordOf turns an outcome into a record, with the outcome's lines
// appended to its log.
func recordOf(o *Outcome, logger log.Logger, w *probeLog) ProbeRecord {
	logOutcome(logger, o)
	r := ProbeRecord{Start: o.Start, Duration: o.Duration, Success: o.Success()}
	if o.HasAS() {
		r.AS = krb5.Classify(o.ASErr)
		if o.ASErr == nil {
			r.Login = o.AS.Duration
		}
	}
	if o.TGSRan {
		r.TGS = krb5.Classify(o.TGSErr)
		if o.TGSErr == nil {
			r.Ticket = o.TGS.Duration
		}
	}
	if o.CrossRan {
		r.Referral, r.Remote = krb5.Classify(o.ReferralErr), krb5.Classify(o.RemoteErr)
	}
	switch {
	case o.KpasswdRan:
		r.Kadmind = krb5.Classify(o.KpasswdErr)
	case o.RPCRan:
		r.Kadmind = krb5.Classify(o.RPCErr)
	}
	switch {
	case o.HasAS() && o.ASErr != nil:
		r.Err = o.ASErr.Error()
	case o.TGSRan && o.TGSErr != nil:
		r.Err = o.TGSErr.Error()
	case o.CrossRan && o.ReferralErr != nil:
		r.Err = o.ReferralErr.Error()
	case o.CrossRan && o.RemoteErr != nil:
		r.Err = o.RemoteErr.Error()
	case o.KpasswdRan && o.KpasswdErr != nil:
		r.Err = o.KpasswdErr.Error()
	case o.RPCRan && o.RPCErr != nil:
		r.Err = o.RPCErr.Error()
	}
	r.Log = w.take()
	return r
}
