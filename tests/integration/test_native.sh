#!/usr/bin/env bash
# End-to-end checks of native cases (issue 15): the real collector (BPF)
# and symbolizer profile tests/fixtures/native, and each case asserts the
# stacks through `opal-report stacks` on the whole-run profile:
#   - a function in a second executable PT_LOAD after a segment whose
#     memory size exceeds its file size (large .bss) is symbolized;
#   - a thread renamed between two phases has each phase's samples under
#     the name it had then;
#   - a binary whose only CFI is the .debug_frame of its separate debug
#     file under /usr/lib/debug/.build-id (installed by this test for the
#     fixture's own build ID, and removed again) unwinds to _start.
# usage: tests/integration/test_native.sh BUILD_DIR   (as root)
# Prints PASS/FAIL per check and ends with "N passed, N failed"; exits
# non-zero on any failure. Missing prerequisites are failures, not skips.
# OPAL_IT_KEEP=1 keeps the temp folder (it is always kept on failure).
set -uo pipefail

. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/stacks.sh"

# ---- prerequisites ---------------------------------------------------------------
need_build "${1:?usage: test_native.sh BUILD_DIR}"
fx=$build/fixtures/native
need_daemons
need_bins "$report"
need_fixtures "$fx/native-text2" "$fx/native" "$fx/native-dfcfi"
[ -r "$fx/native-dfcfi.debug" ] && [ -s "$fx/native-dfcfi.build-id" ] ||
	need fixtures "$fx/native-dfcfi.debug or its build ID is missing: run 'make fixtures'"
[ "$prereq_ok" -eq 1 ] || finish
bid=$(cat "$fx/native-dfcfi.build-id")
dbg_dir=/usr/lib/debug/.build-id/${bid:0:2}
dbg_file=$dbg_dir/${bid:2}.debug
if [ -e "$dbg_file" ]; then
	need debug-file "$dbg_file exists already: not replacing a file this test did not install"
	finish
fi

# ---- setup ---------------------------------------------------------------------------
make_tmp opal-native
make_dirs "$tmp"
logs=$tmp/logs
mkdir -p "$logs"
sock=$tmp/run/opal.sock
made_dirs=()   # the folders this test creates, outermost first
for d in /usr/lib/debug /usr/lib/debug/.build-id "$dbg_dir"; do
	[ -d "$d" ] || made_dirs+=("$d")
done
uninstall_debug() {
	local i
	rm -f "$dbg_file"
	for ((i = ${#made_dirs[@]} - 1; i >= 0; i--)); do
		rmdir "${made_dirs[i]}" 2>/dev/null
	done
}
trap 'cleanup; uninstall_debug' EXIT
mkdir -p "$dbg_dir"
cp "$fx/native-dfcfi.debug" "$dbg_file"

start_symbolizer "$tmp" "$tmp/symbolizer.log" --whole-run || finish
start_collector "$tmp/collector.log" --socket "$sock" --frequency 99 --interval 2 \
	${OPAL_IT_VERBOSE:+--verbose} || finish

declare -A pids
run() {   # NAME CMD...: runs CMD in the background, output in $logs/NAME
	local name=$1
	shift
	"$@" >"$logs/$name" 2>&1 &
	pids[$name]=$!
}
run text2 "$fx/native-text2" text2 4
run dfcfi "$fx/native-dfcfi" dfcfi 4
wait "${pids[text2]}" "${pids[dfcfi]}"
run rename "$fx/native" rename 4
wait "${pids[rename]}"
sleep 0.5

stop_daemon "collector stops cleanly" "$coll_pid" 30 "$tmp/collector.log"
wait_log "$tmp/symbolizer.log" 'interval [0-9]* \(final\): ' 10
stop_daemon "symbolizer stops cleanly" "$sym_pid" 60 "$tmp/symbolizer.log"
uninstall_debug

stacks=$tmp/stacks.txt
if ! "$report" stacks "$tmp/out/profile.pb.gz" >"$stacks" 2>"$tmp/stacks.err"; then
	fail "opal-report stacks" "$(head -n 3 "$tmp/stacks.err" | tr '\n' ' ')"
	finish
fi

# ---- checks ------------------------------------------------------------------------------
user_stacks "$stacks" "$tmp/user.txt"
ready_pid() { awk '/^ready / { print $2; exit }' "$logs/$1"; }
check() { check_share "$1" "$tmp/user.txt" "$2" "$3" "$4" "$5"; }
root=$libc_root

any='[^\t]*'
check "function in a second text segment after a large .bss" "$(ready_pid text2)" "$any\t.*" \
	"$any\tnative_text2_spin;main;$root" 90
check "CFI only in the debug file's .debug_frame: to _start" "$(ready_pid dfcfi)" "$any\t.*" \
	"$any\tnative_df_leaf;native_df_mid;native_df_outer;main;$root" 90
check "renamed thread: first phase under its first name" "$(ready_pid rename)" \
	"$any\tnative_phase_one;.*" "phase-one\tnative_phase_one;.*" 99
check "renamed thread: second phase under its new name" "$(ready_pid rename)" \
	"$any\tnative_phase_two;.*" "phase-two\tnative_phase_two;.*" 99
finish
