#!/usr/bin/env bash
# Runs the cmocka unit test binaries and sums their results.
# usage: tests/run-unit.sh BUILD_DIR BIN...
# Each binary gets OPAL_FIXTURES=BUILD_DIR/fixtures. Its output is shown as
# it runs; cases are counted from cmocka's "[  PASSED  ] N test(s)." and
# "[  FAILED  ] N test(s)" summary lines. A binary that crashes, times out or
# exits non-zero without a failure count counts as one failed case. The last
# line is "N passed, N failed"; the exit status is non-zero when anything
# failed.
set -uo pipefail

build=${1:?usage: run-unit.sh BUILD_DIR BIN...}
shift
[ $# -gt 0 ] || { echo "run-unit.sh: no test binaries given" >&2; exit 2; }

fixtures=$(cd "$build" && pwd)/fixtures
export OPAL_FIXTURES=$fixtures
export CMOCKA_MESSAGE_OUTPUT=STDOUT
timeout_s=${OPAL_UNIT_TIMEOUT:-300}

passed=0
failed=0
log=$(mktemp /tmp/opal-unit.XXXXXX)
trap 'rm -f "$log"' EXIT

for bin in "$@"; do
	echo "=== $bin"
	if [ ! -x "$bin" ]; then
		echo "run-unit.sh: $bin: not an executable" >&2
		failed=$((failed + 1))
		continue
	fi
	timeout "$timeout_s" "$bin" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}

	p=$(sed -n 's/^\[  PASSED  \] \([0-9][0-9]*\) test(s)\..*/\1/p' "$log" | tail -n 1)
	f=$(sed -n 's/^\[  FAILED  \] \([0-9][0-9]*\) test(s).*/\1/p' "$log" | tail -n 1)
	passed=$((passed + ${p:-0}))
	failed=$((failed + ${f:-0}))

	if [ "$rc" -eq 124 ]; then
		echo "run-unit.sh: $bin: timed out after ${timeout_s}s"
		failed=$((failed + 1))
	elif [ "$rc" -gt 128 ]; then
		echo "run-unit.sh: $bin: killed by signal $((rc - 128))"
		failed=$((failed + 1))
	elif [ "$rc" -ne 0 ] && [ "${f:-0}" -eq 0 ]; then
		echo "run-unit.sh: $bin: exit status $rc without a failed-test count"
		failed=$((failed + 1))
	elif [ -z "$p" ] && [ -z "$f" ]; then
		echo "run-unit.sh: $bin: no cmocka summary in its output"
		failed=$((failed + 1))
	fi
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
