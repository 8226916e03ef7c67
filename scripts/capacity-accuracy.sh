#!/bin/sh
# The live capacity estimate against the bench's measured ceilings
# (docs/bench.md, "The live capacity estimate"): for each realm setting, a
# throwaway realm under a light steady load (krb5-exporter realm load
# --arrivals poisson: 50 users logging in at random times, independently,
# as real clients do; logins only, then logins with 10 service tickets
# each; a closed loop of one client would never find the KDC busy, so
# that no request of it would be warm) watched by two
# daemons, one with --collector.kdcservice and one without; then
# `bench --once --tests as,tgs,latency` of a fresh realm with the same
# settings, whose report also carries the bench's own estimate at its
# latency load. The KDC runs on CPU $KDC_CPU (0), everything else of the
# script (load generators, daemons, scrapes, the bench) on $GEN_CPU (1),
# so that the generator takes no CPU from the KDC (other processes of the
# host still may: the own-time ceiling corrects for them).
# Prints one markdown row per setting, source and request type.
# RAW=DIR keeps the raw windows for scripts/capacity-candidates.py: per
# setting every scrape of both daemons (capacity/testdata/capdump), the
# KDC's schedstat and stat per thread at that moment, and report.json.
#
# Usage: [RAW=DIR] scripts/capacity-accuracy.sh [SETTING...]
#   SETTING: default, no-last-success, no-spake, workers2 (all four by default).
# Needs root (the kdcservice daemon's BPF program); per setting holds
# /tmp/krb5x-bpf.lock while that daemon runs and /tmp/krb5x-quiet.lock
# until its bench ends (taken in that order).
set -eu
GO=${GO:-go}
work=$(mktemp -d /tmp/capacity-accuracy.XXXXXX)
bin=$work/krb5-exporter
$GO build -o "$bin" ./cmd/krb5-exporter
[ -z "${RAW:-}" ] || $GO build -o "$work/capdump" ./capacity/testdata/capdump
settings=${*:-default no-last-success no-spake workers2}
phase=${PHASE:-60s}
kcpu=${KDC_CPU:-0}
gcpu=${GEN_CPU:-1}
gen="taskset -c $gcpu"

flags() {
	case $1 in
	default) ;;
	no-last-success) echo --disable-last-success ;;
	no-spake) echo --no-spake ;;
	workers2) echo --workers 2 ;;
	*) echo "unknown setting $1" >&2; exit 2 ;;
	esac
}

# value URL METRIC REQUEST: the gauge's value, or n/a.
value() {
	curl -s "$1" | awk -v m="$2" -v r="$3" '$1 ~ "^"m"\\{" && $1 ~ "request=\""r"\"" {print $2; f=1} END {if (!f) print "n/a"}' | head -1
}

# pinkdc DIR: every krb5kdc process of the realm (its workers too) on $kcpu.
pinkdc() {
	main=$(cat "$1/krb5kdc.pid")
	for p in $main $(pgrep -P "$main" || true); do
		taskset -a -p -c "$kcpu" "$p" >/dev/null
	done
}

# ceiling REPORT REQUEST: the bench's measured ceiling and own-time
# ceiling of REQUEST (as, tgs, mix) in KDC requests per second, from the
# report's capacity rows (docs/bench.md, report.json's capacity).
ceiling() {
	python3 -c '
import json,sys
rows=json.load(open(sys.argv[1]))["capacity"]["rows"]
r=[r for r in rows if r["source"]=="proc" and r["request"]==sys.argv[2]][0]
print("%.0f %.0f"%(r["measured_per_s"], r["own_time_ceiling_per_s"]))' "$1" "$2"
}

# bench_estimate REPORT: the bench's own proc estimate of the mix at its latency load.
bench_estimate() {
	python3 -c '
import json,sys
rows=json.load(open(sys.argv[1]))["capacity"]["rows"]
r=[r for r in rows if r["source"]=="proc" and r["request"]=="mix"][0]
print(r["estimate_per_s"] or "n/a")' "$1"
}

# scrape PID PHASE: both daemons every 5 s while PID (a load) runs; with
# RAW, each scrape kept (the daemons' families, the KDC's threads'
# schedstat: run time, wait, times on a CPU; stat: utime, stime, blkio).
scrape() {
	i=0
	while kill -0 "$1" 2>/dev/null; do
		if [ -n "${RAW:-}" ]; then
			mkdir -p "$RAW/$s"
			$gen "$work/capdump" http://127.0.0.1:19811/metrics >"$RAW/$s/$2-$i-proc.json"
			$gen "$work/capdump" http://127.0.0.1:19812/metrics >"$RAW/$s/$2-$i-bpf.json"
			main=$(cat "$d/krb5kdc.pid")
			for p in $main $(pgrep -P "$main" || true); do
				for t in /proc/"$p"/task/*; do
					echo "$p ${t##*/} $(cat "$t/schedstat") $(awk '{print $14, $15, $42}' "$t/stat")"
				done
			done >"$RAW/$s/$2-$i-sched.txt"
			i=$((i + 1))
		else
			$gen curl -s -o /dev/null http://127.0.0.1:19811/metrics
			$gen curl -s -o /dev/null http://127.0.0.1:19812/metrics
		fi
		sleep 5
	done
}

echo "| setting | source | request | estimate /s | measured /s | error | KDC own-time ceiling /s | error |"
echo "|---|---|---|---:|---:|---:|---:|---:|"
for s in $settings; do
	d=$work/$s
	# The BPF lock, then the quiet one (the order the BPF cost test takes
	# them in); the BPF lock only while the kdcservice daemon runs.
	exec 9>/tmp/krb5x-bpf.lock 8>/tmp/krb5x-quiet.lock
	flock 9
	flock 8
	# shellcheck disable=SC2046
	$gen "$bin" realm up --dir "$d" --users 1000 --services 100 --fillers 1000 --no-kadmind $(flags "$s") >/dev/null
	pinkdc "$d"
	common="--collector.process.krb5kdc-pidfile=$d/krb5kdc.pid --collector.kdcconf.path=$d/kdc.conf --collector.kdcconf.krb5-config=$d/krb5.conf"
	printf 'logs:\n  - path: %s\n    type: kdc\n' "$d/krb5kdc.log" >"$d/exp.yml"
	$gen "$bin" serve --web.listen-address=127.0.0.1:19811 --config.file="$d/exp.yml" $common >"$d/proc.log" 2>&1 &
	p1=$!
	$gen "$bin" serve --web.listen-address=127.0.0.1:19812 --config.file="$d/exp.yml" --collector.kdcservice $common >"$d/bpf.log" 2>&1 &
	p2=$!
	sleep 2
	$gen "$bin" realm load --dir "$d" --arrivals poisson --users 50 --rate "${AS_RATE:-50}" --tickets 0 --duration "$phase" >"$d/load-as.out" 2>&1 &
	l=$!
	scrape $l as
	as1=$(value http://127.0.0.1:19811/metrics krb5_kdc_capacity_requests_per_second as)
	as2=$(value http://127.0.0.1:19812/metrics krb5_kdc_capacity_requests_per_second as)
	$gen "$bin" realm load --dir "$d" --arrivals poisson --users 50 --rate "${TGS_RATE:-30}" --tickets 10 --duration "$phase" >"$d/load-tgs.out" 2>&1 &
	l=$!
	scrape $l tgs
	tgs1=$(value http://127.0.0.1:19811/metrics krb5_kdc_capacity_requests_per_second tgs)
	tgs2=$(value http://127.0.0.1:19812/metrics krb5_kdc_capacity_requests_per_second tgs)
	echo "$s: as $as1 $as2 tgs $tgs1 $tgs2" >&2
	kill "$p1" "$p2"
	wait "$p1" "$p2" || true
	flock -u 9
	"$bin" realm down --dir "$d" >/dev/null
	# shellcheck disable=SC2046
	$gen "$bin" bench --once --tests as,tgs,latency --realm.fillers 1000 --kdc-cpu "$kcpu" --generator-cpu "$gcpu" \
		$(flags "$s" | sed 's/^--/--realm./') --output-dir "$work/$s-results" >"$work/$s-bench.out" 2>&1 || true
	flock -u 8
	rep=$(ls -d "$work/$s-results"/*/report.json | tail -1)
	[ -z "${RAW:-}" ] || cp "$rep" "$RAW/$s/report.json"
	mas=$(ceiling "$rep" as)
	mtgs=$(ceiling "$rep" tgs)
	mmix=$(ceiling "$rep" mix)
	bmix=$(bench_estimate "$rep")
	for row in "proc as $as1 $mas" "kdcservice as $as2 $mas" "proc tgs $tgs1 $mtgs" "kdcservice tgs $tgs2 $mtgs" "bench-latency mix $bmix $mmix"; do
		set -- $row
		python3 -c 'import sys
s,src,req,e,m,o=sys.argv[1:]
def err(m): return "n/a" if e=="n/a" or float(m)==0 else "%+.0f %%"%(100*(float(e)-float(m))/float(m))
est=e if e=="n/a" else "%.0f"%float(e)
print("| %s | %s | %s | %s | %s | %s | %s | %s |"%(s,src,req,est,m,err(m),o,err(o)))' "$s" "$@"
	done
done
[ -n "${KEEP:-}" ] || rm -rf "$work"
