#!/usr/bin/env bash
# Brings up a throwaway MIT realm on loopback (krb5kdc -w 2; 100 users and
# 20 services, no fillers: the default size's 11,000 principals took a
# minute to create on a busy machine before anything showed) and, next to
# it, a light steady load of logins and service tickets (krb5-exporter
# realm load), a real Prometheus scraping the exporter with every rule file of alerts/
# loaded (its data in the demo directory), and krb5-exporter itself in the
# foreground. Ctrl-C stops them all and removes the realm and the data.
#
# DEMO_FAULT=NAME injects one fault DEMO_FAULT_AFTER seconds (default 30)
# after the start, or at once on `kill -USR1 $(cat .demo/fault.pid)`, so
# that its alert goes pending, then firing (README's "The demo" has the
# times seen). Client errors do not spend the error budget: the attack
# faults come from an address of their own on loopback, as an attacker's
# host, and fire the attack signals.
#   kdc-stopped      krb5kdc killed: KDCDown and KDCRealmUnavailable (1m),
#                    KDCProbeFailing and KDCErrorBudgetBurnFast (2m: the
#                    probes refused, a stopped KDC logs nothing)
#   wrong-passwords  a wrong password a second for user0001 from 127.0.0.2:
#                    KDCBruteForce (at once), KDCWrongPasswordsRising (10m)
#   spray            a wrong password a second from 127.0.0.3, each for
#                    another of the first 100 users: KDCPasswordSpraying (at once),
#                    KDCDistributedPasswordSpraying (2m), KDCWrongPasswordsRising (10m)
#   unknown-user     a login a second of principals that do not exist, 50
#                    names in turn, from 127.0.0.4: KDCUserEnumeration (at once),
#                    KDCDistributedUserEnumeration (2m)
#   keyless-service  service tickets for a service created without keys
#                    (the realm's fault, FINDING_SERVER_KEY):
#                    KDCErrorBudgetBurnFast (2m)
#   udp-drops        krb5kdc paused while 3,000 datagrams arrive, so its
#                    socket's buffer overflows, once a minute for 10 minutes:
#                    KDCErrorBudgetBurnFast (2m), KDCUDPDrops (5m)
#   storm            a misconfigured job: 30 logins a second as user0001
#                    from 127.0.0.5: KDCClientStorm (5m after the first
#                    complete minute); the landing page's top talkers name
#                    the address and the principal
# DEMO_REPLICA=1 adds a replica (its own KDC and database, kpropd pulling
# by iprop; needs krb5-kpropd) with a second exporter on the next port.
# For tests: DEMO_REALM_ARGS (realm up's size flags instead of the
# above), DEMO_ALERTS_DIR (rule
# files), DEMO_INTERVAL (scrape, evaluation and probe interval, 5s),
# PROMETHEUS_LISTEN (127.0.0.1:10090).
set -euo pipefail
bin=$(realpath "${1:-./krb5-exporter}")
here=$(dirname "$(realpath "$0")")
# The parent's path resolved, the directory's own name not: it is removed
# at the start and on the way out, so a planted link must not send that
# rm -rf elsewhere.
dir=${DEMO_DIR:-.demo}
dir="$(realpath -m "$(dirname "$dir")")/$(basename "$dir")"
listen=${LISTEN:-127.0.0.1:10088}
plisten=${PROMETHEUS_LISTEN:-127.0.0.1:10090}
alerts=$(realpath "${DEMO_ALERTS_DIR:-$here/../alerts}")
interval=${DEMO_INTERVAL:-5s}
fault=${DEMO_FAULT:-}
after=${DEMO_FAULT_AFTER:-30}
# What each fault fires, for the hint printed below.
case "$fault" in
'') ;;
kdc-stopped) expect="KDCDown in about a minute, then KDCProbeFailing, KDCRealmUnavailable, KDCErrorBudgetBurnFast" ;;
wrong-passwords) expect="KDCBruteForce within a minute, KDCWrongPasswordsRising after 10 minutes" ;;
spray) expect="KDCPasswordSpraying within a minute, KDCDistributedPasswordSpraying after 2, KDCWrongPasswordsRising after 10 minutes" ;;
unknown-user) expect="KDCUserEnumeration within a minute, KDCDistributedUserEnumeration after 2" ;;
keyless-service) expect="KDCErrorBudgetBurnFast in about 2 minutes" ;;
udp-drops) expect="KDCErrorBudgetBurnFast in about 2 minutes, KDCUDPDrops in about 6" ;;
storm) expect="KDCClientStorm in 6 to 7 minutes; the landing page's top talkers at the first minute's end" ;;
*)
	echo "DEMO_FAULT=$fault: want kdc-stopped, wrong-passwords, spray, unknown-user, keyless-service, udp-drops or storm" >&2
	exit 2
	;;
esac
for a in "$listen" "$plisten"; do
	case "$a" in 127.* | localhost:* | "[::1]":*) ;; *)
		echo "$a: the demo listens on loopback only" >&2
		exit 2
		;;
	esac
done
if [ -L "$dir" ]; then
	echo "$dir is a symbolic link: the demo removes its directory, so it refuses one (remove the link)" >&2
	exit 2
elif [ -e "$dir" ] && { [ ! -d "$dir" ] || [ ! -O "$dir" ]; }; then
	echo "$dir is not a directory of $(id -un): the demo removes its directory, so it refuses another's" >&2
	exit 2
fi
prom=$(command -v prometheus) || {
	echo "prometheus not found: make deps installs Debian's package" >&2
	exit 1
}
shopt -s nullglob
rules=("$alerts"/*.rules.yml)
shopt -u nullglob
if [ ${#rules[@]} -eq 0 ]; then
	echo "no rule files in $alerts" >&2
	exit 1
fi

# A realm left over from an interrupted run is stopped and removed first.
if [ -f "$dir/replica/realm.json" ]; then "$bin" realm down --dir "$dir/replica" >/dev/null || true; fi
if [ -f "$dir/realm/realm.json" ]; then "$bin" realm down --dir "$dir/realm" >/dev/null || true; fi
rm -rf "$dir"
mkdir -p "$(dirname "$dir")"
mkdir -m 0700 "$dir"

# Everything started in the background is stopped on the way out, by pid.
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	# A KDC paused by the udp-drops fault would not see realm down's signal.
	if [ -f "$dir/realm/krb5kdc.pid" ]; then
		kdc=$(cat "$dir/realm/krb5kdc.pid")
		# shellcheck disable=SC2046
		kill -CONT "$kdc" $(cat /proc/"$kdc"/task/*/children 2>/dev/null) 2>/dev/null || true
	fi
	if [ -f "$dir/replica/realm.json" ]; then "$bin" realm down --dir "$dir/replica" >/dev/null || true; fi
	if [ -f "$dir/realm/realm.json" ]; then "$bin" realm down --dir "$dir/realm" || true; fi
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# shellcheck disable=SC2086 # DEMO_REALM_ARGS is a list of flags
"$bin" realm up --dir "$dir/realm" --exporter-config "$dir/krb5-exporter.yml" --workers 2 \
	${DEMO_REALM_ARGS:---users 100 --services 20 --fillers=-1}
r="$dir/realm"
sed -i "s/interval: 15s/interval: $interval/" "$dir/krb5-exporter.yml"
if [ "${DEMO_REPLICA:-}" = 1 ]; then
	"$bin" realm up --dir "$dir/replica" --replica-of "$dir/realm" --exporter-config "$dir/replica.yml"
	rep="$dir/replica"
	rlisten="${listen%:*}:$((${listen##*:} + 1))"
	"$bin" --web.listen-address="$rlisten" --config.file="$dir/replica.yml" \
		--collector.process.krb5kdc-pidfile="$rep/krb5kdc.pid" --collector.process.kadmind-pidfile="$rep/kadmind.pid" \
		--collector.process.kpropd-pidfile="$rep/kpropd.pid" \
		--collector.kdcconf.path="$rep/kdc.conf" --collector.kdcconf.krb5-config="$rep/krb5.conf" 2>"$dir/replica-exporter.log" &
	pids+=($!)
	cat <<MSG

The replica's exporter is on http://$rlisten/ (log: $dir/replica-exporter.log):
  serials:  curl -s http://$listen/metrics http://$rlisten/metrics | grep ^krb5_iprop_ulog_last_serial
  change:   eval "\$("$bin" realm env --dir "$dir/realm")"; kadmin.local -q "addprinc -randkey demo1"
  stall:    kill \$(cat $rep/kpropd.pid)
MSG
fi

# Prometheus: every rule file of alerts/ by glob, so new ones load too.
targets="'$listen'"
if [ -n "${rlisten:-}" ]; then targets="$targets, '$rlisten'"; fi
cat >"$dir/prometheus.yml" <<YML
global:
  scrape_interval: $interval
  evaluation_interval: $interval
rule_files:
  - '$alerts/*.rules.yml'
scrape_configs:
  - job_name: krb5
    static_configs:
      - targets: [$targets]
YML
"$prom" --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/prometheus" \
	--web.listen-address="$plisten" --storage.tsdb.retention.time=1d 2>"$dir/prometheus.log" &
pids+=($!)

# The users: a few logins a second for an hour at most.
"$bin" realm load --dir "$r" --duration 1h >"$dir/load.log" 2>&1 &
pids+=($!)

# The fault runs in a subshell whose one child at a time is ended with it.
inject() {
	child=
	trap '[ -z "$child" ] || kill "$child" 2>/dev/null; exit 0' TERM INT
	trap '[ -z "$child" ] || kill "$child" 2>/dev/null' USR1
	sleep "$after" &
	child=$!
	wait "$child" || true
	trap - USR1
	echo "DEMO_FAULT=$fault: injecting now ($(date -u +%T) UTC)"
	# The faults' loads: their one kind of request, a second each, for 20 minutes.
	base=(realm load --dir "$r" --duration 20m --tickets 0 --weak-enctype-every 0)
	case "$fault" in
	kdc-stopped) kill "$(cat "$r/krb5kdc.pid")" ;;
	wrong-passwords)
		"$bin" "${base[@]}" --source 127.0.0.2 --rate 1 --users 1 --wrong-password-every 1 \
			--unknown-user-every 0 >"$dir/fault.log" 2>&1 &
		;;
	spray)
		# Each user once in 100 s: 6 wrong passwords in the detector's 10
		# minutes, under the brute-force threshold (10).
		users=$(sed -n 's/^ *"users": \([0-9]*\),$/\1/p' "$r/realm.json" | head -1)
		"$bin" "${base[@]}" --source 127.0.0.3 --rate 1 --users "$((users < 100 ? users : 100))" \
			--wrong-password-every 1 --unknown-user-every 0 >"$dir/fault.log" 2>&1 &
		;;
	unknown-user)
		"$bin" "${base[@]}" --source 127.0.0.4 --rate 1 --unknown-user-every 1 --unknown-users 50 \
			--wrong-password-every 0 >"$dir/fault.log" 2>&1 &
		;;
	keyless-service)
		(
			eval "$("$bin" realm env --dir "$r")"
			kadmin.local -q "addprinc -nokey HTTP/demo-nokey" >"$dir/fault.log" 2>&1
		)
		"$bin" realm load --dir "$r" --duration 20m --rate 2 --tickets 2 --service HTTP/demo-nokey \
			--wrong-password-every 0 --unknown-user-every 0 --weak-enctype-every 0 >>"$dir/fault.log" 2>&1 &
		;;
	storm)
		# One principal from its own address, logging in again and
		# again as a job that calls kinit for every task does.
		"$bin" "${base[@]}" --source 127.0.0.5 --rate 30 --users 1 \
			--wrong-password-every 0 --unknown-user-every 0 >"$dir/fault.log" 2>&1 &
		;;
	udp-drops)
		# The supervisor and its workers, which share its sockets. A burst
		# a minute for 10 minutes: the drops' 5-minute rate must stay above
		# 0 for KDCUDPDrops' 5 minutes (one burst left it pending).
		kdc=$(cat "$r/krb5kdc.pid")
		# shellcheck disable=SC2207
		kdcs=("$kdc" $(cat /proc/"$kdc"/task/*/children))
		port=$(sed -n 's/.*kdc_listen = 127.0.0.1:\([0-9]*\).*/\1/p' "$r/kdc.conf" | head -1)
		for _ in $(seq 10); do
			kill -STOP "${kdcs[@]}"
			for _ in $(seq 3000); do printf 'demo' >/dev/udp/127.0.0.1/"$port" || true; done
			sleep 5 &
			child=$!
			wait "$child"
			kill -CONT "${kdcs[@]}"
			sleep 55 &
			child=$!
			wait "$child"
		done
		;;
	esac
	child=$!
	wait "$child" 2>/dev/null || true
}
if [ -n "$fault" ]; then
	inject &
	pids+=($!)
	echo $! >"$dir/fault.pid"
fi

url() { printf 'http://%s/graph?g0.expr=%s&g0.tab=0&g0.range_input=15m' "$plisten" "$1"; }
cat <<MSG

krb5-exporter is starting on http://$listen/ against the realm above, with
a light load of logins (log: $dir/load.log) and Prometheus (log: $dir/prometheus.log):
  landing page:   http://$listen/   (is the KDC OK? probes, logs, processes)
  alerts:         http://$plisten/alerts
  rules:          http://$plisten/rules
  requests/s:     $(url 'sum%20by%20(request,status)(instance_request_status:krb5_kdc_requests:rate5m)')
  failed ratio:   $(url 'instance_request:krb5_kdc_requests_failed:ratio_rate5m')
  probe p95:      $(url 'target_exchange:krb5_probe_duration_seconds:p95_30m')
  KDC CPU:        $(url 'instance:krb5_kdc_cpu_cores:rate5m')
  metrics:        curl -s http://$listen/metrics | grep ^krb5_
  reload:         curl -X POST http://$listen/-/reload   (config: $dir/krb5-exporter.yml)
MSG
if [ -n "$fault" ]; then
	echo "  fault:          DEMO_FAULT=$fault in ${after}s (now: kill -USR1 \$(cat $dir/fault.pid)); watch http://$plisten/alerts"
	echo "                  for $expect"
else
	echo "  a fault:        Ctrl-C, then DEMO_FAULT=kdc-stopped make demo (or wrong-passwords, spray, unknown-user, keyless-service, udp-drops, storm)"
fi
# As root the KDC's own time per request too (the eBPF collector needs
# CAP_BPF and CAP_PERFMON; without them it would only say it cannot trace).
kdcservice=()
if [ "$(id -u)" -eq 0 ]; then
	kdcservice=(--collector.kdcservice)
	echo "  KDC service:    $(url 'instance_request:krb5_kdc_request_service_seconds:p95_5m') (the KDC's own time per request, eBPF)"
fi
echo "Press Ctrl-C to stop everything and remove the realm."
echo
"$bin" --web.listen-address="$listen" --config.file="$dir/krb5-exporter.yml" "${kdcservice[@]}" \
	--collector.process.krb5kdc-pidfile="$r/krb5kdc.pid" --collector.process.kadmind-pidfile="$r/kadmind.pid" \
	--collector.process.kpropd-pidfile="$r/kpropd.pid" --collector.replication.dump-file="$r/replica_datatrans" \
	--collector.kdcconf.path="$r/kdc.conf" --collector.kdcconf.krb5-config="$r/krb5.conf" \
	--kdclog.position-file="$dir/positions.json" || true
