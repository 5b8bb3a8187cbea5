#!/usr/bin/env bash
# What `make run` runs (scripts/run.sh), as a newcomer would see it: both
# daemons, the demo load, the pprof/OTLP/flame graph files and the top list;
# then a run stopped early (SIGTERM, as Ctrl-C) still writes its profile.
# usage: tests/integration/test_make_run.sh BUILD_DIR   (as root)
set -uo pipefail
build=$(cd "${1:?usage: test_make_run.sh BUILD_DIR}" && pwd)
root=$(cd "$(dirname "$0")/../.." && pwd)
passed=0 failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }

[ "$(id -u)" -eq 0 ] || { fail prerequisite "run as root (BPF collector)"; finish; }
tmp=$(mktemp -d /tmp/opal-make-run.XXXXXX)
chmod 0755 "$tmp"
trap '[ "$failed" -eq 0 ] && rm -rf "$tmp"' EXIT

"$root/scripts/run.sh" --build "$build" --out "$tmp/out" --state "$tmp/var" \
	--duration 6 --frequency 49 --interval 2 >"$tmp/run.out" 2>"$tmp/run.err"
rc=$?
[ $rc -eq 0 ] && pass "run.sh exits 0" || fail "run.sh" "rc=$rc: $(tail -5 "$tmp/run.err")"
for f in profile.pb.gz profile.otlp.pb flamegraph.html; do
	[ -s "$tmp/out/$f" ] && pass "$f written" || fail "$f" "missing or empty"
done
n=$(ls "$tmp/out/intervals/"*.pb.gz 2>/dev/null | wc -l)
[ "$n" -ge 2 ] && pass "interval files ($n)" || fail "interval files" "$n"
# The demo load is python3 without frame pointers: its stacks must reach
# _start through libc and show the interpreter's functions by name.
if grep -q ' _start$' "$tmp/run.out" && grep -q ' _PyEval_EvalFrameDefault$' "$tmp/run.out" &&
	grep -q ' __libc_start_main_impl$' "$tmp/run.out"; then
	pass "top list: the demo's python3 stacks, named, down to _start"
else
	fail "top list" "$(head -30 "$tmp/run.out")"
fi
grep -q '^ok: symbolized user frames and kernel frames present' "$tmp/run.out" &&
	pass "profile check passes" || fail "profile check" "$(tail -3 "$tmp/run.out")"
pgrep -f 'import json, os, zlib' >/dev/null &&
	fail "demo load" "still running after run.sh ended" || pass "demo load stopped with the run"
pgrep -f "$tmp/var/collector.sock" >/dev/null &&
	fail "daemons" "still running after run.sh ended" || pass "daemons stopped with the run"

# Stopped early: SIGTERM (what Ctrl-C delivers to a foreground run) makes it
# stop the collector first, which flushes its last interval.
rm -rf "$tmp/out"
"$root/scripts/run.sh" --build "$build" --out "$tmp/out" --state "$tmp/var" \
	--duration 60 --frequency 49 --interval 30 >"$tmp/run2.out" 2>"$tmp/run2.err" &
runner=$!
for _ in $(seq 100); do grep -q "profiling this machine" "$tmp/run2.err" && break; sleep 0.1; done
sleep 4
kill -TERM $runner
wait $runner
rc=$?
if [ $rc -eq 0 ] && [ -s "$tmp/out/profile.pb.gz" ] &&
	"$build/opal-report" check "$tmp/out/profile.pb.gz" >/dev/null 2>&1; then
	pass "stopped early: the partial interval is written and checks"
else
	fail "stopped early" "rc=$rc: $(tail -5 "$tmp/run2.err")"
fi
finish
