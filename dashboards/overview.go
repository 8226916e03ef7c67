package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
)

// Overview is the KDC overview: one row per KDC (the exporter next to it),
// with the seed's targets drawn on the panels that have one.
func Overview() *dashboard.DashboardBuilder {
	b := newDashboard("Kerberos KDC overview", "krb5-kdc-overview",
		"MIT Kerberos KDCs watched by krb5-exporter: availability, request rates and outcomes from the KDC log, probe latency against the targets, CPU, memory and socket pressure. One row per KDC.")
	variables(b, true, "krb5_exporter_build_info", "The krb5-exporter next to each KDC.")

	b.WithRow(dashboard.NewRowBuilder("KDC $instance").Repeat("instance"))
	b.WithPanel(upDown("krb5kdc", "Whether a krb5kdc process runs on the host (krb5_process_up).", 3, 4,
		[]query{q(`krb5_process_up{`+sel+`, program="krb5kdc"}`, "krb5kdc")}).Links(runbook("KDCDown")))
	b.WithPanel(upDown("Probe login", "Whether the exporter's last synthetic login through each target succeeded (krb5_probe_success).", 3, 4,
		[]query{q(`min by (target) (krb5_probe_success{`+sel+`, exchange="as"})`, "{{target}}")}).Links(runbook("KDCProbeFailing", "KDCRealmUnavailable")))
	b.WithPanel(single("Workers", "Worker processes of krb5kdc -w N (0: a single process), against the number it was started with.", "suffix: workers", 3, 4,
		[]query{q(`krb5_kdc_workers{`+sel+`}`, "running"), q(`krb5_kdc_workers_configured{`+sel+`}`, "configured")}).Links(runbook("KDCWorkerLost")))
	b.WithPanel(single("Uptime", "Time since the oldest krb5kdc process started.", "s", 3, 4,
		[]query{q(`time() - krb5_process_start_time_seconds{`+sel+`, program="krb5kdc"}`, "krb5kdc")}).Links(runbook("KDCRestarted")))
	b.WithPanel(info("Settings", "Performance-relevant settings of each realm from kdc.conf: database module, last-success and lockout writes, SPAKE groups.", 9, 4,
		`krb5_kdcconf_info{`+sel+`}`, "", ""))
	b.WithPanel(serviceTracing())

	b.WithPanel(graph("Logins by outcome", "AS requests the KDC answered, by status, from its log (probe principals excluded). ISSUE is a login; NEEDED_PREAUTH and MORE_PREAUTH_DATA_REQUIRED are protocol steps of every login.", "reqps", 12, 8,
		[]query{q(`sum by (status) (rate(krb5_kdc_requests_total{`+sel+`, request="as"}[$__rate_interval]))`, "{{status}}")}).Links(runbook("KDCClientErrorsHigh")))
	b.WithPanel(graph("Service tickets by outcome", "TGS requests the KDC answered, by status, from its log (probe principals excluded).", "reqps", 12, 8,
		[]query{q(`sum by (status) (rate(krb5_kdc_requests_total{`+sel+`, request="tgs"}[$__rate_interval]))`, "{{status}}")}).Links(runbook("KDCClientErrorsHigh")))

	b.WithPanel(graph("Login latency (probe)", "Duration of the exporter's synthetic logins (both round trips) through this KDC. Targets: p95 20 ms, p99 50 ms (dashed).", "s", 12, 8,
		latencyQueries("as"), limit{0.020, "orange"}, limit{0.050, "red"}).Links(runbook("KDCLoginLatencyP95High", "KDCLoginLatencyP99High")))
	b.WithPanel(graph("Service ticket latency (probe)", "Duration of the exporter's synthetic service ticket requests through this KDC. Targets: p95 10 ms, p99 25 ms (dashed).", "s", 12, 8,
		latencyQueries("tgs"), limit{0.010, "orange"}, limit{0.025, "red"}).Links(runbook("KDCTicketLatencyP95High", "KDCTicketLatencyP99High")))
	b.WithPanel(graph("Why slow: waiting for a CPU or the disk", "Share of the time krb5kdc (all its processes) and each worker spent runnable but waiting for a CPU (schedstat run delay: CPU contention, steal) or waiting for its disk (last_success and lockout writes; needs task delay accounting, krb5_exporter_task_delayacct_enabled, else absent). A worker that waits about as long as it runs makes every request wait with it: set next to the latency above.", "percentunit", 24, 7,
		[]query{
			q(`rate(krb5_process_cpu_wait_seconds_total{`+sel+`, program="krb5kdc"}[$__rate_interval])`, "krb5kdc CPU wait"),
			q(`sum by (worker) (rate(krb5_kdc_worker_cpu_wait_seconds_total{`+sel+`}[$__rate_interval]))`, "worker {{worker}} CPU wait"),
			q(`rate(krb5_process_disk_wait_seconds_total{`+sel+`, program="krb5kdc"}[$__rate_interval])`, "krb5kdc disk wait"),
			q(`sum by (worker) (rate(krb5_kdc_worker_disk_wait_seconds_total{`+sel+`}[$__rate_interval]))`, "worker {{worker}} disk wait"),
		}).Links(runbook("KDCServiceTimeCreeping")))
	servicePanels(b)

	b.WithPanel(graph("Availability (error budget)", "Share of the valid requests the KDC failed: no answer (kernel drops, probes timed out or refused) or a server-side error status, over 5 minutes and 1 hour. Client errors (wrong passwords, unknown names) are not failures of the KDC (alerts/runbook.md, What the SLI counts). Target: 0.1 % (dashed).", "percentunit", 12, 8,
		[]query{
			q(`instance:krb5_kdc_availability_errors:ratio_rate5m{`+sel+`}`, "failed 5m"),
			q(`instance:krb5_kdc_availability_errors:ratio_rate1h{`+sel+`}`, "failed 1h"),
		}, limit{0.001, "red"}).Links(runbook("KDCErrorBudgetBurnFast", "KDCErrorBudgetBurnSlow")))
	b.WithPanel(graph("CPU (share of one core)", "CPU of all krb5kdc processes and of each worker, as a share of one core. A single process can never use more than one; the headroom target is 50 % (dashed).", "percentunit", 12, 8,
		[]query{
			q(`instance:krb5_kdc_cpu_cores:rate5m{`+sel+`}`, "krb5kdc"),
			q(`instance_worker:krb5_kdc_worker_cpu_cores:rate5m{`+sel+`}`, "worker {{worker}}"),
		}, limit{0.5, "red"}).Links(runbook("KDCCPUHigh", "KDCWorkerSaturated")))
	b.WithPanel(graph("Capacity: estimate, bench, load", "Requests per second the KDC could answer, estimated live from its time per request (krb5_kdc_capacity_requests_per_second: as, tgs, mix), the ceilings the latest bench run on this host measured (with --capacity.bench-results), and the requests it answers now. The estimate is conservative on a host the KDC has to itself and too high where others take its CPUs (docs/bench.md).", "reqps", 12, 8,
		[]query{
			q(`max by (request) (krb5_kdc_capacity_requests_per_second{`+sel+`})`, "estimate {{request}}"),
			q(`max by (request) (krb5_kdc_bench_capacity_requests_per_second{`+sel+`})`, "bench {{request}}"),
			q(`instance:krb5_kdc_requests:rate5m{`+sel+`}`, "load (as + tgs)"),
		}).Links(runbook("KDCHeadroomLow", "KDCCapacityFalling")))
	b.WithPanel(graph("Headroom: utilization", "The KDC's requests over its estimated capacity at the current mix, and the realm's load over the capacity left with its largest KDC down (N-1). The seed's rule: at most 30-50 % at the peak (50 % dashed); N-1 above 100 % means the realm could not carry the load with one KDC down. Estimate / bench near 1: the live estimate agrees with the measurement.", "percentunit", 12, 8,
		[]query{
			q(`instance:krb5_kdc_capacity_utilization:ratio5m{`+sel+`}`, "utilization"),
			q(`realm:krb5_kdc_capacity_n_minus_1_utilization:ratio5m and on (job, realm) instance:krb5_kdc_requests:rate5m{`+sel+`}`, "realm {{realm}} N-1"),
			q(`instance_request:krb5_kdc_capacity_to_bench:ratio{`+sel+`}`, "estimate / bench {{request}}"),
		}, limit{0.5, "red"}).Links(runbook("KDCHeadroomLow", "KDCRealmNoFailoverHeadroom")))

	b.WithPanel(graph("Memory", "Resident memory of all krb5kdc processes. A healthy KDC holds 8-20 MiB plus about 6 MiB per worker; the limit is 256 MiB (dashed).", "bytes", 8, 8,
		[]query{q(`krb5_process_resident_memory_bytes{`+sel+`, program="krb5kdc"}`, "krb5kdc")}, limit{256 * 1024 * 1024, "red"}).Links(runbook("KDCMemoryHigh", "KDCMemoryGrowing")))
	b.WithPanel(graph("UDP drops and TCP overflows", "Datagrams the kernel dropped on the KDC's UDP sockets (clients resend after 1 s) and the host's TCP accept-queue overflows (clients stall 1-3 s).", "pps", 8, 8,
		[]query{
			q(`sum by (address) (rate(krb5_kdc_udp_drops_total{`+sel+`}[$__rate_interval]))`, "UDP drops {{address}}"),
			q(`rate(krb5_host_tcp_listen_overflows_total{`+sel+`}[$__rate_interval])`, "TCP listen overflows"),
		}).Links(runbook("KDCUDPDrops", "KDCTCPListenOverflows")))
	b.WithPanel(graph("UDP receive queue", "Bytes waiting in each of the KDC's UDP sockets for the KDC to read them: a growing queue is a KDC that cannot keep up (its drops are on the left).", "bytes", 8, 8,
		[]query{q(`krb5_kdc_udp_receive_queue_bytes{`+sel+`}`, "{{address}}")}).Links(runbook("KDCUDPDrops")))
	b.WithPanel(graph("TCP accept queue", "Connections waiting in the KDC's TCP accept queue, against its limit (the listen backlog, 5 in MIT's KDC): at the limit new connections overflow.", "suffix: connections", 8, 8,
		[]query{
			q(`krb5_kdc_tcp_listen_queue_length{`+sel+`}`, "queued {{address}}"),
			q(`krb5_kdc_tcp_listen_queue_limit{`+sel+`}`, "limit {{address}}"),
		}).Links(runbook("KDCTCPListenOverflows")))
	b.WithPanel(graph("Client retransmits", "Requests clients sent again while the KDC still had the first copy: resent (answered from the lookaside cache) or dropped (still in progress). Clients retry when answers come late.", "reqps", 8, 8,
		[]query{q(`sum by (action) (rate(krb5_kdc_retransmits_total{`+sel+`}[$__rate_interval]))`, "{{action}}")}).Links(runbook("KDCClientRetransmitsRising")))
	b.WithPanel(graph("Failed pre-authentication", "Logins refused for a wrong password or key (PREAUTH_FAILED), the part no later success of the same client recovered from, and lockouts.", "reqps", 8, 8,
		[]query{
			q(`sum by (status) (rate(krb5_kdc_requests_total{`+sel+`, request="as", status=~"PREAUTH_FAILED|LOCKED_OUT|CLIENT LOCKED OUT"}[$__rate_interval]))`, "{{status}}"),
			q(`instance:krb5_kdc_preauth_failures_unrecovered:rate5m{`+sel+`}`, "unrecovered"),
		}).Links(runbook("KDCWrongPasswordsRising", "KDCClientsLockedOut")))
	b.WithPanel(graph("Weak encryption types", "Requests offering only weak types (DES, 3DES, RC4), offering them among others, or answered with one (issued).", "reqps", 8, 8,
		[]query{q(`sum by (request, kind) (rate(krb5_kdc_weak_etype_requests_total{`+sel+`}[$__rate_interval]))`, "{{request}} {{kind}}")}).Links(runbook("KDCWeakEnctypeIssued")))
	b.WithPanel(graph("Requests per worker", "Requests each krb5kdc -w N worker answered (from the pid in the KDC log's lines; a single-process KDC is worker 0). The workers share the KDC's sockets: one that answers nothing while the others serve is stuck (KDCWorkerIdle).", "reqps", 12, 8,
		[]query{q(`sum by (worker) (rate(krb5_kdc_worker_requests_total{`+sel+`, worker!~"unknown|other"}[$__rate_interval]))`, "worker {{worker}}")}).Links(runbook("KDCWorkerIdle")))
	b.WithPanel(graph("Worker share of requests", "Each worker's share of the KDC's requests over 5 minutes (1/N each when balanced); next to its CPU above, a worker with neither is blocked.", "percentunit", 12, 8,
		[]query{q(`instance_worker:krb5_kdc_worker_requests:share5m{`+sel+`}`, "worker {{worker}}")}))
	attackPanels(b)
	talkersPanels(b)

	replication(b)
	return b
}

// kdcServiceOff is what the service-time panels show without their
// series: the collector is opt-in.
const kdcServiceOff = "enable --collector.kdcservice"

// serviceTracing says whether the kdcservice collector traces krb5kdc.
func serviceTracing() *stat.PanelBuilder {
	p := binary("Service tracing", "Whether the opt-in kdcservice collector's eBPF programs are attached to krb5kdc (krb5_kdc_service_tracing_up): the service-time panels below need it. Not attached: krb5_kdc_service_tracing_errors_total says why (KDCServiceTracingDown).", 3, 4,
		[]query{q(`krb5_kdc_service_tracing_up{`+sel+`}`, "tracing")}, "not attached", "attached")
	p.NoValue(kdcServiceOff)
	p.Links(runbook("KDCServiceTracingDown"))
	return p
}

// servicePanels show the KDC's own time per request from the opt-in
// kdcservice collector (alerts/kdcservice.rules.yml): how long, where the
// time went, and whether requests wait for the KDC instead. Without the
// collector they say how to turn it on.
func servicePanels(b *dashboard.DashboardBuilder) {
	var quantiles []query
	for _, p := range []string{"0.50", "0.95", "0.99"} {
		quantiles = append(quantiles, q(`histogram_quantile(`+p+`, sum by (request, le) (rate(krb5_kdc_request_service_seconds_bucket{`+sel+`}[$__rate_interval])))`,
			"{{request}} p"+p[2:]))
	}
	b.WithPanel(graph("KDC service time", "The KDC's own time per request, by request type: from its receive of the request to its send of the reply, measured in the kernel (eBPF) for the unmodified krb5kdc. Against the probes' latency above, the rest is the network and the client. KDCServiceTimeCreeping fires when the last hour's p95 is twice the 6 hours' before at the same load.", "s", 12, 8,
		quantiles).NoValue(kdcServiceOff).Links(runbook("KDCServiceTimeCreeping")))
	b.WithPanel(graph("Service time split", "Where the KDC's time per request went, as a share of it: on a CPU (its own work), waiting for a CPU (runqueue: CPU contention, other work on its cores) blocked (asleep: the disk, a database lock, the last_success writes of logins) or stolen (on a virtual CPU the hypervisor gave to another guest). Blocked growing: disk or database; runqueue growing: CPU contention; stolen growing: an overcommitted VM host (alerts/runbook.md, KDCServiceTimeCreeping). Per request type: instance_request_state:krb5_kdc_request_service_split:ratio_rate5m.", "percentunit", 12, 8,
		[]query{q(`sum by (state) (rate(krb5_kdc_request_service_split_seconds_total{`+sel+`}[$__rate_interval])) / ignoring (state) group_left () sum (rate(krb5_kdc_request_service_split_seconds_total{`+sel+`}[$__rate_interval]))`, "{{state}}")}).
		Max(1).
		FillOpacity(60).
		Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)).
		NoValue(kdcServiceOff).Links(runbook("KDCServiceTimeCreeping")))
	b.WithPanel(graph("Queue vs service time", "Mean time a request waited in the KDC's socket before the KDC read it (queue), against the mean time the KDC then took to answer it (service), by transport. Queue above service: requests wait for a busy or stopped process, not for a slow KDC (KDCRequestsQueueing). Queue time is absent where the collector does not measure it.", "s", 12, 8,
		[]query{
			q(`sum by (transport) (rate(krb5_kdc_request_queue_seconds_sum{`+sel+`}[$__rate_interval])) / sum by (transport) (rate(krb5_kdc_request_queue_seconds_count{`+sel+`}[$__rate_interval]))`, "queue {{transport}}"),
			q(`sum by (transport) (rate(krb5_kdc_request_service_seconds_sum{`+sel+`}[$__rate_interval])) / sum by (transport) (rate(krb5_kdc_request_service_seconds_count{`+sel+`}[$__rate_interval]))`, "service {{transport}}"),
		}).NoValue(kdcServiceOff).Links(runbook("KDCRequestsQueueing")))
	b.WithPanel(graph("Service time per request, by worker", "Mean service time per request of each krb5kdc process (a single-process KDC is worker 0): one worker slower than the others waits on something the others do not.", "s", 12, 8,
		[]query{q(`sum by (worker) (rate(krb5_kdc_worker_service_seconds_total{`+sel+`}[$__rate_interval])) / sum by (worker) (rate(krb5_kdc_worker_service_requests_total{`+sel+`}[$__rate_interval]))`, "worker {{worker}}")}).
		NoValue(kdcServiceOff))
}

// attackPanels show the attack signals of the KDC log (kdclog/attack):
// detections per signal, the alerts of alerts/attack.rules.yml, and the
// events behind them. The offenders themselves are names, not rates:
// krb5_kdc_attack_offender_score and top's attack view list them.
func attackPanels(b *dashboard.DashboardBuilder) {
	b.WithPanel(graph("Attack signals", "Offenders (addresses or principals) that reached a signal's threshold in the last 15 minutes: password spraying, brute force, user enumeration, Kerberoasting, AS-REP roasting (each fires its alert). Who: krb5_kdc_attack_offender_score{signal=...}, or the attack lines of krb5-exporter top.", "suffix: offenders", 12, 8,
		[]query{q(`sum by (signal) (increase(krb5_kdc_attack_detections_total{`+sel+`}[15m]))`, "{{signal}}")}).Links(runbook("KDCPasswordSpraying", "KDCBruteForce", "KDCUserEnumeration", "KDCKerberoasting", "KDCASREPRoasting")))
	b.WithPanel(graph("Attack events", "The log lines behind the attack signals: wrong passwords (failures no success of the same client recovered: SPAKE group fallbacks left out), lockouts, unknown principals, RC4 service tickets, tickets without pre-authentication.", "reqps", 12, 8,
		[]query{q(`sum by (event) (rate(krb5_kdc_attack_events_total{`+sel+`}[$__rate_interval]))`, "{{event}}")}))
}

// talkersPanels show who is loading the KDC (kdclog/talkers): the top
// talkers of the selected KDCs together (one exporter per KDC, their
// windows aligned to the clock, so the sum by name is the realm's), as
// requests a second over the last complete window, and the names failing
// most. KDCClientStorm (alerts/talkers.rules.yml) fires on one KDC's.
func talkersPanels(b *dashboard.DashboardBuilder) {
	b.WithPanel(info("Who is loading the KDC", "The 10 client addresses, principals and services with the most requests a second over the last complete top-talkers window (1 minute by default), summed over the selected KDCs: a job logging in per task, a health check, a retry loop shows here first (KDCClientStorm). A lower bound, exact for the names of a window with fewer than 4k of them (docs/metrics.md, Top talkers). The same in the terminal: the talkers line of krb5-exporter top.", 12, 8,
		`topk(10, sum by (by, name) (krb5_kdc_top_requests{`+sel+`}) / scalar(max(krb5_kdc_top_window_seconds{`+sel+`})))`, "requests/s", "reqps").Links(runbook("KDCClientStorm")))
	b.WithPanel(info("Failing most", "The 10 client addresses, principals and services with the most failed requests a second over the last complete window, summed over the selected KDCs: one name failing steadily is a stale keytab or a drifted clock; many names from one address, an attack (the attack signals above).", 12, 8,
		`topk(10, sum by (by, name) (krb5_kdc_top_failures{`+sel+`}) / scalar(max(krb5_kdc_top_window_seconds{`+sel+`})))`, "failures/s", "reqps"))
}

// replication is a row across the selected KDCs (not repeated: replication
// compares hosts): each replica's lag behind its primary from the update
// logs (the recording rules of alerts/replication.rules.yml), full
// propagations, and kpropd's own account.
func replication(b *dashboard.DashboardBuilder) {
	b.WithRow(dashboard.NewRowBuilder("Replication"))
	b.WithPanel(graph("Replica lag (time)", "How much older each replica's newest update is than its primary's (krb5:iprop_replica_lag_seconds; the primary is the host whose kadmind runs). A healthy replica stays within its poll interval (iprop_replica_poll, 2 min by default); Krb5ReplicaBehind fires beyond 10 min (dashed).", "s", 8, 8,
		[]query{q(`krb5:iprop_replica_lag_seconds{`+sel+`}`, "{{instance}} {{realm}}")}, limit{600, "red"}).Links(runbook("Krb5ReplicaBehind")))
	b.WithPanel(graph("Replica lag (updates)", "Updates the primary has and each replica lacks (krb5:iprop_replica_lag_updates). More than the primary's log holds (last - first serial) and the replica needs a full resync.", "suffix: updates", 8, 8,
		[]query{q(`krb5:iprop_replica_lag_updates{`+sel+`}`, "{{instance}} {{realm}}")}))
	b.WithPanel(graph("Update log serial", "Serial of the last update in each host's iprop log: the replicas' follow the primary's.", "suffix: (serial)", 8, 8,
		[]query{q(`krb5_iprop_ulog_last_serial{`+sel+`}`, "{{instance}} {{realm}}")}).Links(runbook("Krb5IpropLogUnusable", "Krb5IpropLogNotStable")))
	b.WithPanel(graph("Since the last full propagation", "On a primary: time since kprop last delivered a full dump to each replica (its .last_prop marker) and since the last dump (.dump_ok). Incremental propagation needs none while replicas keep up; a full resync writes both.", "s", 8, 8,
		[]query{
			q(`time() - krb5_kprop_last_success_time_seconds{`+sel+`}`, "{{instance}} to {{replica}}"),
			q(`time() - krb5_kprop_dump_time_seconds{`+sel+`}`, "{{instance}} dump"),
		}))
	b.WithPanel(graph("kpropd updates and resyncs", "On a replica (its kpropd log as a log source): incremental updates applied per second, and full resyncs asked for and granted.", "ops", 8, 8,
		[]query{
			q(`rate(krb5_kpropd_updates_total{`+sel+`}[$__rate_interval])`, "{{instance}} updates"),
			q(`sum by (instance, event) (rate(krb5_kpropd_events_total{`+sel+`, event=~"full_resync_needed|full_resync_granted"}[$__rate_interval]))`, "{{instance}} {{event}}"),
		}))
	b.WithPanel(graph("kpropd errors", "kpropd error lines per second by kind. connect_failed and rpc_failed heal by retrying; permission_denied, replay_failed, load_failed, unauthorized and gave_up do not (Krb5KpropdFailing).", "ops", 8, 8,
		[]query{q(`sum by (instance, error) (rate(krb5_kpropd_errors_total{`+sel+`}[$__rate_interval]))`, "{{instance}} {{error}}")}).Links(runbook("Krb5KpropdFailing")))
}

// latencyQueries are p50, p95 and p99 of one exchange's probes, per target.
func latencyQueries(exchange string) []query {
	var qs []query
	for _, p := range []string{"0.50", "0.95", "0.99"} {
		qs = append(qs, q(`histogram_quantile(`+p+`, sum by (target, le) (rate(krb5_probe_duration_seconds_bucket{`+sel+`, exchange="`+exchange+`"}[$__rate_interval])))`,
			"{{target}} p"+p[2:]))
	}
	return qs
}
