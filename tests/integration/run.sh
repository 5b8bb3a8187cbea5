#!/usr/bin/env bash
# End-to-end test: real collector (BPF) and symbolizer profiling the
# frame-pointer fixtures of tests/fixtures/fp, checked through
# `opal-report stacks` on the whole-run profile.
# usage: tests/integration/run.sh BUILD_DIR   (as root)
# Prints PASS/FAIL per case and ends with "N passed, N failed"; exits
# non-zero on any failure. Missing prerequisites are failures, not skips.
# OPAL_IT_KEEP=1 keeps the temp folder (it is always kept on failure).
set -uo pipefail

. "$(dirname "$0")/lib/common.sh"

# ---- prerequisites ---------------------------------------------------------
need_build "${1:?usage: run.sh BUILD_DIR}"
fx=$build/fixtures/fp
need_daemons
need_bins "$report"
need_fixtures "$fx/chain" "$fx/libchain.so" "$fx/sysloop"
[ -r /proc/kallsyms ] || need kallsyms "/proc/kallsyms is not readable"
[ "$prereq_ok" -eq 1 ] || finish

# ---- run -----------------------------------------------------------------------
make_tmp opal-it
make_dirs "$tmp"
chmod 0777 "$tmp/state" "$tmp/out"   # run/ stays root's: the collector refuses a socket folder others may write
out=$tmp/out
deldir=$tmp/deleted
mkdir -p "$deldir"
sock=$tmp/run/opal.sock

start_symbolizer "$tmp" "$tmp/symbolizer.log" --whole-run || finish
pass "symbolizer starts"

# The deleted-binary case: a copy of chain and of libchain.so with a few
# bytes appended (so their file IDs differ from the originals' and the
# symbolizer cannot use those), started and deleted before the collector
# runs, so the collector only ever sees " (deleted)" mappings.
cp "$fx/chain" "$deldir/chain-deleted"
cp "$fx/libchain.so" "$deldir/libchain.so"
printf 'opal integration copy %s\n' "$$" >>"$deldir/chain-deleted"
printf 'opal integration copy %s\n' "$$" >>"$deldir/libchain.so"
"$deldir/chain-deleted" 6 >"$tmp/chain-deleted.out" 2>&1 &
del_pid=$!
for _ in $(seq 50); do
	grep -q "$deldir/libchain.so" "/proc/$del_pid/maps" 2>/dev/null && break
	sleep 0.1
done
rm -f "$deldir/chain-deleted" "$deldir/libchain.so"
if grep -q "chain-deleted (deleted)" "/proc/$del_pid/maps" 2>/dev/null &&
	grep -q "libchain.so (deleted)" "/proc/$del_pid/maps" 2>/dev/null; then
	pass "deleted fixture runs from deleted files"
else
	fail "deleted fixture runs from deleted files" "pid $del_pid has no deleted mappings"
fi

start_collector "$tmp/collector.log" --socket "$sock" --frequency 99 --interval 2 || finish
pass "collector starts (BPF available)"

"$fx/chain" 4 >"$tmp/chain.out" 2>&1 &
chain_pid=$!
"$fx/sysloop" 4 >"$tmp/sysloop.out" 2>&1 &
sys_pid=$!

fixtures_ok=1
for spec in "chain:$chain_pid" "sysloop:$sys_pid" "chain-deleted:$del_pid"; do
	wait_for_exit "${spec#*:}" 30
	if [ "$wait_rc" -ne 0 ]; then
		fail "fixture ${spec%%:*} runs" "exit status $wait_rc"
		fixtures_ok=0
	fi
done
[ "$fixtures_ok" -eq 1 ] && pass "fixtures run"
sleep 0.5

stop_daemon "collector stops cleanly on SIGTERM" "$coll_pid" 30 "$tmp/collector.log"
# Give the symbolizer time for the final interval before stopping it.
sleep 1
stop_daemon "symbolizer stops cleanly on SIGTERM" "$sym_pid" 60 "$tmp/symbolizer.log"
cleanup

# ---- output ------------------------------------------------------------------
profile=$out/profile.pb.gz
if [ -s "$profile" ]; then
	pass "whole-run profile written"
else
	fail "whole-run profile written" "$profile is missing or empty"
	show_log symbolizer "$tmp/symbolizer.log"
	finish
fi
if compgen -G "$out/intervals/interval-*.pb.gz" >/dev/null; then
	pass "interval profiles written"
else
	fail "interval profiles written" "no $out/intervals/interval-*.pb.gz"
fi

if "$report" check "$profile" >"$tmp/check.txt" 2>&1; then
	pass "opal-report check"
else
	fail "opal-report check" "$(head -n 3 "$tmp/check.txt" | tr '\n' ' ')"
fi

stacks=$tmp/stacks.txt
if ! "$report" stacks "$profile" >"$stacks" 2>"$tmp/stacks.err"; then
	fail "opal-report stacks" "$(head -n 3 "$tmp/stacks.err" | tr '\n' ' ')"
	finish
fi
pass "opal-report stacks"

# Text symbols of the running kernel, to recognise kernel frames.
awk '$2 ~ /^[tTwW]$/ { print $3 }' /proc/kallsyms | sort -u >"$tmp/kallsyms.txt"

# check_stack PID EXPECTED MIN_PERCENT
# EXPECTED is "leaf;...;main". Passes when some line of PID starts with
# exactly EXPECTED, followed only by frames that are not the fixture's own
# (libc's start code below main), and those lines hold at least
# MIN_PERCENT of the process's samples.
check_stack() {
	local pid=$1 expected=$2 min_pct=$3
	awk -v pid="$pid" -v want="$expected" -v min_pct="$min_pct" '
	BEGIN { n_want = split(want, w, ";"); for (i = 1; i <= n_want; i++) own[w[i]] = 1 }
	{
		if ($1 != "pid=" pid) next
		c = $0; sub(/^.* count=/, "", c); cnt = c + 0
		s = $0; sub(/^[^:]*: /, "", s)
		total += cnt
		n = split(s, f, ";")
		if (n < n_want) next
		for (i = 1; i <= n_want; i++) if (f[i] != w[i]) next
		for (i = n_want + 1; i <= n; i++) if (f[i] in own) next
		good += cnt
	}
	END {
		if (total == 0) { print "no samples of pid " pid; exit 1 }
		if (good == 0) { print "no stack of pid " pid " is exactly " want " (" total " samples)"; exit 1 }
		if (good * 100 < total * min_pct) {
			printf "only %d of %d samples of pid %s have stack %s (want %d%%)\n", good, total, pid, want, min_pct
			exit 1
		}
		printf "%d of %d samples\n", good, total
	}' "$stacks"
}

chain_stack="spin_inline;leaf;level3;level2;level1;main"
if msg=$(check_stack "$chain_pid" "$chain_stack" 70); then
	pass "chain: $chain_stack across libchain.so with inline frame ($msg)"
else
	fail "chain: $chain_stack" "$msg"
	grep "^pid=$chain_pid " "$stacks" | sort -t= -k5 -nr | head -n 5 | sed 's/^/    /'
fi

if msg=$(check_stack "$del_pid" "$chain_stack" 70); then
	pass "deleted binary and library symbolized ($msg)"
else
	fail "deleted binary and library symbolized" "$msg"
	grep "^pid=$del_pid " "$stacks" | sort -t= -k5 -nr | head -n 5 | sed 's/^/    /'
fi

# sysloop: kernel frames (each a kallsyms text symbol) first, then exactly
# read_zero_loop;do_syscalls;main, for most samples.
sys_user="read_zero_loop;do_syscalls;main"
if msg=$(awk -v pid="$sys_pid" -v want="$sys_user" -v ksyms="$tmp/kallsyms.txt" '
	BEGIN {
		while ((getline k < ksyms) > 0) kernel[k] = 1
		n_want = split(want, w, ";")
	}
	{
		if ($1 != "pid=" pid) next
		c = $0; sub(/^.* count=/, "", c); cnt = c + 0
		s = $0; sub(/^[^:]*: /, "", s)
		total += cnt
		n = split(s, f, ";")
		for (u = 1; u <= n && f[u] != w[1]; u++) ;
		if (u == 1 || u > n || u + n_want - 1 > n) next
		for (i = 1; i < u; i++) if (!(f[i] in kernel)) { bad = f[i]; next }
		for (i = 0; i < n_want; i++) if (f[u + i] != w[i + 1]) next
		good += cnt
		if (cnt > best) { best = cnt; bestline = s }
	}
	END {
		if (total == 0) { print "no samples of pid " pid; exit 1 }
		if (good == 0) {
			print "no stack of pid " pid " is <kernel frames>;" want " (" total " samples" \
				(bad != "" ? "; non-kernel frame above the user leaf: " bad : "") ")"
			exit 1
		}
		if (good * 2 < total) {
			printf "only %d of %d samples of pid %s are <kernel>;%s\n", good, total, pid, want
			exit 1
		}
		printf "%d of %d samples, e.g. %s\n", good, total, bestline
	}' "$stacks"); then
	pass "sysloop: kernel frames above the user leaf ($msg)"
else
	fail "sysloop: kernel frames above the user leaf" "$msg"
	grep "^pid=$sys_pid " "$stacks" | sort -t= -k5 -nr | head -n 5 | sed 's/^/    /'
fi

finish
