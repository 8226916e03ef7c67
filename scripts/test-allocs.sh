#!/usr/bin/env bash
# The zero-allocation tests (names containing "Allocat") without the race
# detector, which changes allocation counts: `make test` runs everything else
# with -race, where these tests skip. Each must really run and pass here. So
# does TestJournalCost, a CPU ratio the race detector skews.
set -euo pipefail
export PATH="$PATH:/usr/local/go/bin"
# Only the packages that hold such tests: building and linking every other
# package's test binary a second time, without -race, found nothing and cost
# a cold machine minutes.
pkgs=$(grep -rlE --include='*_test.go' '^func Test([A-Za-z0-9_]*Allocat|JournalCost\()' . | xargs -n1 dirname | sort -u)
out=$(go test -count=1 -timeout 5m -run 'Allocat|^TestJournalCost$' -v $pkgs 2>&1) || { echo "$out"; exit 1; }
grep -E '^(--- |ok|FAIL)' <<<"$out" | grep -v 'no test files' || true
for t in TestExchangesDoNotAllocate TestParseAllocatesNothing TestSPAKELoginAllocations TestClientAllocations TestSetKeyDoesNotAllocate TestRekeyDoesNotAllocate TestJournalCost; do
	if ! grep -q -- "--- PASS: $t " <<<"$out"; then
		echo "test-allocs: $t did not run and pass (skipped or renamed?)" >&2
		exit 1
	fi
done
