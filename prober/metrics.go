package prober

import (
	"slices"
	"time"

	"github.com/krb5-exporter/krb5-exporter/internal/kadmrpc"
	"github.com/krb5-exporter/krb5-exporter/internal/krb5"
	"github.com/krb5-exporter/krb5-exporter/internal/probestatus"

	"github.com/prometheus/client_golang/prometheus"
)

// The series and exchange names, declared once in the leaf package that
// the pages reading them import.
const (
	MetricSuccess  = probestatus.MetricSuccess
	MetricDuration = probestatus.MetricDuration

	ExchangeAS        = probestatus.ExchangeAS
	ExchangeTGS       = probestatus.ExchangeTGS
	ExchangeKpasswdAS = probestatus.ExchangeKpasswdAS
	ExchangeKpasswd   = probestatus.ExchangeKpasswd
	ExchangeKadminRPC = probestatus.ExchangeKadminRPC
	ExchangeReferral  = probestatus.ExchangeReferral
	ExchangeRemoteTGS = probestatus.ExchangeRemoteTGS
)

// latencyBuckets include the seed's SLO bounds (login p95 20 ms / p99 50 ms,
// service ticket p95 10 ms / p99 25 ms) and libkrb5's 1 s retransmit.
var latencyBuckets = []float64{.001, .0025, .005, .01, .02, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// latencyOpts are classic buckets plus a native histogram (factor 1.1: ~5%
// resolution) for the same observations.
func latencyOpts(name, help string) prometheus.HistogramOpts {
	return prometheus.HistogramOpts{
		Name:                            name,
		Help:                            help,
		Buckets:                         latencyBuckets,
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  160,
		NativeHistogramMinResetDuration: time.Hour,
	}
}

// probeMetrics are the continuous probes' metrics, one series set per target.
type probeMetrics struct {
	duration      *prometheus.HistogramVec
	phase         *prometheus.HistogramVec
	success       *prometheus.GaugeVec
	total         *prometheus.CounterVec
	lastSuccess   *prometheus.GaugeVec
	clockOffset   *prometheus.GaugeVec
	retransmits   *prometheus.CounterVec
	tcpFallbacks  *prometheus.CounterVec
	etype         *prometheus.GaugeVec
	method        *prometheus.GaugeVec
	worldReadable *prometheus.GaugeVec
	refused       *prometheus.CounterVec // /probe requests answered 403 or 503
	info          *prometheus.GaugeVec
}

func newProbeMetrics(reg prometheus.Registerer) *probeMetrics {
	m := &probeMetrics{
		duration: prometheus.NewHistogramVec(latencyOpts(
			MetricDuration,
			"Duration of successful probe exchanges: against the KDC a whole login (as, both round trips) or one service ticket request (tgs), and for a service of another realm the cross-realm TGT from the target KDC (referral) and the service ticket from that realm's KDC (remote_tgs); against kadmind the kpasswd prober's login for kadmin/changepw (kpasswd_as, at its KDC) and password-change exchange (kpasswd), or the kadmin prober's RPC call (kadmin_rpc); transport is the one the exchange finished on."),
			[]string{"target", "exchange", "transport"}),
		phase: prometheus.NewHistogramVec(latencyOpts(
			"krb5_probe_as_phase_duration_seconds",
			"Duration of each round trip of successful logins: preauth_required (AS-REQ without pre-authentication answered by PREAUTH_REQUIRED), spake_challenge (SPAKE support message answered by the KDC's challenge) and as_rep (AS-REQ with PA-ENC-TIMESTAMP or the SPAKE response answered by the AS-REP)."),
			[]string{"target", "phase"}),
		success: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: MetricSuccess,
			Help: "Whether the last probe exchange succeeded (1) or failed (0).",
		}, []string{"target", "exchange"}),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: probestatus.MetricTotal,
			Help: "Probe exchanges by result: success, a KDC error name (KDC_ERR_PREAUTH_FAILED, ...), timeout, connection_refused, network, decrypt, malformed_reply, keytab or no_tgt; through a KDC proxy also tls_unknown_authority, tls_name_mismatch, tls, http_status or proxy_timeout; for the cross-realm exchanges also no_trust_path (referral) and trust_key_mismatch (remote_tgs); for kpasswd a kpasswd result name (KPASSWD_AUTHERROR, ...) or no_ticket; for kadmin_rpc an RPC refusal (RPC_PROG_UNAVAIL, ...).",
		}, []string{"target", "exchange", "result"}),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "krb5_probe_last_success_timestamp_seconds",
			Help: "Unix time of the last successful probe exchange.",
		}, []string{"target", "exchange"}),
		clockOffset: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "krb5_probe_clock_offset_seconds",
			Help: "The KDC's clock minus the exporter's, from the KDC's last reply (KRB-ERROR stime to the microsecond, else AS-REP authtime, ±0.5 s). Logins fail beyond the KDC's clockskew (5 minutes by default).",
		}, []string{"target"}),
		retransmits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "krb5_probe_udp_retransmits_total",
			Help: "UDP requests sent again because no reply came within udp_retransmit (the exchange's duration includes the wait).",
		}, []string{"target"}),
		tcpFallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "krb5_probe_tcp_fallbacks_total",
			Help: "Exchanges retried over TCP because the KDC answered KRB_ERR_RESPONSE_TOO_BIG over UDP.",
		}, []string{"target"}),
		etype: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "krb5_probe_etype",
			Help: "Encryption type number of the last successful exchange, per part as the KDC logs them: reply (encrypted part of the reply), ticket (the ticket), session (the new session key). 20 = aes256-cts-hmac-sha384-192, 19 = aes128-cts-hmac-sha256-128, 18 = aes256-cts-hmac-sha1-96, 17 = aes128-cts-hmac-sha1-96.",
		}, []string{"target", "exchange", "part"}),
		method: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "krb5_probe_preauth_method",
			Help: "1 for the pre-authentication method of the last login (spake, encrypted_timestamp, or none when the principal needs none), 0 for the others.",
		}, []string{"target", "method"}),
		worldReadable: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "krb5_probe_keytab_world_readable",
			Help: "1 when the target's keytab or password file is readable by every local user (chmod o-r it).",
		}, []string{"target"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "krb5_probe_http_refused_total",
			Help: "/probe requests refused: target_not_allowed (403: the target is not in the module's allowed_kdcs) or too_many_requests (503: --web.max-probe-requests probes were running).",
		}, []string{"reason"}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "krb5_probe_target_info",
			Help: "Always 1 for each continuous probe: its module's realm (module_realm: a scrape target's own realm label is left alone) and configured transport (udp, tcp, https: through a KDC proxy), to join a proxy's target with the same realm's direct ones; and the realm of its module's service (service_realm: empty without one, another realm for a cross-realm probe), to join a trust's probe with the service realm's own.",
		}, []string{"target", "module_realm", "transport", "service_realm"}),
	}
	m.refused.WithLabelValues(RefusedNotAllowed)
	m.refused.WithLabelValues(RefusedBusy)
	reg.MustRegister(m.duration, m.phase, m.success, m.total, m.lastSuccess, m.clockOffset,
		m.retransmits, m.tcpFallbacks, m.etype, m.method, m.worldReadable, m.refused, m.info)
	return m
}

// nonKDCClasses are pre-created for every target so that rate() and
// increase() see the first failure of each kind.
var nonKDCClasses = []string{krb5.ClassSuccess, krb5.ClassTimeout, krb5.ClassConnectionRefused, krb5.ClassNetwork,
	krb5.ClassDecrypt, krb5.ClassMalformedReply, krb5.ClassKeytab, krb5.ClassPreauthUnsupported}

// proxyClasses are pre-created as well for targets of transport https.
var proxyClasses = []string{krb5.ClassTLSUnknownAuthority, krb5.ClassTLSNameMismatch, krb5.ClassTLS,
	krb5.ClassHTTPStatus, krb5.ClassProxyTimeout}

// preauthMethods are the values of the method label.
var preauthMethods = []string{krb5.MethodSPAKE, krb5.MethodEncTimestamp, krb5.MethodNone}

// initTarget creates a target's series before its first probe.
// serviceRealm is the realm of the module's service ("" without one).
func (m *probeMetrics) initTarget(target string, exchanges []string, realm, serviceRealm string, tr krb5.Transport) {
	m.info.DeletePartialMatch(prometheus.Labels{"target": target})
	m.info.WithLabelValues(target, realm, tr.String(), serviceRealm).Set(1)
	classes := nonKDCClasses
	if tr == krb5.HTTPS {
		classes = append(slices.Clip(classes), proxyClasses...)
	}
	login := false
	for _, ex := range exchanges {
		for _, c := range classes {
			m.total.WithLabelValues(target, ex, c)
		}
		switch ex {
		case ExchangeAS, ExchangeKpasswdAS:
			login = true
		case ExchangeTGS:
			m.total.WithLabelValues(target, ex, ClassNoTGT)
		case ExchangeReferral:
			m.total.WithLabelValues(target, ex, ClassNoTGT)
			m.total.WithLabelValues(target, ex, krb5.ClassNoTrustPath)
		case ExchangeRemoteTGS:
			m.total.WithLabelValues(target, ex, ClassNoTGT)
			m.total.WithLabelValues(target, ex, krb5.ClassTrustKeyMismatch)
		case ExchangeKpasswd:
			m.total.WithLabelValues(target, ex, ClassNoTicket)
		case ExchangeKadminRPC:
			for _, c := range kadmrpc.Classes {
				m.total.WithLabelValues(target, ex, c)
			}
		}
	}
	if !login {
		return
	}
	m.retransmits.WithLabelValues(target)
	m.tcpFallbacks.WithLabelValues(target)
	for _, pm := range preauthMethods {
		m.method.WithLabelValues(target, pm)
	}
}

// deleteTarget removes every series of a target that left the configuration.
func (m *probeMetrics) deleteTarget(target string) {
	l := prometheus.Labels{"target": target}
	m.duration.DeletePartialMatch(l)
	m.phase.DeletePartialMatch(l)
	m.success.DeletePartialMatch(l)
	m.total.DeletePartialMatch(l)
	m.lastSuccess.DeletePartialMatch(l)
	m.clockOffset.DeletePartialMatch(l)
	m.retransmits.DeletePartialMatch(l)
	m.tcpFallbacks.DeletePartialMatch(l)
	m.etype.DeletePartialMatch(l)
	m.method.DeletePartialMatch(l)
	m.worldReadable.DeletePartialMatch(l)
	m.info.DeletePartialMatch(l)
}

// record turns one probe outcome into metrics. What the login alone tells
// comes first and each exchange's success gauge last: a reader that sees a
// success sees the rest of that probe too.
func (m *probeMetrics) record(target string, tr krb5.Transport, o *Outcome) {
	if o.HasAS() {
		if o.AS.HasClockOffset {
			m.clockOffset.WithLabelValues(target).Set(o.AS.ClockOffset.Seconds())
		}
		if o.AS.Method != "" {
			for _, pm := range preauthMethods {
				v := 0.0
				if pm == o.AS.Method {
					v = 1
				}
				m.method.WithLabelValues(target, pm).Set(v)
			}
		}
		if o.ASErr == nil {
			if o.AS.PreauthRequired > 0 {
				m.phase.WithLabelValues(target, krb5.PhasePreauthRequired).Observe(o.AS.PreauthRequired.Seconds())
			}
			if o.AS.SPAKEChallenge > 0 {
				m.phase.WithLabelValues(target, krb5.PhaseSPAKEChallenge).Observe(o.AS.SPAKEChallenge.Seconds())
			}
			m.phase.WithLabelValues(target, krb5.PhaseASRep).Observe(o.AS.ASRep.Seconds())
		}
	}
	exchanges := o.Exchanges(tr)
	retrans, fallbacks := 0, 0
	for _, ex := range exchanges {
		if ex.Err == nil {
			m.duration.WithLabelValues(target, ex.Name, ex.Transport).Observe(ex.Duration.Seconds())
			if ex.Etypes != nil {
				m.etypes(target, ex.Name, *ex.Etypes)
			}
		}
		retrans += ex.Retransmits
		if ex.Fallback {
			fallbacks++
		}
	}
	m.retransmits.WithLabelValues(target).Add(float64(retrans))
	m.tcpFallbacks.WithLabelValues(target).Add(float64(fallbacks))
	for _, ex := range exchanges {
		m.exchange(target, ex.Name, ex.Err, ex.End)
	}
}

func (m *probeMetrics) exchange(target, ex string, err error, end time.Time) {
	m.total.WithLabelValues(target, ex, krb5.Classify(err)).Inc()
	if err != nil {
		m.success.WithLabelValues(target, ex).Set(0)
		return
	}
	m.success.WithLabelValues(target, ex).Set(1)
	m.lastSuccess.WithLabelValues(target, ex).Set(float64(end.UnixNano()) / 1e9)
}

func (m *probeMetrics) etypes(target, ex string, e krb5.Etypes) {
	m.etype.WithLabelValues(target, ex, "reply").Set(float64(e.Reply))
	m.etype.WithLabelValues(target, ex, "ticket").Set(float64(e.Ticket))
	m.etype.WithLabelValues(target, ex, "session").Set(float64(e.Session))
}
