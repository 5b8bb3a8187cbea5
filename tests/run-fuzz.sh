#!/usr/bin/env bash
# Runs every libFuzzer target for SECONDS each: the CFI table builder
# (tests/fuzz/run.sh) and the debuginfo targets (tests/fuzz/build_debuginfo.sh:
# upload validator, JSON parsers). Full output goes to BUILD_DIR/fuzz/*.log;
# a failing target's log tail is printed. Ends with "N passed, N failed".
# usage: tests/run-fuzz.sh BUILD_DIR SECONDS
set -uo pipefail
build=${1:?usage: run-fuzz.sh BUILD_DIR SECONDS}
seconds=${2:?usage: run-fuzz.sh BUILD_DIR SECONDS}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$build/fuzz"
di=$build/fuzz/debuginfo
passed=0 failed=0

run() {   # run NAME COMMAND...
	local name=$1 log=$build/fuzz/$1.log
	shift
	if "$@" >"$log" 2>&1; then
		echo "PASS fuzz $name ($(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$log" | tail -n 1))"
		passed=$((passed + 1))
	else
		echo "FAIL fuzz $name: see $log"
		tail -n 40 "$log"
		failed=$((failed + 1))
	fi
}

run unwind_table bash "$here/fuzz/run.sh" "$build" "$seconds"
if bash "$here/fuzz/build_debuginfo.sh" "$build" "$di" >"$build/fuzz/build_debuginfo.log" 2>&1; then
	run json "$di/fuzz_json" "$di/corpus-fuzz_json" -max_total_time="$seconds"
	run upload "$di/fuzz_upload" "$di/corpus-fuzz_upload" -max_total_time="$seconds"
else
	echo "FAIL fuzz build: see $build/fuzz/build_debuginfo.log"
	tail -n 40 "$build/fuzz/build_debuginfo.log"
	failed=$((failed + 1))
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
