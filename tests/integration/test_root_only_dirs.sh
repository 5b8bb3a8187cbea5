#!/usr/bin/env bash
# The symbolizer started as root with --user keeps working in state and
# output folders under a directory its user cannot enter (a root-only home):
# it opens them before dropping privileges and reaches them through
# /proc/self/fd afterwards, SQLite included. The folders' parents do not
# exist yet: it creates them (mkdir -p, as root), the state folder 0700.
# usage: tests/integration/test_root_only_dirs.sh BUILD_DIR   (as root)
set -uo pipefail
. "$(dirname "$0")/lib/common.sh"
need_build "${1:?usage: test_root_only_dirs.sh BUILD_DIR}"
need_daemons
need_bins "$report"
[ "$prereq_ok" -eq 1 ] || finish

make_tmp opal-home
home=$tmp
chmod 0700 "$home"
if su nobody -s /bin/sh -c "ls '$home'" >/dev/null 2>&1; then
	fail setup "nobody can list $home; the test would prove nothing"
	finish
fi
sock=$home/s.sock
state=$home/run/opal/state
out=$home/srv/profiles/out
launch_symbolizer "$home/sym.log" --socket "$sock" --state-dir "$state" --out-dir "$out" \
	--whole-run --user nobody || finish
modes=$(stat -c '%a %U' "$state" "$home/run/opal" "$home/run" "$out" "$home/srv/profiles" 2>&1 |
	tr '\n' ' ')
[ "$modes" = "700 nobody 755 root 755 root 700 nobody 755 root " ] &&
	pass "missing parents of --state-dir and --out-dir created ($modes)" ||
	fail "missing parents created" "modes and owners: $modes (want state 700 nobody, parents 755 root, out 700 nobody)"
sym=$sym_pid
start_collector "$home/coll.log" --socket "$sock" --frequency 99 --interval 1 || finish
coll=$coll_pid
busy_load 4
kill -TERM $coll; wait $coll
kill -TERM $sym; wait $sym
rc=$?

[ $rc -eq 0 ] && pass "symbolizer ran and stopped cleanly" || fail "symbolizer exit" "rc=$rc: $(tail -5 "$home/sym.log")"
[ -s "$state/state.db" ] && [ "$(stat -c %U "$state/state.db")" = nobody ] &&
	pass "SQLite state written as nobody under a root-only folder" ||
	fail "state.db" "$(ls -la "$state" 2>&1; tail -5 "$home/sym.log")"
n=$(ls "$out/intervals/"*.pb.gz 2>/dev/null | wc -l)
[ "$n" -ge 3 ] && pass "interval files written ($n)" || fail "interval files" "$n: $(tail -5 "$home/sym.log")"
"$report" check "$out/profile.pb.gz" >/dev/null 2>&1 &&
	pass "whole-run profile has symbolized user and kernel frames" ||
	fail "profile" "$("$report" check "$out/profile.pb.gz" 2>&1)"
finish
