package kdclog

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/kdclog/talkers"
)

// The top talkers' series (top and the landing page read them);
// docs/metrics.md, section "Top talkers".
const (
	MetricTopRequests       = "krb5_kdc_top_requests"
	MetricTopFailures       = "krb5_kdc_top_failures"
	MetricTopRetransmits    = "krb5_kdc_top_retransmits"
	MetricTopWindowRequests = "krb5_kdc_top_window_requests"
	MetricTopWindowSeconds  = "krb5_kdc_top_window_seconds"
)

var (
	descTopRequests = prometheus.NewDesc(MetricTopRequests,
		"Requests (a login one, whatever its round trips) of the last complete top-talkers window from the top-k names by client address, client principal or service (TGS only), by request type; name escaped, a longer one than 48 bytes cut to 40 and its hash; a lower bound, exact while the window saw at most 4k names (docs/metrics.md).",
		[]string{"by", "request", "name"}, nil)
	descTopFailures = prometheus.NewDesc(MetricTopFailures,
		"Failed requests (not ISSUE, NEEDED_PREAUTH nor a SPAKE round trip) of the last complete top-talkers window from the top-k names by client address, client principal or service (TGS only).",
		[]string{"by", "name"}, nil)
	descTopRetransmits = prometheus.NewDesc(MetricTopRetransmits,
		"Retransmitted requests (DISPATCH lines) of the last complete top-talkers window from the top-k client addresses.",
		[]string{"name"}, nil)
	descTopWindowRequests = prometheus.NewDesc(MetricTopWindowRequests,
		"Every request (a login one) of the last complete top-talkers window, by request type (the whole the top names are a share of): probes' excluded, as in krb5_kdc_requests_total.",
		[]string{"request"}, nil)
	descTopWindowSeconds = prometheus.NewDesc(MetricTopWindowSeconds,
		"Length of the top-talkers window (top_talkers.window): the top series divided by it are rates.",
		nil, nil)
)

// talkersState is the Manager's top talkers. As the attack detector's,
// its lock is taken at a batch's first request line and released by the
// batch's flush, so that a line costs no lock.
type talkersState struct {
	on  atomic.Bool
	mu  sync.Mutex
	t   *talkers.Tracker
	now func() time.Time // the tests' clock
}

func newTalkersState() *talkersState {
	d := config.TopTalkers{}.WithDefaults()
	s := &talkersState{t: talkers.New(d.TopK, d.Window), now: time.Now}
	s.on.Store(true)
	return s
}

func (s *talkersState) apply(c config.TopTalkers) {
	c = c.WithDefaults()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.t.SetConfig(c.TopK, c.Window)
	s.on.Store(!c.Disabled)
}

// hold takes the tracker for the rest of the batch.
func (s *source) holdTalkers() *talkers.Tracker {
	t := s.c.talkers
	if !s.talkersHeld {
		t.mu.Lock()
		s.talkersHeld = true
		t.t.Tick(t.now())
	}
	return t.t
}

// observeTalkers counts a request line (not a probe's); si is its status
// index: the tracker counts a login's lines as one request.
func (s *source) observeTalkers(e *Event, si int) {
	if !s.c.talkers.on.Load() {
		return
	}
	tgs := e.Request == RequestTGS
	var svc []byte
	if tgs {
		svc = serverOf(e.AfterClient)
	}
	st := talkers.Refused
	switch si {
	case idxIssue:
		st = talkers.Issued
	case idxNeededPreauth:
		st = talkers.NeededPreauth
	case idxMorePreauth:
		st = talkers.MorePreauth
	}
	s.holdTalkers().Request(tgs, st, e.Addr, e.Client, svc)
}

// observeRetransmit counts a DISPATCH line's address.
func (s *source) observeRetransmit(e *Event) {
	if !s.c.talkers.on.Load() || len(e.Addr) == 0 {
		return
	}
	s.holdTalkers().Retransmit(e.Addr)
}

func (s *source) flushTalkers() {
	if s.talkersHeld {
		s.talkersHeld = false
		s.c.talkers.mu.Unlock()
	}
}

// last is the last complete window, nil while the top talkers are off.
func (s *talkersState) last() *talkers.Snapshot {
	if !s.on.Load() {
		return nil
	}
	s.mu.Lock()
	s.t.Tick(s.now())
	l := s.t.Last()
	s.mu.Unlock()
	return &l
}

func describeTalkers(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTopRequests, descTopFailures, descTopRetransmits, descTopWindowRequests, descTopWindowSeconds} {
		ch <- d
	}
}

func (s *talkersState) collect(ch chan<- prometheus.Metric) {
	l := s.last()
	if l == nil {
		return
	}
	gauge(ch, descTopWindowSeconds, l.Window.Seconds())
	if l.Start.IsZero() {
		return // no window complete yet
	}
	gauge(ch, descTopWindowRequests, float64(l.Requests[0]), "as")
	gauge(ch, descTopWindowRequests, float64(l.Requests[1]), "tgs")
	for i, list := range l.Lists {
		for _, n := range list {
			switch by := talkers.ListBy[i]; talkers.List(i) {
			case talkers.FailuresAddress, talkers.FailuresClient, talkers.FailuresService:
				gauge(ch, descTopFailures, float64(n.Count), by, n.Name)
			case talkers.RetransmitsAddress:
				gauge(ch, descTopRetransmits, float64(n.Count), n.Name)
			default:
				gauge(ch, descTopRequests, float64(n.Count), by, talkers.ListRequest[i], n.Name)
			}
		}
	}
}

// dispatchAddr reads the address of a DISPATCH line, "ADDR, resending
// previous response" or "ADDR during request processing, ...".
func dispatchAddr(m []byte) []byte {
	for i, c := range m {
		if c == ',' || c == ' ' {
			return m[:i]
		}
	}
	return m
}

// TopTalkers is the top talkers' last complete window, nil while they
// are off (the landing page's table).
func (m *Manager) TopTalkers() *talkers.Snapshot { return m.counts.talkers.last() }
