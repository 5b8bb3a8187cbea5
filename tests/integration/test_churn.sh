#!/usr/bin/env bash
# Process churn against the collector's process lifecycle handling
# (issue 15, item 12): a steady process (tests/fixtures/stack, bigframe)
# is profiled while shell loops start thousands of short processes.
#   - with the default lifecycle ring no exec/exit event is lost;
#   - with a 4 KiB ring (--lifecycle-buffer 4k) events are lost, the
#     collector then drops only cached processes that are gone or
#     replaced (never the steady one), and the steady process's samples
#     still reach _start.
# usage: tests/integration/test_churn.sh BUILD_DIR   (as root)
# Prints PASS/FAIL per check and ends with "N passed, N failed"; exits
# non-zero on any failure. Missing prerequisites are failures, not skips.
# OPAL_IT_KEEP=1 keeps the temp folder (it is always kept on failure).
set -uo pipefail

. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/stacks.sh"

RUN_S=6
CHURN_LOOPS=4

# ---- prerequisites ---------------------------------------------------------------
need_build "${1:?usage: test_churn.sh BUILD_DIR}"
fx=$build/fixtures/stack/stack
need_daemons
need_bins "$report"
need_fixtures "$fx"
[ -r /proc/kallsyms ] || need kallsyms "/proc/kallsyms is not readable"
[ "$prereq_ok" -eq 1 ] || finish
make_tmp opal-churn

# churn SECONDS: CHURN_LOOPS shell loops starting /bin/true; prints how
# many processes they started.
churn() {
	local i
	for ((i = 0; i < CHURN_LOOPS; i++)); do
		timeout "$1" bash -c 'n=0; while :; do /bin/true; n=$((n + 1)); echo $n >"$0"; done' \
			"$tmp/churn.$i" &
	done
	wait
	cat "$tmp"/churn.* | awk '{ n += $1 } END { print n + 0 }'
}

# profile NAME COLLECTOR_ARGS...: one run of both daemons in $tmp/NAME
# with the steady process and the churn; leaves $tmp/NAME/user.txt, the
# collector's log and $tmp/NAME/steady.pid.
profile() {
	local name=$1 dir=$tmp/$1
	shift
	mkdir -p "$dir"
	make_dirs "$dir"
	start_symbolizer "$dir" "$dir/symbolizer.log" --whole-run || return 1
	start_collector "$dir/collector.log" --socket "$dir/run/opal.sock" --frequency 99 \
		--interval 2 --verbose "$@" || return 1
	# The steady process outlives the collector: its own exit, near a lost
	# event, is rightly found "gone" by the check, which is not the point.
	"$fx" bigframe $((RUN_S + 120)) >"$dir/steady.out" 2>&1 &
	local steady=$!
	sleep 1
	echo "    $name: churn started $(churn "$RUN_S") processes"
	sleep 2
	awk '/^ready / { print $2 }' "$dir/steady.out" >"$dir/steady.pid"
	stop_daemon "$name: collector stops cleanly" "$coll_pid" 30 "$dir/collector.log"
	kill "$steady" 2>/dev/null
	wait "$steady" 2>/dev/null
	wait_log "$dir/symbolizer.log" 'interval [0-9]* \(final\): ' 10
	stop_daemon "$name: symbolizer stops cleanly" "$sym_pid" 60 "$dir/symbolizer.log"
	"$report" stacks "$dir/out/profile.pb.gz" >"$dir/stacks.txt" 2>"$dir/stacks.err" || {
		fail "$name: opal-report stacks" "$(head -n 3 "$dir/stacks.err" | tr '\n' ' ')"
		return 1
	}
	user_stacks "$dir/stacks.txt" "$dir/user.txt"
}

# lost_events LOG: exec/exit events the collector logged as lost.
lost_events() {
	sed -n 's/.* \([0-9]*\) exec\/exit events lost .*/\1/p' "$1" | awk '{ n += $1 } END { print n + 0 }'
}

c='[^\t]*\t'
steady_want="$c(.*;)?stack_big_leaf;stack_big_frame;stack_big_alloca;main;$libc_root"

if profile default; then
	n=$(lost_events "$tmp/default/collector.log")
	if [ "$n" -eq 0 ]; then
		pass "default lifecycle ring: no exec/exit event lost"
	else
		fail "default lifecycle ring: no exec/exit event lost" "$n lost"
	fi
	check_share "default ring: the steady process to _start" "$tmp/default/user.txt" \
		"$(cat "$tmp/default/steady.pid")" "$c(.*;)?stack_big_leaf;.*" "$steady_want" 97
fi

if profile small --lifecycle-buffer 4k; then
	log=$tmp/small/collector.log
	steady=$(cat "$tmp/small/steady.pid")
	n=$(lost_events "$log")
	dropped=$(grep -c 'gone or replaced since it was cached: dropped' "$log")
	if [ "$n" -gt 0 ] && [ "$dropped" -gt 0 ]; then
		pass "4 KiB lifecycle ring: $n events lost, $dropped gone processes dropped"
	else
		fail "4 KiB lifecycle ring: events lost and gone processes dropped" \
			"$n lost, $dropped dropped (the churn did not overflow the ring?)"
	fi
	if grep -q "pid $steady (.*gone or replaced" "$log"; then
		fail "the steady process is never dropped" "$(grep -m 1 "pid $steady (" "$log")"
	else
		pass "the steady process is never dropped"
	fi
	grep 'cached processes were gone or replaced' "$log" | tail -n 2 | sed 's/^/    /'
	check_share "4 KiB ring: the steady process to _start" "$tmp/small/user.txt" "$steady" \
		"$c(.*;)?stack_big_leaf;.*" "$steady_want" 97
fi
finish
