package prober

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"

	"github.com/krb5-exporter/krb5-exporter/config"
	"github.com/krb5-exporter/krb5-exporter/internal/kdcaddr"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
)

// DefaultModule is the module /probe uses when the request names none.
const DefaultModule = "default"

// scrapeTimeoutOffset is kept from Prometheus' scrape timeout so the reply
// is written before Prometheus gives up.
const scrapeTimeoutOffset = 500 * time.Millisecond

// The scrape timeouts accepted from X-Prometheus-Scrape-Timeout-Seconds.
const (
	minScrapeTimeout = time.Millisecond
	maxScrapeTimeout = time.Hour
)

// Handler serves /probe?target=host:port&module=NAME in the manner of
// blackbox_exporter: one probe per request with the module's settings from
// the current configuration (secrets stay in the configuration file), its
// result in a fresh registry, and &debug=true for the probe's log.
//
// A probe sends key-derived data (PA-ENC-TIMESTAMP) to the target, so the
// target must be one of the module's allowed_kdcs (403 otherwise), and at
// most maxInFlight probes run at once (503 beyond; 0: no limit).
func (m *Manager) Handler(getConfig func() *config.Config, maxInFlight int) http.Handler {
	h := &probeHandler{logger: m.logger, creds: m.creds, getConfig: getConfig, refused: m.metrics.refused}
	if maxInFlight > 0 {
		h.inFlight = make(chan struct{}, maxInFlight)
	}
	return h
}

type probeHandler struct {
	logger    log.Logger
	creds     *credCache
	getConfig func() *config.Config
	inFlight  chan struct{} // nil: no limit
	refused   *prometheus.CounterVec
}

// Reasons of krb5_probe_http_refused_total.
const (
	RefusedNotAllowed = "target_not_allowed"
	RefusedBusy       = "too_many_requests"
)

func (h *probeHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.inFlight != nil {
		select {
		case h.inFlight <- struct{}{}:
			defer func() { <-h.inFlight }()
		default:
			h.refused.WithLabelValues(RefusedBusy).Inc()
			http.Error(w, fmt.Sprintf("%d probes are running, the limit (--web.max-probe-requests); try again later", cap(h.inFlight)), http.StatusServiceUnavailable)
			return
		}
	}
	q := r.URL.Query()
	target := q.Get("target")
	if target == "" {
		http.Error(w, "target parameter is missing (want /probe?target=host:port&module=NAME)", http.StatusBadRequest)
		return
	}
	name := q.Get("module")
	if name == "" {
		name = DefaultModule
	}
	var mod config.ProbeModule
	ok := false
	if cfg := h.getConfig(); cfg != nil {
		mod, ok = cfg.Modules[name]
	}
	if !ok {
		http.Error(w, fmt.Sprintf("unknown module %q", name), http.StatusBadRequest)
		return
	}
	budget, err := scrapeBudget(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// With transport https the target is the proxy's URL, allowed by
	// allowed_proxy_urls; otherwise a KDC address, allowed by allowed_kdcs.
	var addr string
	if mod.Transport == "https" {
		addr, err = kdcaddr.CanonicalProxyURL(target)
	} else {
		// A bare host gets the prober's port: the KDC's 88, kadmind's 464 or 749.
		addr, err = ServerAddress(target, &mod)
	}
	if err != nil {
		http.Error(w, fmt.Sprintf("invalid target for module %q (transport %s): %v", name, krb5Transport(mod.Transport), err), http.StatusBadRequest)
		return
	}
	allowed, list := false, "allowed_kdcs"
	if mod.Transport == "https" {
		allowed, list = mod.AllowsProxyURL(addr), "allowed_proxy_urls"
	} else {
		allowed = mod.AllowsKDC(addr)
	}
	if !allowed {
		h.refuse(w, name, addr, list)
		return
	}
	// A cross-realm probe sends key-derived data to the service realm's
	// KDCs too: each must be allowed as the target is.
	for _, kdc := range mod.RemoteKDCs() {
		if !mod.AllowsKDC(kdc) {
			h.refuse(w, name, kdc, "allowed_kdcs")
			return
		}
	}
	ctx := r.Context()
	if budget > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, budget)
		defer cancel()
	}

	var logBuf bytes.Buffer
	logger := log.With(teeLogger{log.NewLogfmtLogger(log.NewSyncWriter(&logBuf)), h.logger},
		"target", addr, "module", name)
	reg := prometheus.NewRegistry()
	pm := newOneShotMetrics(reg)
	start := time.Now()
	o, err := h.probe(ctx, addr, &mod, name, logger)
	if err != nil {
		level.Error(logger).Log("msg", "probe not run", "result", krb5.Classify(err), "err", err)
		pm.duration.Set(time.Since(start).Seconds())
		ex := ExchangeAS
		switch mod.EffectiveProber() {
		case config.ProberKpasswd:
			ex = ExchangeKpasswdAS
		case config.ProberKadmin:
			ex = ExchangeKadminRPC
		}
		pm.exchange(ex, err, 0, nil)
	} else {
		pm.record(&o)
		logOutcome(logger, &o)
	}

	if q.Get("debug") == "true" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "Logs for the probe:\n%s\n\nMetrics that would have been returned:\n", logBuf.String())
		mfs, _ := reg.Gather()
		enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, mf := range mfs {
			_ = enc.Encode(mf)
		}
		return
	}
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}

// refuse answers 403: the module may not send its key-derived requests
// to addr.
func (h *probeHandler) refuse(w http.ResponseWriter, module, addr, list string) {
	h.refused.WithLabelValues(RefusedNotAllowed).Inc()
	level.Debug(h.logger).Log("msg", "probe refused: target not in the module's "+list, "target", addr, "module", module)
	http.Error(w, fmt.Sprintf("module %q may not be used against %s: list it in the module's %s", module, addr, list), http.StatusForbidden)
}

func krb5Transport(s string) string {
	if s == "" {
		return "udp"
	}
	return s
}

func (h *probeHandler) probe(ctx context.Context, addr string, mod *config.ProbeModule, name string, logger log.Logger) (Outcome, error) {
	if mod.EffectiveProber() == config.ProberKadmin {
		t, err := NewTarget(addr, mod, nil, logger)
		if err != nil {
			return Outcome{}, err
		}
		level.Debug(logger).Log("msg", "probing kadmind's RPC", "kadmind", addr)
		return t.Run(ctx), nil
	}
	creds, err := h.creds.get(name, mod)
	if err != nil {
		return Outcome{}, &krb5.Error{Class: krb5.ClassKeytab, Phase: krb5.PhaseKeys, Err: err}
	}
	if creds.WorldReadable() {
		level.Warn(logger).Log("msg", "keytab or password file is readable by every local user")
	}
	t, err := NewTarget(addr, mod, creds, logger)
	if err != nil {
		return Outcome{}, err
	}
	defer t.Close()
	level.Debug(logger).Log("msg", "probing", "transport", t.Transport(), "client", creds.Principal())
	return t.Run(ctx), nil
}

func logOutcome(logger log.Logger, o *Outcome) {
	if o.RPCRan {
		if o.RPCErr != nil {
			level.Error(logger).Log("msg", "kadmind RPC call failed", "result", krb5.Classify(o.RPCErr), "err", o.RPCErr)
		} else {
			level.Info(logger).Log("msg", "kadmind answered the RPC call", "reply", o.RPC.Reply, "duration", o.RPC.Duration)
		}
	}
	if !o.HasAS() {
		return
	}
	if o.KpasswdRan {
		defer func() {
			if o.KpasswdErr != nil {
				level.Error(logger).Log("msg", "kpasswd exchange failed", "result", krb5.Classify(o.KpasswdErr), "err", o.KpasswdErr)
			} else {
				level.Info(logger).Log("msg", "kadmind verified the AP-REQ and refused the empty request", "kpasswd_result", krb5.KpasswdResultName(o.Kpasswd.Code), "duration", o.Kpasswd.Duration)
			}
		}()
	}
	if o.ASErr != nil {
		level.Error(logger).Log("msg", "login failed", "result", krb5.Classify(o.ASErr), "err", o.ASErr)
	} else {
		level.Info(logger).Log("msg", "login succeeded", "duration", o.AS.Duration, "round_trips", o.AS.RoundTrips)
	}
	if o.CrossRan {
		logHop(logger, "cross-realm TGT", o.ReferralErr, o.Referral.Duration)
		logHop(logger, "remote service ticket", o.RemoteErr, o.Remote.Duration, "kdc", o.RemoteKDC)
		if o.Remote.HasClockOffset {
			level.Info(logger).Log("msg", "remote KDC clock", "kdc", o.RemoteKDC, "clock_offset", o.Remote.ClockOffset)
		}
	}
	if !o.TGSRan {
		return
	}
	if o.TGSErr != nil {
		level.Error(logger).Log("msg", "service ticket failed", "result", krb5.Classify(o.TGSErr), "err", o.TGSErr)
	} else {
		level.Info(logger).Log("msg", "service ticket issued", "duration", o.TGS.Duration)
	}
}

// logHop logs one cross-realm exchange.
func logHop(logger log.Logger, what string, err error, d time.Duration, kv ...any) {
	if err != nil {
		level.Error(logger).Log(append([]any{"msg", what + " failed", "result", krb5.Classify(err), "err", err}, kv...)...)
		return
	}
	level.Info(logger).Log(append([]any{"msg", what + " issued", "duration", d}, kv...)...)
}

// scrapeBudget is Prometheus' scrape timeout less scrapeTimeoutOffset, or 0
// when the request carries none (each exchange is still bounded by the
// module's timeout).
func scrapeBudget(r *http.Request) (time.Duration, error) {
	v := r.Header.Get("X-Prometheus-Scrape-Timeout-Seconds")
	if v == "" {
		return 0, nil
	}
	s, err := strconv.ParseFloat(v, 64)
	// !(s >= min) also refuses NaN and -Inf; beyond the maximum (+Inf
	// included) the duration would overflow or mean nothing.
	if err != nil || !(s >= minScrapeTimeout.Seconds()) || s > maxScrapeTimeout.Seconds() {
		return 0, fmt.Errorf("invalid X-Prometheus-Scrape-Timeout-Seconds %q: want seconds from %g to %g", v, minScrapeTimeout.Seconds(), maxScrapeTimeout.Seconds())
	}
	d := time.Duration(s * float64(time.Second))
	if d > 2*scrapeTimeoutOffset {
		d -= scrapeTimeoutOffset
	}
	return d, nil
}

// teeLogger writes each line to the probe's debug buffer as it is, and to
// the daemon's log at debug level with the line's own level kept as
// probe_level: a failing /probe scrape is not a daemon error.
type teeLogger struct{ buf, daemon log.Logger }

func (t teeLogger) Log(kv ...any) error {
	_ = t.buf.Log(kv...)
	out := make([]any, 0, len(kv)+2)
	out = append(out, level.Key(), level.DebugValue())
	for i := 0; i+1 < len(kv); i += 2 {
		k := kv[i]
		if k == level.Key() {
			k = "probe_level"
		}
		out = append(out, k, kv[i+1])
	}
	return t.daemon.Log(out...)
}

// credCache keeps the credentials of each module between /probe requests, so
// a password's string-to-key runs once per module, not per request. Keytab
// credentials re-read their file when it changes.
type credCache struct {
	mu sync.Mutex
	m  map[string]cachedCreds
}

type cachedCreds struct {
	module config.ProbeModule
	creds  *krb5.Credentials
}

func newCredCache() *credCache { return &credCache{m: map[string]cachedCreds{}} }

func (c *credCache) get(name string, mod *config.ProbeModule) (*krb5.Credentials, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[name]; ok && reflect.DeepEqual(e.module, *mod) {
		return e.creds, nil
	}
	creds, err := ModuleCredentials(mod)
	if err != nil {
		return nil, err
	}
	c.m[name] = cachedCreds{module: *mod, creds: creds}
	return creds, nil
}

// oneShotMetrics are the metrics of one /probe request.
type oneShotMetrics struct {
	success     prometheus.Gauge
	duration    prometheus.Gauge
	exSuccess   *prometheus.GaugeVec
	exDuration  *prometheus.GaugeVec
	phase       *prometheus.GaugeVec
	result      *prometheus.GaugeVec
	clockOffset prometheus.Gauge
	retransmits prometheus.Gauge
	tcpFallback prometheus.Gauge
	etype       *prometheus.GaugeVec
	method      *prometheus.GaugeVec
	reg         prometheus.Registerer
}

func newOneShotMetrics(reg prometheus.Registerer) *oneShotMetrics {
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	gv := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	}
	m := &oneShotMetrics{
		success:     g("probe_success", "Whether the probe succeeded: the login and, when the module names a service, the service ticket (for a service of another realm: the cross-realm TGT and the service ticket from that realm's KDC)."),
		duration:    g("probe_duration_seconds", "How long the probe took, both exchanges."),
		exSuccess:   gv("probe_krb5_exchange_success", "Whether the exchange succeeded.", "exchange"),
		exDuration:  gv("probe_krb5_exchange_duration_seconds", "Duration of the exchange, successful or not.", "exchange"),
		phase:       gv("probe_krb5_as_phase_duration_seconds", "Duration of each round trip of the login.", "phase"),
		result:      gv("probe_krb5_result", "Always 1; result is the exchange's outcome: success or the error class.", "exchange", "result"),
		clockOffset: g("probe_krb5_clock_offset_seconds", "The KDC's clock minus the exporter's."),
		retransmits: g("probe_krb5_udp_retransmits", "UDP requests sent again during the probe."),
		tcpFallback: g("probe_krb5_tcp_fallbacks", "Exchanges retried over TCP after KRB_ERR_RESPONSE_TOO_BIG."),
		etype:       gv("probe_krb5_etype", "Encryption type number per exchange and part (reply, ticket, session).", "exchange", "part"),
		method:      gv("probe_krb5_preauth_method", "Always 1; method is the login's pre-authentication: spake, encrypted_timestamp or none.", "method"),
	}
	reg.MustRegister(m.success, m.duration, m.exSuccess, m.exDuration, m.phase, m.result,
		m.retransmits, m.tcpFallback, m.etype, m.method)
	m.reg = reg
	return m
}

func (m *oneShotMetrics) record(o *Outcome) {
	m.duration.Set(o.Duration.Seconds())
	if o.Success() {
		m.success.Set(1)
	}
	retrans, fallbacks := 0, 0
	for _, ex := range o.Exchanges(krb5.UDP) {
		m.exchange(ex.Name, ex.Err, ex.Duration, ex.Etypes)
		retrans += ex.Retransmits
		if ex.Fallback {
			fallbacks++
		}
	}
	if !o.HasAS() {
		return
	}
	if o.AS.PreauthRequired > 0 {
		m.phase.WithLabelValues(krb5.PhasePreauthRequired).Set(o.AS.PreauthRequired.Seconds())
	}
	if o.AS.SPAKEChallenge > 0 {
		m.phase.WithLabelValues(krb5.PhaseSPAKEChallenge).Set(o.AS.SPAKEChallenge.Seconds())
	}
	if o.AS.ASRep > 0 {
		m.phase.WithLabelValues(krb5.PhaseASRep).Set(o.AS.ASRep.Seconds())
	}
	if o.AS.Method != "" {
		m.method.WithLabelValues(o.AS.Method).Set(1)
	}
	if o.AS.HasClockOffset {
		// Only a reply from the KDC tells its time: no series otherwise.
		m.reg.MustRegister(m.clockOffset)
		m.clockOffset.Set(o.AS.ClockOffset.Seconds())
	}
	m.retransmits.Set(float64(retrans))
	m.tcpFallback.Set(float64(fallbacks))
}

func (m *oneShotMetrics) exchange(ex string, err error, d time.Duration, e *krb5.Etypes) {
	m.result.WithLabelValues(ex, krb5.Classify(err)).Set(1)
	m.exDuration.WithLabelValues(ex).Set(d.Seconds())
	if err != nil {
		m.exSuccess.WithLabelValues(ex).Set(0)
		return
	}
	m.exSuccess.WithLabelValues(ex).Set(1)
	if e == nil {
		return // kadmind's exchanges: no KDC reply parts
	}
	m.etype.WithLabelValues(ex, "reply").Set(float64(e.Reply))
	m.etype.WithLabelValues(ex, "ticket").Set(float64(e.Ticket))
	m.etype.WithLabelValues(ex, "session").Set(float64(e.Session))
}
