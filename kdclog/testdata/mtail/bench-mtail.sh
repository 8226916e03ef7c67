#!/bin/sh
# Compares the Go log collector with mtail on the same million-line KDC log
# (kdclog/benchlog_test.go: captured MIT 1.20 lines, production-like mix),
# every program pinned to one core, in lines per CPU-second (user + system).
#
#   kdclog/testdata/mtail/bench-mtail.sh [lines] [cpu] [runs]
#
# Needs mtail (Debian: apt-get install mtail), taskset and GNU time. Takes a
# few minutes (mtail needs 15-45 CPU-seconds per run); not part of go test.
set -eu
lines=${1:-1000000}
cpu=${2:-0}
runs=${3:-2}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cd "$repo"
go test ./kdclog -count=1 -run '^TestWriteBenchLog$' -benchlog="$work/krb5kdc.log" -benchlines="$lines" >/dev/null
cat "$work/krb5kdc.log" >/dev/null # into the page cache
echo "log: $lines lines, $(du -m "$work/krb5kdc.log" | cut -f1) MB, pinned to CPU $cpu"

# mtail reads the file from its start, prints its metrics and exits.
mtail_run() { # name progdir
	i=1
	while [ "$i" -le "$runs" ]; do
		/usr/bin/time -f '%U %S' -o "$work/time" taskset -c "$cpu" \
			mtail --progs "$2" --logs "$work/krb5kdc.log" --one_shot --one_shot_format=prometheus \
			--logtostderr=false >"$work/mtail.out" 2>/dev/null
		grep -q 'krb5_kdc_requests_total{.*status="ISSUE"' "$work/mtail.out" || { echo "mtail $1 counted nothing" >&2; exit 1; }
		awk -v n="$lines" -v name="$1" '{cpu=$1+$2; printf "%-34s %8.2f CPU-s %12.0f lines/CPU-s\n", "mtail " name, cpu, n/cpu}' "$work/time"
		i=$((i + 1))
	done
}
mtail_run "kdc.mtail (equivalent)" "$here"
mtail_run "kdc-requests.mtail (minimal)" "$here/requests"

# The Go benchmarks on the same lines (the generator is deterministic).
go test -c -o "$work/kdclog.test" ./kdclog
cd kdclog
taskset -c "$cpu" "$work/kdclog.test" -test.run '^$' -test.count="$runs" -test.benchtime 3x -benchlines="$lines" \
	-test.bench 'BenchmarkParse$|BenchmarkParseCount$|BenchmarkTailParseCount$' |
	awk '/^Benchmark/ {printf "%-34s %8s allocs/line %12.0f lines/CPU-s\n", $1, $3, $5}'
