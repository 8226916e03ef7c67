package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// psel selects the probes of the chosen targets.
const psel = sel + `, target=~"$target"`

// Probes is the synthetic probes dashboard: per target and transport,
// latency distributions, the login's round trips, failures by class and
// the KDC's clock.
func Probes() *dashboard.DashboardBuilder {
	b := newDashboard("Kerberos KDC probes", "krb5-probes",
		"krb5-exporter's synthetic logins (AS) and service tickets (TGS) against each KDC: latency against the targets, the login's round trips, failures by class, the KDC's clock.")
	variables(b, true, "krb5_exporter_build_info", "The krb5-exporter next to each KDC.")
	b.WithVariable(dashboard.NewQueryVariableBuilder("target").
		Label("Target").
		Description("The probe's name from the exporter's configuration.").
		Datasource(datasource).
		Query(dashboard.StringOrMap{String: cog.ToPtr(`label_values(krb5_probe_success{job=~"$job", instance=~"$instance"}, target)`)}).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc).
		Multi(true).
		IncludeAll(true).
		AllValue(".+"))

	b.WithRow(dashboard.NewRowBuilder("Now"))
	b.WithPanel(upDown("Probe success", "Whether the last exchange of each target succeeded (krb5_probe_success).", 12, 5,
		[]query{q(`krb5_probe_success{`+psel+`}`, "{{target}} {{exchange}}")}).Links(runbook("KDCProbeFailing")))
	b.WithPanel(single("p95 over 30 minutes", "The recorded p95 of each target and exchange over 30 minutes. Targets: logins 20 ms, service tickets 10 ms.", "s", 12, 5,
		[]query{q(`target_exchange:krb5_probe_duration_seconds:p95_30m{`+psel+`}`, "{{target}} {{exchange}}")},
		limit{0.010, "orange"}, limit{0.020, "red"}).Links(runbook("KDCLoginLatencyP95High", "KDCTicketLatencyP95High")))

	b.WithRow(dashboard.NewRowBuilder("Latency"))
	b.WithPanel(heat("Login latency distribution", "Successful probe logins per latency bucket, all selected targets.", 12, 8,
		`sum by (le) (rate(krb5_probe_duration_seconds_bucket{`+psel+`, exchange="as"}[$__rate_interval]))`))
	b.WithPanel(heat("Service ticket latency distribution", "Successful probe service tickets per latency bucket, all selected targets.", 12, 8,
		`sum by (le) (rate(krb5_probe_duration_seconds_bucket{`+psel+`, exchange="tgs"}[$__rate_interval]))`))
	b.WithPanel(graph("Login p95 and p99 by transport", "Per target and the transport the exchange finished on (tcp for a UDP probe: the KDC answered RESPONSE_TOO_BIG). Targets: p95 20 ms, p99 50 ms (dashed).", "s", 12, 8,
		transportQueries("as"), limit{0.020, "orange"}, limit{0.050, "red"}))
	b.WithPanel(graph("Service ticket p95 and p99 by transport", "Per target and transport. Targets: p95 10 ms, p99 25 ms (dashed).", "s", 12, 8,
		transportQueries("tgs"), limit{0.010, "orange"}, limit{0.025, "red"}))
	b.WithPanel(graph("Login round trips (p95)", "Each round trip of a login: preauth_required (the KDC asks for pre-authentication) and as_rep (it checks it, issues the TGT and writes the login time). A slow as_rep alone points at the database write.", "s", 12, 8,
		[]query{q(`histogram_quantile(0.95, sum by (target, phase, le) (rate(krb5_probe_as_phase_duration_seconds_bucket{`+psel+`}[$__rate_interval])))`, "{{target}} {{phase}}")}))
	b.WithPanel(graph("Latency p95 (recorded, 30 minutes)", "The recording rules the latency alerts read, against the targets.", "s", 12, 8,
		[]query{
			q(`target_exchange:krb5_probe_duration_seconds:p95_30m{`+psel+`}`, "{{target}} {{exchange}} p95"),
			q(`target_exchange:krb5_probe_duration_seconds:p99_30m{`+psel+`}`, "{{target}} {{exchange}} p99"),
		}, limit{0.010, "orange"}, limit{0.050, "red"}).Links(runbook("KDCLatencyCreeping")))

	b.WithRow(dashboard.NewRowBuilder("Failures and clock"))
	b.WithPanel(graph("Failures by class", "Failed exchanges per second by result: a KDC error by its RFC 4120 name, or timeout, connection_refused, network, decrypt, malformed_reply, keytab, no_tgt.", "ops", 12, 8,
		[]query{q(`sum by (target, exchange, result) (rate(krb5_probe_total{`+psel+`, result!="success"}[$__rate_interval]))`, "{{target}} {{exchange}} {{result}}")}).Links(runbook("KDCProbeFailing")))
	b.WithPanel(graph("Failure ratio (30 minutes)", "Share of failed probe exchanges over 30 minutes.", "percentunit", 12, 8,
		[]query{q(`target_exchange:krb5_probe_failures:ratio_rate30m{`+psel+`}`, "{{target}} {{exchange}}")}, limit{0.001, "red"}))
	b.WithPanel(signedGraph("KDC clock offset", "The KDC's clock minus the exporter's (±0.5 s). Logins fail beyond 300 s; the alert is at 60 s (dashed).", "s", 12, 8,
		[]query{q(`krb5_probe_clock_offset_seconds{`+psel+`}`, "{{target}}")}, limit{60, "red"}).Links(runbook("KDCClockOffsetHigh")))
	b.WithPanel(graph("UDP resends and TCP fallbacks", "Probe requests sent again over UDP for lack of a reply, and exchanges retried over TCP after RESPONSE_TOO_BIG.", "ops", 12, 8,
		[]query{
			q(`rate(krb5_probe_udp_retransmits_total{`+psel+`}[$__rate_interval])`, "{{target}} UDP resends"),
			q(`rate(krb5_probe_tcp_fallbacks_total{`+psel+`}[$__rate_interval])`, "{{target}} TCP fallbacks"),
		}))

	b.WithRow(dashboard.NewRowBuilder("KDC proxy"))
	b.WithPanel(graph("Login p95 through a KDC proxy and direct", "Probe logins by the module's transport: https goes through a KDC proxy ([MS-KKDCP]: TLS, the proxy's own work and its hop to the KDC), udp and tcp straight to the KDC. The gap is what the proxy costs each login.", "s", 12, 8,
		[]query{q(`histogram_quantile(0.95, sum by (transport, le) (rate(krb5_probe_duration_seconds_bucket{`+psel+`, exchange="as"}[$__rate_interval])))`, "{{transport}} p95")},
		limit{0.020, "orange"}, limit{0.050, "red"}))
	b.WithPanel(graph("KDC proxy failures by class", "Failed exchanges per second of the targets of transport https, by result: tls_unknown_authority, tls_name_mismatch, tls, http_status, proxy_timeout, connection_refused, or the KDC's own error through the proxy. KDCProxyFailing fires when these fail while a direct probe of the realm logs in.", "ops", 12, 8,
		[]query{q(`sum by (target, exchange, result) (rate(krb5_probe_total{`+psel+`, result!="success"}[$__rate_interval]) * on (job, instance, target) group_left () krb5_probe_target_info{`+psel+`, transport="https"})`, "{{target}} {{exchange}} {{result}}")}).Links(runbook("KDCProxyFailing")))

	b.WithRow(dashboard.NewRowBuilder("kadmind: kpasswd and the admin RPC"))
	b.WithPanel(upDown("kadmind probes", "Whether kadmind answered the last probe: kpasswd (the password-change service verified the AP-REQ and refused the empty request) and kadmin_rpc (the admin RPC answered the NULL call). kpasswd_as is the login for kadmin/changepw at the KDC before it. KadmindUnavailable fires after 2 minutes.", 8, 8,
		[]query{q(`krb5_probe_success{`+psel+`, exchange=~"kpasswd_as|kpasswd|kadmin_rpc"}`, "{{target}} {{exchange}}")}).Links(runbook("KadmindUnavailable")))
	b.WithPanel(graph("kadmind round trip p95", "p95 of the kpasswd and kadmin_rpc round trips with kadmind (successful ones).", "s", 8, 8,
		[]query{q(`histogram_quantile(0.95, sum by (target, exchange, le) (rate(krb5_probe_duration_seconds_bucket{`+psel+`, exchange=~"kpasswd|kadmin_rpc"}[$__rate_interval])))`, "{{target}} {{exchange}}")}))
	b.WithPanel(graph("kadmind failures by class", "Failed kpasswd and kadmin_rpc probes per second by result: connection_refused (kadmind stopped), timeout (hung), KPASSWD_* (kadmind's kpasswd refusal), RPC_*, network, malformed_reply (not kadmind on the port).", "ops", 8, 8,
		[]query{q(`sum by (target, exchange, result) (rate(krb5_probe_total{`+psel+`, exchange=~"kpasswd|kadmin_rpc", result!="success"}[$__rate_interval]))`, "{{target}} {{exchange}} {{result}}")}))
	b.WithRow(dashboard.NewRowBuilder("Cross-realm trusts"))
	b.WithPanel(graph("Cross-realm hops p95", "Targets whose service is of another realm: the cross-realm TGT from the target KDC (referral) and the service ticket from the service realm's KDC with it (remote_tgs), p95 per target.", "s", 12, 8,
		[]query{q(`histogram_quantile(0.95, sum by (target, exchange, le) (rate(krb5_probe_duration_seconds_bucket{`+psel+`, exchange=~"referral|remote_tgs"}[$__rate_interval])))`, "{{target}} {{exchange}} p95")},
		limit{0.010, "orange"}, limit{0.025, "red"}))
	b.WithPanel(graph("Cross-realm failures by hop and class", "Failed cross-realm exchanges per second: no_trust_path (the target KDC has no krbtgt/B@A), trust_key_mismatch (the two realms' cross-realm keys differ, as after a rekey on one side), KRB_AP_ERR_SKEW (the service realm's KDC clock), connection_refused or timeout (its KDCs unreachable), no_tgt (the step before failed).", "ops", 12, 8,
		[]query{q(`sum by (target, exchange, result) (rate(krb5_probe_total{`+psel+`, exchange=~"referral|remote_tgs", result!="success"}[$__rate_interval]))`, "{{target}} {{exchange}} {{result}}")}).Links(runbook("Krb5CrossRealmTrustBroken")))
	return b
}

// transportQueries are p95 and p99 of one exchange per target and transport.
func transportQueries(exchange string) []query {
	var qs []query
	for _, p := range []string{"0.95", "0.99"} {
		qs = append(qs, q(`histogram_quantile(`+p+`, sum by (target, transport, le) (rate(krb5_probe_duration_seconds_bucket{`+psel+`, exchange="`+exchange+`"}[$__rate_interval])))`,
			"{{target}} {{transport}} p"+p[2:]))
	}
	return qs
}
