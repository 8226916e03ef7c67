#!/bin/bash
# soak.sh DIR SECONDS BIN [BIN...]: a memory soak of the daemon, several
# builds side by side on one load (docs/memory.md). Starts one harness realm
# (krb5kdc -w 2, kadmind) with the first BIN, serves it with each BIN on
# 127.0.0.1:$PORT, $PORT+1, ... (PORT default 31500), each with two probes a
# second and the KDC and kadmind logs followed; logs in about 5 times a
# second with kinit; renames the KDC log every 3 minutes (krb5kdc reopens it
# on SIGHUP). Every 10 s it writes each daemon's VmRSS, RssAnon, RssFile
# (/proc/PID/status), Go heap figures from its /metrics and its CPU ticks to
# DIR/samples.csv. Each BIN should be a copy of its own: builds sharing
# one file share its mapped pages. Everything stops after SECONDS.
# With OTHERS=1 the tools a site would otherwise run for the same jobs run
# beside them on the same realm and are sampled the same way (exporter
# "process-exporter", "mtail", "blackbox"): prometheus-process-exporter
# watching krb5kdc and kadmind, mtail counting the KDC log's requests by
# type and status, blackbox_exporter probing the KDC's TCP port twice a
# second (it has no Kerberos): Debian's prometheus-process-exporter, mtail
# and prometheus-blackbox-exporter.
set -u
dir=$1; secs=$2; shift 2
base=${PORT:-31500}
rm -rf "$dir"; mkdir -p "$dir"
"$1" realm up --dir "$dir/realm" --workers 2 --users 10 --services 2 --fillers=-1 \
	--exporter-config "$dir/base.yml" >"$dir/realm.out" || exit 1
trap '"$1" realm down --dir "$dir/realm" >/dev/null' EXIT
sed -e 's/interval: 15s/interval: 1s/' "$dir/base.yml" >"$dir/exporter.yml"
eval "$(grep ^export "$dir/realm.out")"
pids=(); ports=()
for b in "$@"; do
	port=$((base + ${#pids[@]}))
	"$b" serve --config.file "$dir/exporter.yml" --web.listen-address "127.0.0.1:$port" \
		--kdclog.position-file "$dir/positions${#pids[@]}.json" >"$dir/exporter${#pids[@]}.log" 2>&1 &
	pids+=($!); ports+=("$port")
done
names=(); for b in "$@"; do names+=("$(basename "$b")"); done
if [ "${OTHERS:-}" = 1 ]; then
	kdc=$(sed -n 's/.*address: \(127.0.0.1:[0-9]*\).*/\1/p' "$dir/exporter.yml" | head -1)
	printf 'process_names:\n  - comm: [krb5kdc, kadmind]\n' >"$dir/process.yml"
	port=$((base + ${#pids[@]}))
	prometheus-process-exporter -config.path "$dir/process.yml" -web.listen-address "127.0.0.1:$port" \
		-threads=true >"$dir/process-exporter.log" 2>&1 &
	pids+=($!); ports+=("$port"); names+=(process-exporter)
	mkdir -p "$dir/mtail"
	cat >"$dir/mtail/kdc.mtail" <<'MTAIL'
counter krb5_kdc_requests_total by request, status
/(?P<request>AS_REQ|TGS_REQ) .*: (?P<status>[A-Z_]+)(: |$)/ {
  krb5_kdc_requests_total[$request][$status]++
}
MTAIL
	port=$((base + ${#pids[@]}))
	mtail -progs "$dir/mtail" -logs "$dir/realm/krb5kdc.log" -address 127.0.0.1 -port "$port" \
		>"$dir/mtail.log" 2>&1 &
	pids+=($!); ports+=("$port"); names+=(mtail)
	printf 'modules:\n  tcp:\n    prober: tcp\n    timeout: 5s\n' >"$dir/blackbox.yml"
	port=$((base + ${#pids[@]}))
	prometheus-blackbox-exporter --config.file "$dir/blackbox.yml" --web.listen-address "127.0.0.1:$port" \
		>"$dir/blackbox.log" 2>&1 &
	pids+=($!); ports+=("$port"); names+=(blackbox)
	(end=$((SECONDS + secs)); while [ $SECONDS -lt $end ]; do
		curl -s --max-time 5 "http://127.0.0.1:$port/probe?module=tcp&target=$kdc" >/dev/null
		sleep 0.5
	done) &
	bbload=$!
fi
end=$((SECONDS + secs))
(while [ $SECONDS -lt $end ]; do
	kinit -k -t "$dir/realm/users.keytab" user0001@PERF.TEST >/dev/null 2>&1
	sleep 0.2
done) &
load=$!
echo "t,exporter,rss_kb,anon_kb,file_kb,heap_inuse,heap_sys,stack_inuse,gc_goal,goroutines,cpu_ticks" >"$dir/samples.csv"
rotated=$SECONDS; t0=$SECONDS
while [ $SECONDS -lt $end ]; do
	sleep 10
	if [ $((SECONDS - rotated)) -ge 180 ]; then
		mv "$dir/realm/krb5kdc.log" "$dir/realm/krb5kdc.log.1"
		kdc=$(cat "$dir/realm/krb5kdc.pid")
		kill -HUP "$kdc" $(cat "/proc/$kdc/task/$kdc/children" 2>/dev/null) 2>/dev/null
		rotated=$SECONDS
	fi
	for j in "${!pids[@]}"; do
		p=${pids[$j]}
		read -r rss anon file < <(awk '/^VmRSS/{r=$2}/^RssAnon/{a=$2}/^RssFile/{f=$2}END{print r,a,f}' "/proc/$p/status")
		m=$(curl -s --max-time 5 "http://127.0.0.1:${ports[$j]}/metrics")
		g() { echo "$m" | awk -v k="$1" '$1==k{print $2}'; }
		echo "$((SECONDS - t0)),${names[$j]},$rss,$anon,$file,$(g go_memstats_heap_inuse_bytes),$(g go_memstats_heap_sys_bytes),$(g go_memstats_stack_inuse_bytes),$(g go_memstats_next_gc_bytes),$(g go_goroutines),$(awk '{print $14+$15}' "/proc/$p/stat")" >>"$dir/samples.csv"
	done
done
kill "$load" ${bbload:-} 2>/dev/null
for p in "${pids[@]}"; do cp "/proc/$p/smaps_rollup" "$dir/smaps_rollup.$p" 2>/dev/null; kill -TERM "$p"; done
wait "${pids[@]}" 2>/dev/null
