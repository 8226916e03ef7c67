#!/bin/bash
# CPU microseconds (user+sys) per op of the benchmarks matching pattern, run
# N times each, pinned to CPU 1: unlike ns/op, immune to the waiting a loaded
# (shared) machine adds. Minus a run of the same binary that benchmarks
# nothing (process start, init). Compare before/after binaries alternately.
#
#   go test -c -o /tmp/krb5.test ./internal/krb5
#   internal/krb5/testdata/cpu-per-op.sh /tmp/krb5.test internal/krb5 'SPAKEReplyKeys/aes256-cts-hmac-sha1-96' 100000
set -eu
bin=$1 dir=$2 pat=$3 n=$4
cd $dir
# baseline: same binary, same process start, pattern matching nothing
t0=$( { /usr/bin/time -f "%U %S" taskset -c 1 $bin -test.run '^$' -test.bench "^$" >/dev/null; } 2>&1 | awk '{print $1+$2}')
t1=$( { /usr/bin/time -f "%U %S" taskset -c 1 $bin -test.run '^$' -test.bench "$pat" -test.benchtime ${n}x >/dev/null; } 2>&1 | tail -1 | awk '{print $1+$2}')
python3 -c "print('%.1f' % (($t1-$t0)/$n*1e6))"
