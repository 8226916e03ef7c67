#!/bin/sh
# Compares the Go log collector with mtail on the same million-line KDC log,
# each pinned to one core, in lines per CPU-second (user + system time).
#
#   kdclog/testdata/mtail/bench-mtail.sh [lines] [cpu]
#
# Needs mtail (Debian: apt-get install mtail), taskset and GNU time. Takes
# about a minute; not part of `go test ./...`.
set -eu
lines=${1:-1000000}
cpu=${2:-0}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cd "$repo"
go test ./kdclog -count=1 -run '^TestWriteBenchLog$' -benchlog="$work/krb5kdc.log" -benchlines="$lines" >/dev/null
cat "$work/krb5kdc.log" >/dev/null # into the page cache
echo "log: $lines lines, $(du -m "$work/krb5kdc.log" | cut -f1) MB"

# mtail reads the file from its start and exits (--one_shot).
for run in 1 2 3; do
	/usr/bin/time -f '%U %S' -o "$work/time" taskset -c "$cpu" \
		mtail --progs "$here" --logs "$work/krb5kdc.log" --one_shot --one_shot_format=prometheus \
		--logtostderr=false >"$work/mtail.out" 2>/dev/null
	awk -v n="$lines" '{cpu=$1+$2; printf "mtail run '"$run"': %.2f CPU-s, %.0f lines/CPU-s\n", cpu, n/cpu}' "$work/time"
done
grep -q 'krb5_kdc_requests_total{.*status="ISSUE"' "$work/mtail.out" || { echo "mtail counted nothing" >&2; exit 1; }

# The Go benchmarks on the same lines (the generator is deterministic).
taskset -c "$cpu" go test ./kdclog -count=3 -run '^$' -bench 'BenchmarkParse$|BenchmarkParseCount$|BenchmarkTailParseCount$' \
	-benchtime 3x -benchlines="$lines" | grep '^Benchmark'
