#!/bin/sh
# The log path end to end against its floor, in one run: the krb5-exporter
# binary following a KDC log from its start until every line is counted,
# and a bare byte scanner that only reads and parses the same lines
# (kdclog.Parser), each a whole process pinned to one CPU, in lines per
# CPU-second (kdclog/testdata/logpath). Not part of make test.
#
#   scripts/logpath-bench.sh [lines] [cpu] [runs] [modes]
#
# lines: 3000000; cpu: 1; runs: 5 of each mode, in turn; modes:
# exporter,exporter-attack-off,scanner (also exporter-follow: both follow_
# options; exporter-talkers-off: top_talkers disabled). The log is kdclog's benchmark log (kdclog/benchlog_test.go:
# captured MIT 1.20 lines, production-like mix). About a minute.
# BASELINE=BIN adds mode baseline: BIN, a krb5-exporter built at another
# commit, with the default configuration (before/after in one run).
# SKEW=S draws the log's users and services from a Zipf distribution of
# exponent S (> 1) instead of uniformly: a few names with most requests,
# as production has; uniform is the top talkers' worst case.
# REF=MODE sets the mode the same-run ratios are against (default scanner;
# exporter-talkers-off gives the top talkers' cost).
set -eu
lines=${1:-3000000}
cpu=${2:-1}
runs=${3:-5}
modes=${4:-exporter,exporter-attack-off,scanner}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
# The log on tmpfs when it has room for twice the log (about 312 bytes a
# line): a KDC's fresh log is in the page cache, and on a host whose
# reclaim pages cold cache out between runs (DAMON's pageout scheme here
# evicted 99 % of a 936 MB log on /tmp), part of each run would read
# from the disk.
logdir=$work
if [ -d /dev/shm ] && [ "$(df -Pk /dev/shm | awk 'NR==2 {print $4}')" -gt $((lines * 2 / 3)) ]; then
	logdir=$(mktemp -d /dev/shm/logpath-bench.XXXXXX)
fi
trap 'rm -rf "$work" "$logdir"' EXIT
cd "$repo"
CGO_ENABLED=0 go build -trimpath -o "$work/krb5-exporter" ./cmd/krb5-exporter # as the packages build it
go build -o "$work/logpath" ./kdclog/testdata/logpath
go test ./kdclog -count=1 -run '^TestWriteBenchLog$' -benchlog="$logdir/krb5kdc.log" -benchlines="$lines" -benchskew="${SKEW:-0}" >/dev/null
"$work/logpath" -exporter "$work/krb5-exporter" -baseline "${BASELINE:-}" -log "$logdir/krb5kdc.log" -cpu "$cpu" -runs "$runs" -modes "$modes" -ref "${REF:-scanner}"
