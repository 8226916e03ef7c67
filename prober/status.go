package prober

import (
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/go-kit/log"

	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// The continuous probes' recent history, kept for the status page as
// blackbox_exporter keeps its last probes' logs: bounded by targets ×
// HistoryProbes × MaxProbeLogBytes, whatever a KDC answers.
const (
	HistoryProbes    = 5
	MaxProbeLogBytes = 4 << 10
)

// ProbeRecord is one finished probe of a continuous target.
type ProbeRecord struct {
	Start    time.Time
	Duration time.Duration // both exchanges
	Success  bool
	// AS and TGS are the exchanges' results: "success" or the error
	// class; TGS is empty when the module names no service, AS for the
	// kadmin prober (no login).
	AS, TGS string
	// Kadmind is the result of the kpasswd or kadmin prober's exchange
	// with kadmind (kpasswd, kadmin_rpc); empty for the kdc prober.
	Kadmind string
	// Referral and Remote are the cross-realm exchanges' results, empty
	// when the module's service is of the client's realm.
	Referral, Remote string
	// Err is the first failure's text ("" on success).
	Err string
	// Log is the probe's debug log (logfmt), cut at MaxProbeLogBytes.
	Log string
}

// TargetStatus is what the status page shows of one continuous target.
type TargetStatus struct {
	Name, Address, Module string
	// Transport is the module's: udp, tcp or https (a KDC proxy).
	Transport string
	// Prober is the module's prober: kdc, kpasswd or kadmin.
	Prober   string
	Interval time.Duration
	// Recent holds the last probes, newest first (none before the first).
	Recent []ProbeRecord
}

// Status returns the continuous targets by name with their last probes:
// copies, read when asked; the probes record whether anyone asks or not.
func (m *Manager) Status() []TargetStatus {
	m.mu.Lock()
	out := make([]TargetStatus, 0, len(m.loops))
	for _, l := range m.loops {
		out = append(out, TargetStatus{Name: l.cfg.Name, Address: l.cfg.Address, Module: l.cfg.Module,
			Transport: l.target.Transport().String(), Prober: l.target.Prober(), Interval: l.cfg.EffectiveInterval(), Recent: l.history.recent()})
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
}

func (h *history) add(r ProbeRecord) {
	h.mu.Lock()
	h.ring[h.n%HistoryProbes] = r
	h.n++
	h.mu.Unlock()
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
	}
	if o.TGSRan {
		r.TGS = krb5.Classify(o.TGSErr)
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
