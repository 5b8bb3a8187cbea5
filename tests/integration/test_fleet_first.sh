#!/usr/bin/env bash
# Fleet mode, the first interval of a new file (docs/http-api.md, "Fleet"):
# a host symbolizer with --upstream pointing at a central one that holds
# the uploaded debug data of a stripped program. The interval in which the
# program's file is seen for the first time must already be resolved when
# it is written (the host holds it until the central answered, at most
# OPAL_UPSTREAM_FIRST_WAIT_MS = 3 s), as must the whole-run profile; with a
# central that never answers the interval is written after that bound and
# /metrics counts it.
# usage: tests/integration/test_fleet_first.sh BUILD_DIR   (as root)
# Prints PASS/FAIL per check and ends with "N passed, N failed"; exits
# non-zero on any failure. Missing prerequisites are failures, not skips.
# OPAL_IT_KEEP=1 keeps the temp folder (it is always kept on failure).
set -uo pipefail

. "$(dirname "$0")/lib/common.sh"

# ---- prerequisites ---------------------------------------------------------------
need_build "${1:?usage: test_fleet_first.sh BUILD_DIR}"
fx=$build/fixtures/debuginfo
dbg=$build/opal-debuginfo
need_daemons
need_bins "$report" "$dbg"
need_fixtures "$fx/di_stripped" "$fx/di_full"
need_tools curl python3
[ "$prereq_ok" -eq 1 ] || finish

make_tmp opal-fleet
base=$((20000 + ($$ % 20000)))
central_port=$base host_port=$((base + 1)) silent_port=$((base + 2))
central=http://127.0.0.1:$central_port
echo "central-token-$$" >"$tmp/central.token"
chmod 0600 "$tmp/central.token"
mkdir -p "$tmp/app"
chmod 0755 "$tmp/app"
cp "$fx/di_stripped" "$tmp/app/"

# ---- the central symbolizer, with the program's debug data uploaded ---------------
make_dirs "$tmp/central"
start_symbolizer "$tmp/central" "$tmp/central.log" --http-listen "127.0.0.1:$central_port" \
	--token-file "$tmp/central.token" || finish
if out=$("$dbg" upload --server "$central" --token-file "$tmp/central.token" "$fx/di_full" 2>&1) &&
	grep -q "di_full: uploaded" <<<"$out"; then
	pass "debug data of the stripped program uploaded to the central symbolizer"
else
	fail "upload to the central symbolizer" "$out"
	finish
fi
central_pid=$sym_pid

# host NAME UPSTREAM SECONDS: a host symbolizer in $tmp/NAME with --upstream
# UPSTREAM and a collector, while the stripped program runs SECONDS
# seconds; sets app_pid. The daemons are stopped again (the process
# $upstream_pid, when set, just before the symbolizer).
host() {
	local name=$1 upstream=$2 seconds=$3
	make_dirs "$tmp/$name"
	start_symbolizer "$tmp/$name" "$tmp/$name.log" --whole-run \
		--http-listen "127.0.0.1:$host_port" --upstream "$upstream" \
		--upstream-token-file "$tmp/central.token" || return 1
	start_collector "$tmp/$name-collector.log" --socket "$tmp/$name/run/opal.sock" \
		--frequency 99 --interval 2 || return 1
	"$tmp/app/di_stripped" "$seconds" &
	app_pid=$!
	wait "$app_pid"
	sleep 1
	stop_daemon "$name: collector stops cleanly" "$coll_pid" 30 "$tmp/$name-collector.log"
	wait_log "$tmp/$name.log" 'interval [0-9]* \(final\): ' 15
	curl -s --max-time 10 "http://127.0.0.1:$host_port/metrics" >"$tmp/$name.metrics"
	[ -z "${upstream_pid:-}" ] || kill "$upstream_pid" 2>/dev/null
	stop_daemon "$name: symbolizer stops cleanly" "$sym_pid" 60 "$tmp/$name.log"
}

# share FILE PID: "GOOD TOTAL" samples of PID in profile FILE, GOOD those
# whose stack names di_outer (symbolized through the central's data).
share() {
	"$report" stacks "$1" 2>/dev/null | awk -v pid="pid=$2" '
		$1 == pid {
			c = $0; sub(/^.* count=/, "", c); c = c + 0
			total += c
			if ($0 ~ /;di_outer;/) good += c
		}
		END { printf "%d %d\n", good, total }'
}

# ---- a central that answers --------------------------------------------------------
host host "$central" 7 || finish
first=
bad=
for f in $(ls "$tmp/host/out/intervals/"*.pb.gz 2>/dev/null | sort -t- -k2,2n); do
	read -r good total <<<"$(share "$f" "$app_pid")"
	[ "$total" -gt 0 ] || continue
	[ -n "$first" ] || first="$good of $total in ${f##*/}"
	[ $((good * 100)) -ge $((total * 95)) ] || bad="$bad ${f##*/}: $good of $total;"
done
if [ -z "$first" ]; then
	fail "first interval of the new file resolved" "no interval holds samples of pid $app_pid"
elif [ -n "$bad" ]; then
	fail "every interval of the new file resolved, the first included" "$bad (first: $first)"
else
	pass "every interval of the new file resolved, the first included (first: $first)"
fi
read -r good total <<<"$(share "$tmp/host/out/profile.pb.gz" "$app_pid")"
[ "$total" -ge 20 ] && [ $((good * 100)) -ge $((total * 95)) ] &&
	pass "whole-run profile resolved ($good of $total samples)" ||
	fail "whole-run profile resolved" "$good of $total samples name di_outer"
grep -Eq '^opal_upstream_events_total\{event="first_waited"\} [1-9]' "$tmp/host.metrics" &&
	pass "the host held the new file's interval for the upstream (first_waited)" ||
	fail "first_waited counted" "$(grep upstream_events "$tmp/host.metrics" | tr '\n' ' ')"

# ---- a central that never answers: the bound -------------------------------------------
python3 - "$silent_port" >"$tmp/silent.log" 2>&1 <<'PY' &
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(16)
held = []
while True:
    c, _ = s.accept()   # read nothing, answer nothing
    held.append(c)
PY
upstream_pid=$!
host silent "http://127.0.0.1:$silent_port" 5 || finish
n=$(ls "$tmp/silent/out/intervals/"*.pb.gz 2>/dev/null | wc -l)
# 5 s at 2 s intervals: the first one held 3 s at most, the others not
[ "$n" -ge 2 ] && pass "silent upstream: intervals still written ($n)" ||
	fail "silent upstream: intervals written" "$n: $(tail -n 3 "$tmp/silent.log")"
grep -Eq '^opal_upstream_events_total\{event="first_wait_exceeded"\} [1-9]' "$tmp/silent.metrics" &&
	pass "silent upstream: the 3 s bound counted (first_wait_exceeded)" ||
	fail "first_wait_exceeded counted" "$(grep upstream_events "$tmp/silent.metrics" | tr '\n' ' ')"

kill -TERM "$central_pid" 2>/dev/null
wait_for_exit "$central_pid" 30
finish
