#!/usr/bin/env bash
# End-to-end checks of stack shapes the unwinder must walk to _start
# (issue 15): the real collector (BPF) and symbolizer profile the modes of
# tests/fixtures/stack, each as one long run and a series of short runs
# (a process's first samples are finished in userspace over the stack copy
# they carry, while its tables are built: the short runs make those a
# large share), and each case asserts the stacks through `opal-report
# stacks` on the whole-run profile:
#   - a signal handler on an alternate signal stack (sigaltstack,
#     SA_ONSTACK), and the same handler on the thread's own stack;
#   - a 64 KiB frame under a 40,000-byte alloca;
#   - a translation unit without unwind tables (frame pointers on) between
#     functions with CFI;
#   - a binary whose only CFI is its own .debug_frame, so that no FDE
#     covers glibc's _start: the walk ends there, with no error frame.
# usage: tests/integration/test_stack.sh BUILD_DIR   (as root)
# Prints PASS/FAIL per check and ends with "N passed, N failed"; exits
# non-zero on any failure. Missing prerequisites are failures, not skips.
# OPAL_IT_KEEP=1 keeps the temp folder (it is always kept on failure).
# STACK_MIN_PCT: the share each case must reach (default 97).
set -uo pipefail

. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/stacks.sh"

MIN=${STACK_MIN_PCT:-97}
LONG_S=3
SHORT_S=0.4
SHORT_RUNS=6

# ---- prerequisites ---------------------------------------------------------------
need_build "${1:?usage: test_stack.sh BUILD_DIR}"
fx=$build/fixtures/stack/stack
need_daemons
need_bins "$report"
need_fixtures "$fx" "$fx-dfonly"
[ -r /proc/kallsyms ] || need kallsyms "/proc/kallsyms is not readable"
[ "$prereq_ok" -eq 1 ] || finish

# ---- run -------------------------------------------------------------------------------
make_tmp opal-stack
make_dirs "$tmp"
sock=$tmp/run/opal.sock
start_symbolizer "$tmp" "$tmp/symbolizer.log" --whole-run || finish
start_collector "$tmp/collector.log" --socket "$sock" --frequency 199 --interval 2 \
	${OPAL_IT_VERBOSE:+--verbose} || finish

# series NAME PROGRAM MODE: one long run of PROGRAM MODE, then SHORT_RUNS
# short ones; each run's "ready PID" line goes to $tmp/NAME.pids.
series() {
	"$2" "$3" "$LONG_S" >>"$tmp/$1.pids" 2>&1
	for ((i = 0; i < SHORT_RUNS; i++)); do
		"$2" "$3" "$SHORT_S" >>"$tmp/$1.pids" 2>&1
	done
}
series_pids=()
for m in altstack ownstack bigframe nocfi; do
	series "$m" "$fx" "$m" &
	series_pids+=($!)
done
series dfonly "$fx-dfonly" bigframe &
series_pids+=($!)
wait "${series_pids[@]}"
sleep 0.5

stop_daemon "collector stops cleanly" "$coll_pid" 30 "$tmp/collector.log"
wait_log "$tmp/symbolizer.log" 'interval [0-9]* \(final\): ' 10
stop_daemon "symbolizer stops cleanly" "$sym_pid" 60 "$tmp/symbolizer.log"

if ! "$report" stacks "$tmp/out/profile.pb.gz" >"$tmp/stacks.txt" 2>"$tmp/stacks.err"; then
	fail "opal-report stacks" "$(head -n 3 "$tmp/stacks.err" | tr '\n' ' ')"
	finish
fi
user_stacks "$tmp/stacks.txt" "$tmp/user.txt"

# ---- checks ------------------------------------------------------------------------------
pids_of() { awk '/^ready / { printf "%s ", $2 }' "$tmp/$1.pids"; }
c='[^\t]*\t'   # any comm
# A sample can land in the handler's own body, around its call of stack_sig_work.
for m in altstack ownstack; do
	check_share "$m: handler samples to _start" "$tmp/user.txt" "$(pids_of $m)" \
		"$c(.*;)?stack_sig_handler;.*" \
		"$c(.*;)?(stack_sig_work;)?stack_sig_handler;__restore_rt;.*;$libc_root" \
		"$MIN"
	check_share "$m: interrupted loop to _start" "$tmp/user.txt" "$(pids_of $m)" \
		"$c(.*;)?stack_sig_loop;.*" "$c(.*;)?stack_sig_loop;(signal_mode;)?main;$libc_root" "$MIN"
done
check_share "64 KiB frame under alloca: to _start" "$tmp/user.txt" "$(pids_of bigframe)" \
	"$c(.*;)?stack_big_leaf;.*" \
	"$c(.*;)?stack_big_leaf;stack_big_frame;stack_big_alloca;main;$libc_root" "$MIN"
check_share "unit without unwind tables: frame pointers, to _start" "$tmp/user.txt" \
	"$(pids_of nocfi)" "$c(.*;)?stack_nocfi_mid;.*" \
	"$c(.*;)?(stack_cfi_leaf|stack_nocfi_leaf);stack_nocfi_mid;stack_cfi_outer;main;$libc_root" \
	"$MIN"
check_share "CFI only in .debug_frame, none for _start: ends at _start" "$tmp/user.txt" \
	"$(pids_of dfonly)" "$c(.*;)?stack_big_leaf;.*" \
	"$c(.*;)?stack_big_leaf;stack_big_frame;stack_big_alloca;main;$libc_root" "$MIN"
finish
