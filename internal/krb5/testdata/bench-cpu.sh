#!/bin/sh
# Client CPU per request against the KDC's, KDC and client pinned to
# different CPUs: the test binary (the client) runs on CPU 1 under taskset,
# and BENCH_KDC_CPU=0 makes the benchmarks move the KDC (and the UDP echo
# peer of BenchmarkUDPRoundTrip) they start to CPU 0.
#
#   internal/krb5/testdata/bench-cpu.sh [benchtime] [count] [regexp]   (from anywhere)
#
# Reported per benchmark: ns/op, client-cpu-ns/op (getrusage of the whole
# test process), kdc-cpu-ns/op (/proc/PID/stat of the KDC's processes over the
# same run), client/kdc, B/op and allocs/op. Take the median of several counts:
# the machine is shared.
set -eu
benchtime=${1:-5s}
count=${2:-3}
pattern=${3:-'Exchange|Gokrb5|UDPRoundTrip|Messages'}
cd "$(dirname "$0")/../../.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
go test -c -o "$dir/krb5.test" ./internal/krb5
cd internal/krb5
BENCH_KDC_CPU=0 taskset -c 1 "$dir/krb5.test" -test.run '^$' -test.bench "$pattern" \
	-test.benchtime "$benchtime" -test.count "$count" -test.benchmem
