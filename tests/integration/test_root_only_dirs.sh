#!/usr/bin/env bash
# The symbolizer started as root with --user keeps working in state and
# output folders under a directory its user cannot enter (a root-only home):
# it opens them before dropping privileges and reaches them through
# /proc/self/fd afterwards, SQLite included.
# usage: tests/integration/test_root_only_dirs.sh BUILD_DIR   (as root)
set -uo pipefail
build=$(cd "${1:?usage: test_root_only_dirs.sh BUILD_DIR}" && pwd)
passed=0 failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
finish() { echo "$passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }

[ "$(id -u)" -eq 0 ] || { fail prerequisite "run as root (BPF collector, symbolizer --user nobody)"; finish; }

home=$(mktemp -d /tmp/opal-home.XXXXXX)
chmod 0700 "$home"
if su nobody -s /bin/sh -c "ls '$home'" >/dev/null 2>&1; then
	fail setup "nobody can list $home; the test would prove nothing"
	finish
fi
sock=$home/s.sock
"$build/opal-symbolizer" --socket "$sock" --state-dir "$home/var" --out-dir "$home/out" \
	--whole-run --user nobody 2>"$home/sym.log" &
sym=$!
trap 'kill -KILL $sym $coll 2>/dev/null; [ "$failed" -eq 0 ] && rm -rf "$home"' EXIT
coll=
for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
"$build/opal-collector" --socket "$sock" --frequency 99 --interval 1 2>"$home/coll.log" &
coll=$!
# Work for the profile: on an idle machine the daemons' own samples are
# excluded and nothing else may run.
timeout 4 bash -c 'while :; do :; done'
kill -TERM $coll; wait $coll
kill -TERM $sym; wait $sym
rc=$?

[ $rc -eq 0 ] && pass "symbolizer ran and stopped cleanly" || fail "symbolizer exit" "rc=$rc: $(tail -5 "$home/sym.log")"
[ -s "$home/var/state.db" ] && [ "$(stat -c %U "$home/var/state.db")" = nobody ] &&
	pass "SQLite state written as nobody under a root-only folder" ||
	fail "state.db" "$(ls -la "$home/var" 2>&1; tail -5 "$home/sym.log")"
n=$(ls "$home/out/intervals/"*.pb.gz 2>/dev/null | wc -l)
[ "$n" -ge 3 ] && pass "interval files written ($n)" || fail "interval files" "$n: $(tail -5 "$home/sym.log")"
"$build/opal-report" check "$home/out/profile.pb.gz" >/dev/null 2>&1 &&
	pass "whole-run profile has symbolized user and kernel frames" ||
	fail "profile" "$("$build/opal-report" check "$home/out/profile.pb.gz" 2>&1)"
finish
