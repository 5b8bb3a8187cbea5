#!/usr/bin/env bash
# Runs every integration script (tests/integration/run.sh first, then
# tests/integration/test_*.sh) with BUILD_DIR as argument. Each script prints
# its own "N passed, N failed" line; this adds them up and ends with the
# total on a line of its own. Exits non-zero if any script failed.
# usage: tests/run-integration.sh BUILD_DIR
set -uo pipefail
build=${1:?usage: run-integration.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
total_pass=0 total_fail=0 bad=0

for script in "$here/integration/run.sh" "$here"/integration/test_*.sh; do
	[ -e "$script" ] || continue
	name=$(basename "$script")
	echo "=== $name"
	log=$(mktemp)
	bash "$script" "$build" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
	rm -f "$log"
	if [ -z "$line" ]; then
		echo "FAIL $name: exited $rc without a result line"
		total_fail=$((total_fail + 1))
		bad=1
		continue
	fi
	p=${line%% passed*}
	f=${line#*passed, }
	f=${f%% failed*}
	total_pass=$((total_pass + p))
	total_fail=$((total_fail + f))
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		echo "FAIL $name: exited $rc"
		total_fail=$((total_fail + 1))
	fi
	[ "$rc" -eq 0 ] || bad=1
done
echo "integration total:"
echo "$total_pass passed, $total_fail failed"
[ "$bad" -eq 0 ] && [ "$total_fail" -eq 0 ]
