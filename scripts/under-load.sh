#!/bin/bash
# under-load.sh [N]: runs `make test` N times (default 10) in a clean clone
# of this checkout's HEAD while a second clone runs `go test -race ./...`
# over and over beside it, the way flaky tests show up (issue #16). Each
# run's verdict and time go to $STATUS (default /tmp/under-load.status), its
# output to $STATUS.A<k>.log / .B<k>.log. Exits 0 only when all N passed.
set -u
n=${1:-10}
status=${STATUS:-/tmp/under-load.status}
work=$(mktemp -d /tmp/under-load.XXXXXX)
src=$(git rev-parse --show-toplevel)
git clone -q "$src" "$work/a" && git clone -q "$src" "$work/b" || exit 2
echo "start $(date -u +%T) $(git -C "$work/a" log --oneline -1)" > "$status"
(
	cd "$work/b" || exit 2
	k=0
	while [ ! -e "$work/a.done" ]; do
		k=$((k + 1))
		s=$(date +%s)
		if CI=true go test -race -count=1 ./... > "$status.B$k.log" 2>&1; then r=ok; else r=FAIL; fi
		echo "B$k $r $(($(date +%s) - s))s $(date -u +%T)" >> "$status"
	done
) &
failed=0
cd "$work/a" || exit 2
for k in $(seq "$n"); do
	s=$(date +%s)
	if CI=true make test > "$status.A$k.log" 2>&1; then r=ok; else r=FAIL; failed=$((failed + 1)); fi
	echo "A$k $r $(($(date +%s) - s))s $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$status"
done
touch "$work/a.done"
wait
echo "done $(date -u +%T): $((n - failed)) of $n passed" >> "$status"
rm -rf "$work"
[ "$failed" -eq 0 ]
