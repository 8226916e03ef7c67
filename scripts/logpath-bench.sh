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
set -eu
lines=${1:-3000000}
cpu=${2:-1}
runs=${3:-5}
modes=${4:-exporter,exporter-attack-off,scanner}
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$repo"
go build -o "$work/krb5-exporter" ./cmd/krb5-exporter
go build -o "$work/logpath" ./kdclog/testdata/logpath
go test ./kdclog -count=1 -run '^TestWriteBenchLog$' -benchlog="$work/krb5kdc.log" -benchlines="$lines" >/dev/null
"$work/logpath" -exporter "$work/krb5-exporter" -baseline "${BASELINE:-}" -log "$work/krb5kdc.log" -cpu "$cpu" -runs "$runs" -modes "$modes"
