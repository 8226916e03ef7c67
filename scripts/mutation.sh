#!/usr/bin/env bash
# Mutation testing (gremlins) of the packages whose logic is pure and fast
# to test; `make mutation`, not part of `make test`. One package at a time,
# one worker (2 shared cores). Each package's mutants are tested with its
# unit tests only: GOFLAGS carries -short and a -run filter to gremlins'
# `go test` runs (coverage first, then one run per mutant), so no real-KDC
# integration test runs per mutant, and only code those tests cover is
# mutated. Results: one JSON per package in $OUT (default .mutation/).
# Usage: scripts/mutation.sh [package ...]   (default: all of them)
# Scores and the surviving mutants: docs/testing.md.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin:$(go env GOPATH)/bin"
GREMLINS_VERSION=v0.6.0
command -v gremlins >/dev/null || go install github.com/go-gremlins/gremlins/cmd/gremlins@$GREMLINS_VERSION
OUT=${OUT:-.mutation}
mkdir -p "$OUT"

# package ; -run filter ; files not mutated (gremlins -E: a regexp on the
# path inside the package)
specs=(
	"internal/ulog;.;"
	"internal/enctype;.;"
	"journal;^TestJSON;^journal\.go$"
	"bench;^(TestSummarize|TestSlope|TestDefaultTargetsAreTheDocumented|TestVerdictAtTheEdge|TestMetricBaseValue)\$;"
	"config;.;"
	"kdclog;^(TestFixtures|TestRewrites|TestFastIndexes|TestParseKpropd|TestKpropdFixture|TestLabelCharsets|TestForgedLinesMakeNoLabel|TestDocumentedLabelCaps|TestParseMessageMatchesParse|TestParse|TestEtypes|TestBoundedLabels|TestRecoverWindow)\$;^(manager|collector|counts|workers|kpropd|labels|source|flags)\.go$"
	"kdclog/attack;.;"
	"kdclog/talkers;.;"
	"internal/der;.;"
	"internal/krb5/hmacx;.;"
)

want=("$@")
for spec in "${specs[@]}"; do
	IFS=';' read -r pkg run exclude <<<"$spec"
	if [ ${#want[@]} -gt 0 ] && ! printf '%s\n' "${want[@]}" | grep -qx "$pkg"; then
		continue
	fi
	name=${pkg//\//-}
	args=(unleash --workers "${WORKERS:-1}" --test-cpu 1 --timeout-coefficient 10 -o "$OUT/$name.json")
	[ -n "$exclude" ] && args+=(-E "$exclude")
	echo "== $pkg"
	GOFLAGS="-short -run=$run" gremlins "${args[@]}" "./$pkg" | tee "$OUT/$name.log" | grep -E 'LIVED|TIMED OUT|efficacy|coverage:|Killed'
done
