#!/usr/bin/env bash
# The tests that need the machine to themselves, without the race detector,
# after make test's race run (where they skip): the zero-allocation tests
# (names containing "Allocat"; the race detector changes allocation counts),
# TestJournalCost (a CPU ratio the race detector skews), and the bench tests
# that compare real loads run side by side (testutil.Alone: under the race run
# they measured their neighbours), TestCPUWaitUnderContention (a KDC's
# CPU wait alone against beside busy loops), TestIntegrationOtherRealmsNotHeld
# at its full 50 cycles of another realm (5 under the race run), and
# TestGeneratorBlamedFromEvidence (the generator blamed only where it shares
# the KDC's CPU) and TestKDCDiskWaitsCounted (disk waits not put on the
# generator or the network), TestKDCServiceContention (the runqueue share of
# the KDC's service time alone against beside busy loops), TestKDCServiceCountsLog
# (a worker's traced CPU time against the kernel's), TestKDCServiceSlowDisk and
# TestKDCServiceStopped (service and queue times with fsyncs delayed, with the
# KDC stopped in bursts, against the same unhindered), TestKDCServiceCost (the
# eBPF program's cost to the host's system calls and the KDC, side by side),
# TestWakeupsPerRequest (a flooded KDC's wake-ups per request, which a busy
# neighbour raises). Each must really run and pass here. (make test-faults
# runs TestKDCServiceFaultsEndToEnd the same way, outside make test.)
set -euo pipefail
export PATH="$PATH:/usr/local/go/bin"
# One list: the -run pattern and the packages to build come from it.
whole='TestJournalCost TestRealAAAndAB TestMergeRealShards TestBenchBaselineExitCode TestCPUWaitUnderContention TestIntegrationOtherRealmsNotHeld TestGeneratorBlamedFromEvidence TestKDCDiskWaitsCounted TestWakeupsPerRequest TestKDCServiceContention TestKDCServiceCountsLog TestKDCServiceSlowDisk TestKDCServiceStopped TestKDCServiceCost'
# The TestKDCService tests load a BPF program: it needs root (CAP_BPF),
# which CI has; elsewhere, without root, they are left out here.
if [ "$(id -u)" -ne 0 ] && [ -z "${CI:-}" ]; then
	whole=${whole/ TestKDCServiceContention TestKDCServiceCountsLog TestKDCServiceSlowDisk TestKDCServiceStopped TestKDCServiceCost/}
fi
tests="TestExchangesDoNotAllocate TestParseAllocatesNothing TestSPAKELoginAllocations TestClientAllocations TestSetKeyDoesNotAllocate TestRekeyDoesNotAllocate $whole"
run="Allocat|^($(tr ' ' '|' <<<"$whole"))\$"
# Only the packages that hold such tests: building and linking every other
# package's test binary a second time, without -race, found nothing and cost
# a cold machine minutes. -p 1: one package's loads at a time. -timeout 8m:
# alerts' TestKDCServiceFaultsEndToEnd alone took 140-235 s here, its two
# faults side by side, after building the exporter.
pkgs=$(grep -rlE --include='*_test.go' "^func Test([A-Za-z0-9_]*Allocat|($(sed 's/Test//g; s/ /|/g' <<<"$whole"))\\()" . | xargs -n1 dirname | sort -u)
out=$(go test -count=1 -p 1 -timeout 8m -run "$run" -v $pkgs 2>&1) || { echo "$out"; exit 1; }
grep -E '^(--- |ok|FAIL)' <<<"$out" | grep -v 'no test files' || true
for t in $tests; do
	if ! grep -q -- "--- PASS: $t " <<<"$out"; then
		echo "test-alone: $t did not run and pass (skipped or renamed?)" >&2
		exit 1
	fi
done
