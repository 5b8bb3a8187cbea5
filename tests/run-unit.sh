#!/usr/bin/env bash
# Runs the cmocka unit test binaries and sums their results.
# usage: tests/run-unit.sh BUILD_DIR BIN...
# Each binary gets OPAL_FIXTURES=BUILD_DIR/fixtures. With OPAL_UNIT_JOBS=N
# (default 1) N binaries run at once (most of their time is waiting:
# timeouts, retries, a slow fake server); each one's output is shown as it
# runs when N is 1, whole and in order when it ends otherwise. Cases are
# counted from cmocka's "[  PASSED  ] N test(s).",
# "[  FAILED  ] N test(s)" and "[  SKIPPED ] N test(s)" summary lines. A
# binary that crashes, times out or exits non-zero without a failure count
# counts as one failed case. The last line is "N passed, N failed, N
# skipped", naming the skipped cases; the exit status is non-zero when
# anything failed. A case skips only where its premise does not hold on
# this machine (cmocka's skip()); a missing tool or package that
# scripts/install-deps.sh installs is a failure in the test itself.
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
skipped=0
skipped_names=()
njobs=${OPAL_UNIT_JOBS:-1}
case $njobs in '' | *[!0-9]* | 0) echo "run-unit.sh: OPAL_UNIT_JOBS must be a positive number" >&2; exit 2 ;; esac
logs=$(mktemp -d /tmp/opal-unit.XXXXXX)
trap 'rm -rf "$logs"' EXIT

# run_one I BIN: BIN's output into $logs/I.log (and to stdout when njobs
# is 1), its exit status into $logs/I.rc.
run_one() {
	local rc
	if [ "$njobs" -eq 1 ]; then
		echo "=== $2"
		timeout "$timeout_s" "$2" 2>&1 | tee "$logs/$1.log"
		rc=${PIPESTATUS[0]}
	else
		timeout "$timeout_s" "$2" >"$logs/$1.log" 2>&1
		rc=$?
	fi
	echo "$rc" >"$logs/$1.rc"
}

i=0
for bin in "$@"; do
	i=$((i + 1))
	[ -x "$bin" ] || continue
	if [ "$njobs" -eq 1 ]; then
		run_one "$i" "$bin"
		continue
	fi
	while [ "$(jobs -rp | wc -l)" -ge "$njobs" ]; do
		wait -n
	done
	run_one "$i" "$bin" &
done
wait

i=0
for bin in "$@"; do
	i=$((i + 1))
	log=$logs/$i.log
	if [ ! -x "$bin" ]; then
		echo "run-unit.sh: $bin: not an executable" >&2
		failed=$((failed + 1))
		continue
	fi
	if [ "$njobs" -gt 1 ]; then
		echo "=== $bin"
		cat "$log"
	fi
	rc=$(cat "$logs/$i.rc")

	p=$(sed -n 's/^\[  PASSED  \] \([0-9][0-9]*\) test(s)\..*/\1/p' "$log" | tail -n 1)
	f=$(sed -n 's/^\[  FAILED  \] \([0-9][0-9]*\) test(s).*/\1/p' "$log" | tail -n 1)
	s=$(sed -n 's/^\[  SKIPPED \] \([0-9][0-9]*\) test(s).*/\1/p' "$log" | tail -n 1)
	passed=$((passed + ${p:-0}))
	failed=$((failed + ${f:-0}))
	skipped=$((skipped + ${s:-0}))
	while read -r name; do
		skipped_names+=("$(basename "$bin"):$name")
	done < <(sed -n 's/^\[  SKIPPED \] \([A-Za-z_][A-Za-z0-9_]*\)$/\1/p' "$log" | sort -u)

	if [ "$rc" -eq 124 ]; then
		echo "run-unit.sh: $bin: timed out after ${timeout_s}s"
		failed=$((failed + 1))
	elif [ "$rc" -gt 128 ]; then
		echo "run-unit.sh: $bin: killed by signal $((rc - 128))"
		failed=$((failed + 1))
	elif [ "$rc" -ne 0 ] && [ "${f:-0}" -eq 0 ]; then
		echo "run-unit.sh: $bin: exit status $rc without a failed-test count"
		failed=$((failed + 1))
	elif [ -z "$p" ] && [ -z "$f" ] && [ -z "$s" ]; then
		echo "run-unit.sh: $bin: no cmocka summary in its output"
		failed=$((failed + 1))
	fi
done

if [ "$skipped" -gt 0 ]; then
	echo "$passed passed, $failed failed, $skipped skipped: ${skipped_names[*]}"
else
	echo "$passed passed, $failed failed, 0 skipped"
fi
[ "$failed" -eq 0 ]
