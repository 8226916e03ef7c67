#!/bin/sh
# Client CPU per request against the KDC's, KDC and client pinned to
# different CPUs: the test binary (the client) runs on CPU 1 under taskset,
# and BENCH_KDC_CPU=0 makes the benchmark move the KDC it starts to CPU 0.
# Usage: prober/testdata/bench-cpu.sh [benchtime] [count]   (from the repo root)
set -eu
benchtime=${1:-5s}
count=${2:-3}
cd "$(dirname "$0")/../.."
bin=$(mktemp -d)/prober.test
trap 'rm -rf "$(dirname "$bin")"' EXIT
go test -c -o "$bin" ./prober
cd prober
BENCH_KDC_CPU=0 taskset -c 1 "$bin" -test.run '^$' -test.bench 'Exchange' \
	-test.benchtime "$benchtime" -test.count "$count" -test.benchmem
