#!/usr/bin/env bash
# End-to-end test of the DWARF unwinder (docs/unwinding.md): the real
# collector (BPF) and symbolizer profile the frame-pointer-less fixtures of
# tests/fixtures/nofp (one mode per unwinding case), processes in every
# lifecycle situation, Debian's python3.11, gzip and xz, and the
# frame-pointer fallback on tests/fixtures/unwind_fp (files without any
# CFI). Each case asserts the exact expected stack (leaf to _start) through
# `opal-report stacks`; the collector's counters come from the symbolizer's
# /metrics.
# usage: tests/integration/test_unwind.sh BUILD_DIR   (as root)
# Prints PASS/FAIL per case and ends with "N passed, N failed"; exits
# non-zero on any failure. Missing prerequisites are failures, not skips.
# OPAL_IT_KEEP=1 keeps the temp folder (it is always kept on failure).
set -uo pipefail

. "$(dirname "$0")/lib/common.sh"

# ---- prerequisites ---------------------------------------------------------------
need_build "${1:?usage: test_unwind.sh BUILD_DIR}"
fx=$build/fixtures/nofp
fxfp=$build/fixtures/unwind_fp
python=/usr/bin/python3.11   # Debian's: a python3 earlier on PATH may not be
need_daemons
need_bins "$report"
need_fixtures "$fx/nofp" "$fx/nofp2" "$fx/libnofp.so" "$fx/libnofp_a.so" "$fx/libnofp_b.so" \
	"$fxfp/fpwalk" "$fxfp/libfpwalk.so"
need_tools "$python" /usr/bin/gzip /usr/bin/xz unshare chroot ldd objdump readelf curl
[ -r /proc/kallsyms ] || need kallsyms "/proc/kallsyms is not readable"
[ "$prereq_ok" -eq 1 ] || finish

# ---- setup -------------------------------------------------------------------------
make_tmp opal-unwind
make_dirs "$tmp"
logs=$tmp/logs
mkdir -p "$logs"
sock=$tmp/run/opal.sock

# The pid a fixture printed on its "ready PID IMAGE" line in file $1.
ready_pid() {
	if wait_log "$1" '^ready ' 5; then
		awk '/^ready / { print $2; exit }' "$1"
	else
		echo 0
	fi
}

run_bg() {   # NAME CMD... : runs CMD in the background, output in $logs/NAME
	local name=$1
	shift
	"$@" >"$logs/$name" 2>&1 &
	bg_pids[$name]=$!
}
declare -A bg_pids

# A file to compress, written before the collector starts.
head -c 48000000 /dev/urandom >"$tmp/random.bin"

# Copies for the deleted and replaced binaries: a few bytes appended so
# their file IDs differ from the build's.
mkdir -p "$tmp/del" "$tmp/repl"
cp "$fx/nofp" "$fx/libnofp.so" "$tmp/del/"
printf 'opal unwind copy %s\n' "$$" >>"$tmp/del/nofp"
printf 'opal unwind copy %s\n' "$$" >>"$tmp/del/libnofp.so"
cp "$fx/nofp" "$fx/libnofp.so" "$tmp/repl/"

# A root for chroot: the fixture and the libraries it loads.
croot=$tmp/root
mkdir -p "$croot/lib"
cp "$fx/nofp" "$croot/"
# without /proc in the chroot the loader cannot resolve $ORIGIN: use /lib
cp "$fx/libnofp.so" "$croot/lib/"
ldd "$fx/nofp" | awk '$(NF-1) ~ /^\// { print $(NF-1) } $1 ~ /^\// { print $1 }' | sort -u |
	while read -r lib; do
		mkdir -p "$croot$(dirname "$lib")"
		cp -L "$lib" "$croot$lib"
	done

# ---- symbolizer, processes started before the collector, collector -----------------
start_symbolizer "$tmp" "$tmp/symbolizer.log" --whole-run --http-listen 127.0.0.1:0 || finish
port=$(http_port "$tmp/symbolizer.log")

run_bg before "$fx/nofp" spin 9 1
run_bg deleted "$tmp/del/nofp" spin 9 1
run_bg replaced_old "$tmp/repl/nofp" spin 9 1
for _ in $(seq 50); do
	grep -q "$tmp/del/libnofp.so" "/proc/${bg_pids[deleted]}/maps" 2>/dev/null &&
		grep -q "$tmp/repl/nofp" "/proc/${bg_pids[replaced_old]}/maps" 2>/dev/null && break
	sleep 0.1
done
rm -f "$tmp/del/nofp" "$tmp/del/libnofp.so"
# replaced by rename, as package managers do: the running process keeps
# the old inode, new processes run the new contents
cp "$fx/nofp2" "$tmp/repl/nofp.new"
mv -f "$tmp/repl/nofp.new" "$tmp/repl/nofp"
if grep -q "$tmp/del/nofp (deleted)" "/proc/${bg_pids[deleted]}/maps" &&
	grep -q "$tmp/repl/nofp (deleted)" "/proc/${bg_pids[replaced_old]}/maps"; then
	pass "processes run from a deleted and a replaced binary"
else
	fail "processes run from a deleted and a replaced binary" "no (deleted) mappings"
fi

start_collector "$tmp/collector.log" --socket "$sock" --frequency 99 --interval 2 \
	${OPAL_IT_VERBOSE:+--verbose} || finish
pass "collector starts (BPF program passes the verifier)"

# ---- workloads: two at a time (two CPUs) ------------------------------------------------
pair() {   # runs two fixture commands "NAME:ARGS" and waits for both
	local a
	for a in "$@"; do
		local name=${a%%:*} args=${a#*:}
		# shellcheck disable=SC2086 # ARGS is a word list
		run_bg "$name" $args
	done
	for a in "$@"; do
		wait "${bg_pids[${a%%:*}]}" || echo "test_unwind: ${a%%:*} exited with $?"
	done
}

pair "after:$fx/nofp spin 3 2" "deep200:$fx/nofp spin 3 98"
pair "qsort:$fx/nofp qsort 3 2" "pow:$fx/nofp pow 3 2"
pair "plt:$fx/nofp plt 3" "kinds:$fx/nofp kinds 3"
pair "signal:$fx/nofp signal 3" "rareg:$fx/nofp rareg 3"
pair "vfork:$fx/nofp vfork 3" "fork:$fx/nofp fork 3"
pair "deep300:$fx/nofp deep 3 300" "vdso:$fx/nofp vdso 3"
pair "fpchain:$fxfp/fpwalk chain 3" "fpqsort:$fxfp/fpwalk qsort 3"
pair "exits:$fx/nofp exits 3 64" "fpcalls:$fxfp/fpwalk calls 3"
pair "dlopen:$fx/nofp dlopen 1.5 $fx" "exec:$fx/nofp exec 1.5 $fx/nofp2"
pair "replaced_new:$tmp/repl/nofp spin 3 1" \
	"chroot:unshare --mount --propagation private chroot $croot /nofp spin 3 2"
# processes living 30 ms each
: >"$logs/short"
for _ in $(seq 30); do
	"$fx/nofp" short 0.03 >>"$logs/short" 2>&1
done
run_bg python "$python" -c 'import time
t = time.time()
x = 0
while time.time() - t < 3:
    x += 1'
/usr/bin/gzip -c -9 "$tmp/random.bin" >/dev/null &
gzip_pid=$!
sleep 3
kill "$gzip_pid" 2>/dev/null
wait "${bg_pids[python]}"
wait "$gzip_pid"
/usr/bin/xz -1 -T1 -c "$tmp/random.bin" >/dev/null &
xz_pid=$!
sleep 3
kill "$xz_pid" 2>/dev/null
wait "$xz_pid"
for name in before deleted replaced_old; do
	wait "${bg_pids[$name]}" || echo "test_unwind: $name exited with $?"
done
sleep 0.5

stop_daemon "collector stops cleanly" "$coll_pid" 30 "$tmp/collector.log"
# The collector's counters as of its final interval: /metrics once the
# symbolizer has taken that interval in.
wait_log "$tmp/symbolizer.log" 'interval [0-9]* \(final\): ' 10
curl -s --max-time 10 "http://127.0.0.1:${port:-0}/metrics" >"$tmp/metrics.txt" 2>&1 ||
	fail "GET /metrics" "port '$port': $(head -c 200 "$tmp/metrics.txt")"
kill -TERM "$sym_pid" 2>/dev/null
wait_for_exit "$sym_pid" 60
[ "$wait_rc" -eq 0 ] || fail "symbolizer stops cleanly" "exit status $wait_rc"
cleanup

profile=$tmp/out/profile.pb.gz
stacks=$tmp/stacks.txt
if ! "$report" stacks "$profile" >"$stacks" 2>"$tmp/stacks.err"; then
	fail "opal-report stacks" "$(head -n 3 "$tmp/stacks.err" | tr '\n' ' ')"
	show_log symbolizer "$tmp/symbolizer.log"
	finish
fi

# ---- checks ------------------------------------------------------------------------------
# Kernel frames lead a stack taken in the kernel; the user stack starts at
# the first name that is no kernel text symbol.
awk '$2 ~ /^[tTwW]$/ { print $3 }' /proc/kallsyms | sort -u >"$tmp/kallsyms.txt"
# user.txt: PID <tab> COMM <tab> COUNT <tab> user frames (leaf first)
awk -v ksyms="$tmp/kallsyms.txt" '
	BEGIN { while ((getline k < ksyms) > 0) kernel[k] = 1 }
	{
		pid = $1; sub(/^pid=/, "", pid)
		comm = $3; sub(/^comm=/, "", comm)
		c = $0; sub(/^.* count=/, "", c); cnt = c + 0
		s = $0; sub(/^[^:]*: /, "", s)
		n = split(s, f, ";")
		for (u = 1; u <= n && ((f[u] in kernel) || f[u] ~ / \[[a-z_0-9]+\]$/); u++) ;
		out = ""
		for (i = u; i <= n; i++) out = out (out == "" ? "" : ";") f[i]
		printf "%s\t%s\t%d\t%s\n", pid, comm, cnt, out
	}' "$stacks" >"$tmp/user.txt"

root='__libc_start_call_main;__libc_start_main_impl;_start'

# check NAME PIDS COMM REGEX MIN_PERCENT [MIN_SAMPLES]
# Passes when the samples of PIDS (space-separated; COMM "" = any comm)
# number at least MIN_SAMPLES (default 10) and at least MIN_PERCENT of
# them have a user stack matching the extended regular expression REGEX
# (anchored at both ends).
check() {
	local name=$1 pids=$2 comm=$3 re=$4 min_pct=$5 min_n=${6:-10} msg
	if msg=$(awk -F'\t' -v pids="$pids" -v comm="$comm" -v re="^${re}\$" -v min_pct="$min_pct" \
		-v min_n="$min_n" '
		BEGIN { n = split(pids, p, " "); for (i = 1; i <= n; i++) want[p[i]] = 1 }
		!($1 in want) || (comm != "" && $2 != comm) { next }
		{
			total += $3
			if ($4 ~ re) good += $3
			else if ($3 > worst) { worst = $3; bad = $4 }
		}
		END {
			if (total < min_n) { printf "only %d samples (want %d)", total, min_n; exit 1 }
			if (good * 100 < total * min_pct) {
				printf "%d of %d samples match (want %d%%); most frequent other: %s", good,
					total, min_pct, substr(bad, 1, 600)
				exit 1
			}
			printf "%d of %d samples", good, total
		}' "$tmp/user.txt"); then
		pass "$name ($msg)"
	else
		fail "$name" "$msg"
	fi
}

pid_of() { ready_pid "$logs/$1"; }
links() {   # N: the chain of N lib_walk links, as frames
	local i s=""
	for ((i = 0; i < $1; i++)); do s="${s}walk_exe;lib_walk;"; done
	echo "${s}walk_exe"
}
any='([^;]+;)*'   # frames called by the leaf function (vDSO clock_gettime, ...)

check "started before the collector" "$(pid_of before)" "" "${any}spin_leaf;work;$(links 1);main;$root" 90
check "started after the collector" "$(pid_of after)" "" "${any}spin_leaf;work;$(links 2);main;$root" 90
check "chain of 203 frames across libnofp.so" "$(pid_of deep200)" "" \
	"${any}spin_leaf;work;$(links 98);main;$root" 90
check "qsort comparator called from libc" "$(pid_of qsort)" "" \
	"(cmp_slow;)?(msort_with_tmp;)+__GI___qsort_r;work;$(links 2);main;$root" 90
check "pow() loop in libm" "$(pid_of pow)" "" \
	"(([a-z_0-9]+_inline|asuint64|top12|__ieee754_pow_fma|__pow|pow);)*pow_loop;work;$(links 2);main;$root" 90
# The PLT stub has no symbol: the report names it nofp+0xOFFSET.
plt=$(objdump -h "$fx/nofp" | awk '$2 == ".plt" || $2 == ".plt.sec" { printf "%s%s %s", sep, $4, $3; sep = " " }')
check "PLT stubs (psABI PLT CFA expression) and lib_nop" "$(pid_of plt)" "" \
	"((lib_nop|nofp\\+0x[0-9a-f]+);)?plt_loop;main;$root" 95
if awk -F'\t' -v pid="$(pid_of plt)" -v plt="$plt" '
	function hex(s,   i, v) {
		sub(/^0x/, "", s)
		for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
		return v
	}
	BEGIN { split(plt, a, " "); lo = hex(a[1]); hi = lo + hex(a[2]) }
	$1 == pid && $4 ~ /^nofp\+0x[0-9a-f]+;plt_loop;/ {
		o = $4; sub(/^nofp\+/, "", o); sub(/;.*/, "", o)
		if (hex(o) >= lo && hex(o) < hi) n += $3
	}
	END { exit n > 0 ? 0 : 1 }' "$tmp/user.txt"; then
	pass "samples taken inside PLT stubs unwind"
else
	fail "samples taken inside PLT stubs unwind" "no sample in .plt reached plt_loop;main"
fi
# A sample finished in userspace has only OPAL_STACK_COPY bytes of stack:
# past the 200 KB frame it ends in an explicit truncation frame.
check "alloca, 200 KB frame, realignment, DRAP" "$(pid_of kinds)" "" \
	"${any}spin_leaf;k_drap;k_realign;k_large;(k_alloca;main;$root|\\[truncated stack\\])" 95
check "alloca, 200 KB frame, realignment, DRAP: to _start" "$(pid_of kinds)" "" \
	"${any}spin_leaf;k_drap;k_realign;k_large;k_alloca;main;$root" 70
check "signal handler frame through __restore_rt" "$(pid_of signal)" "" \
	"${any}spin_leaf;sig_spin;on_signal;__restore_rt;sig_interrupted;run_signal;main;$root" 90
check "return address kept in a register" "$(pid_of rareg)" "" \
	"ra_in_reg_spin;ra_caller;main;$root" 90
vfork_parent=$(pid_of vfork)
vfork_child=$(awk -F'\t' -v p="$vfork_parent" '$1 != p && $4 ~ /vfork_child_spin/ { print $1; exit }' \
	"$tmp/user.txt")
check "vfork child" "${vfork_child:-0}" "" "${any}spin_leaf;vfork_child_spin;do_vfork;main;$root" 90
check "fork without exec: parent" "$(pid_of fork)" "" \
	"${any}spin_leaf;fork_parent_spin;do_fork;main;$root" 90
check "fork without exec: child" "$(awk '/^child / { print $2 }' "$logs/fork")" "" \
	"${any}spin_leaf;fork_child_spin;do_fork;main;$root" 90
# Exit paths: once exit_mm() has dropped a process's address space (its
# memory freed in exit_mmap()), a sample is the kernel's stack alone; no
# sample of these children ends in an error frame (docs/unwinding.md).
if msg=$(paste "$stacks" "$tmp/user.txt" | awk -F'\t' \
	-v pids="$(awk '/^child / { print $2 }' "$logs/exits")" '
	BEGIN { n = split(pids, p, " "); for (i = 1; i <= n; i++) want[p[i]] = 1 }
	!($2 in want) { next }
	{
		total += $4
		if ($1 ~ /;exit_mmap;/) {
			freeing += $4
			if ($5 != "") { bad += $4; ex = $1 }
			next
		}
		k = split($5, f, ";")
		if ($5 == "" || f[k] == "_start") next
		bad += $4; ex = $1
	}
	END {
		if (freeing < 3) { printf "%d of %d samples in exit_mmap (want >= 3)", freeing, total; exit 1 }
		if (bad) { printf "%d of %d samples, e.g. %s", bad, total, substr(ex, 1, 600); exit 1 }
		printf "%d of %d samples in exit_mmap", freeing, total
	}'); then
	pass "exit path without an address space: kernel stack only ($msg)"
else
	fail "exit path without an address space: kernel stack only" "$msg"
fi
# 300 recursions: the 256 leaf-most frames, then the truncation frame.
check "recursion 300 deep: 256 frames and a truncation frame" "$(pid_of deep300)" "" \
	"${any}spin_leaf;(recurse;)+\\[truncated stack\\]" 90
# (counted where spin_leaf is the leaf: callees such as clock_gettime may
# stand for several names, one per inline frame)
if awk -F'\t' -v pid="$(pid_of deep300)" '
	$1 == pid && $4 ~ /^spin_leaf;.*\[truncated stack\]$/ {
		if (split($4, f, ";") - 1 != 256) bad++; else good++
	}
	END { exit good > 0 && bad == 0 ? 0 : 1 }' "$tmp/user.txt"; then
	pass "truncated stacks hold exactly 256 user frames"
else
	fail "truncated stacks hold exactly 256 user frames" "$(awk -F'\t' -v pid="$(pid_of deep300)" \
		'$1 == pid && $4 ~ /^spin_leaf;/ { print split($4, f, ";") - 1 }' "$tmp/user.txt" |
		sort -u | tr '\n' ' ')"
fi
check "vDSO frames (the collector's vDSO image)" "$(pid_of vdso)" "" \
	"(__vdso_clock_gettime;)?(__GI___clock_gettime;)?vdso_loop;main;$root" 90
if grep -q $'\t__vdso_clock_gettime;__GI___clock_gettime;vdso_loop' "$tmp/user.txt"; then
	pass "vDSO frames symbolized"
else
	fail "vDSO frames symbolized" "no __vdso_clock_gettime frame"
fi
if grep -q "dl same-address" "$logs/dlopen"; then
	pass "dlclose and another library at the same address"
else
	fail "dlclose and another library at the same address" "$(grep '^dl ' "$logs/dlopen")"
fi
check "dlopen: both libraries' frames" "$(pid_of dlopen)" "" \
	"${any}(dl_a_spin|dl_b_spin);run_dl;run_dlopen;main;$root" 90
for l in a b; do
	if awk -F'\t' -v pid="$(pid_of dlopen)" -v f="dl_${l}_spin;run_dl" '$1 == pid && index($4, f) { n += $3 }
		END { exit n >= 10 ? 0 : 1 }' "$tmp/user.txt"; then
		pass "dlopen: library $l symbolized as its own"
	else
		fail "dlopen: library $l symbolized as its own" "fewer than 10 samples in dl_${l}_spin"
	fi
done
check "exec: before" "$(pid_of exec)" "nofp" "${any}spin_leaf;pre_exec_spin;main;$root" 90
check "exec of another image: after" "$(pid_of exec)" "nofp2" \
	"${any}spin_leaf;work;$(links 3);main;$root" 90
check "deleted binary and library" "$(pid_of deleted)" "" "${any}spin_leaf;work;$(links 1);main;$root" 90
check "replaced binary: the old process" "$(pid_of replaced_old)" "" \
	"${any}spin_leaf;work;$(links 1);main;$root" 90
check "replaced binary: a new process" "$(pid_of replaced_new)" "" \
	"${any}spin_leaf;work;$(links 1);main;$root" 90
check "chroot in another mount namespace" "$(pid_of chroot)" "" \
	"${any}spin_leaf;work;$(links 2);main;$root" 90
short_pids=$(awk '/^ready / { printf "%s ", $2 }' "$logs/short")
# (their comm is nofp once they exec'd; before, they are the shell's fork)
check "30 processes living 30 ms each" "$short_pids" "nofp" "${any}spin_leaf;short_spin;main;$root" 80 15
# static functions: no symbol in the stripped binary, or named (and the
# inline frames of their callers) from python3.11-dbg's debug file
py_static='(python3\.11\+0x[0-9a-f]+|run_eval_code_obj|run_mod);'
py_eval='_PyEval_EvalFrameDefault;(_PyEval_EvalFrame;_PyEval_Vector;)?PyEval_EvalCode'
py_main='PyRun_SimpleStringFlags;(pymain_run_command;pymain_run_python;)?Py_RunMain'
check "python3.11 reaches _start" "${bg_pids[python]}" "" "${any}Py_BytesMain;$root" 95
check "python3.11 pure-Python loop: exact stack" "${bg_pids[python]}" "" \
	"${any}${py_eval};${py_static}${py_static}PyRun_StringFlags;${py_main};Py_BytesMain;$root" 80

# gzip and xz: stripped, so their own frames are FILE+0xOFFSET; the root
# is the return address of _start's call to __libc_start_main.
start_ret() {   # FILE: file offset after the first call in _start (text offset = vaddr)
	local e
	e=$(readelf -h "$1" | awk '/Entry point/ { print $4 }')
	objdump -d --start-address="$e" --stop-address=$((e + 64)) "$1" |
		awk '/\tcall / { getline; sub(/:.*/, ""); gsub(/ /, ""); print "0x" $0; exit }'
}
gz_root="gzip\\+$(start_ret /usr/bin/gzip)"
xz_root="xz\\+$(start_ret /usr/bin/xz)"
check "gzip compressing reaches _start" "$gzip_pid" "" "${any}(gzip\\+0x[0-9a-f]+;)+__libc_start_call_main;__libc_start_main_impl;$gz_root" 95
check "xz compressing reaches _start" "$xz_pid" "" "${any}(xz\\+0x[0-9a-f]+;)+__libc_start_call_main;__libc_start_main_impl;$xz_root" 95

# Never a wrong root: every user stack of a fixture ends at _start, at the
# dynamic loader's entry (process start: _dl_start_user, which runs the
# libraries' initializers, when ld.so is symbolized), or in an explicit
# error frame.
ld_root="ld-linux-x86-64\\.so\\.2\\+0x[0-9a-f]+"
if msg=$(awk -F'\t' -v ld="$ld_root" '
	$2 != "nofp" && $2 != "nofp2" { next }
	$4 == "" { next }   # kernel frames only (kernel threads, inside execve)
	{
		n = split($4, f, ";")
		if (f[n] == "_start" || f[n] == "_dl_start_user" || f[n] ~ "^" ld "$" ||
		    f[n] ~ /^\[/) next
		bad += $3; ex = $4
	}
	END { if (bad) { printf "%d samples, e.g. %s", bad, substr(ex, 1, 400); exit 1 } }' \
	"$tmp/user.txt"); then
	pass "no fixture stack ends anywhere but _start or an error frame"
else
	fail "no fixture stack ends anywhere but _start or an error frame" "$msg"
fi

# ---- frame-pointer fallback: files without any CFI (tests/fixtures/unwind_fp) ----
# fpwalk and libfpwalk.so get no unwind table, so their frames are walked
# with frame pointers; libc's with its DWARF rules; the last step, from
# fpwalk's _start, meets RBP = 0 (the psABI's outermost-frame mark) and
# ends the walk there: no error frame after _start.
fp_chain="fpw_leaf;fpw_exe_inner;fpw_lib_link;fpw_exe_outer;main;$root"
fp_qsort="(fpw_cmp;)?(msort_with_tmp;)+__GI___qsort_r;fpw_sort;main;$root"
check "no CFI: frame pointers through fpwalk and libfpwalk.so, DWARF in libc, to _start" \
	"$(pid_of fpchain)" "fpwalk" "${any}$fp_chain" 90
check "no CFI: comparator called from libc (frame pointers, DWARF, frame pointers)" \
	"$(pid_of fpqsort)" "fpwalk" "$fp_qsort" 90
# A leaf sampled at push %rbp, mov %rsp,%rbp or ret still has its caller's
# RBP: the return address is read at RSP (a plain frame-pointer step would
# skip fpw_calls). fpw_tiny takes a large share of the samples.
check "no CFI: a leaf at its prologue or return keeps its caller" "$(pid_of fpcalls)" "fpwalk" \
	"${any}fpw_calls;main;$root" 95
if msg=$(awk -F'\t' -v pid="$(pid_of fpcalls)" -v re="^fpw_tiny;fpw_calls;main;$root\$" '
	$1 != pid { next }
	{ total += $3; if ($4 ~ re) tiny += $3 }
	END { printf "%d of %d samples", tiny, total; exit tiny * 5 >= total && total > 0 ? 0 : 1 }' \
	"$tmp/user.txt"); then
	pass "no CFI: samples in the four-instruction leaf fpw_tiny ($msg)"
else
	fail "no CFI: samples in the four-instruction leaf fpw_tiny" "$msg, want >= 20%"
fi
# The frame-pointer walk itself must never end in an error frame (before
# the RBP = 0 rule every one of them ended in "no unwind info" after
# _start); a sample taken while the process was not known yet (its first
# instants) may end in "no mapping", at most 1% of them.
if msg=$(awk -F'\t' -v ld="$ld_root" '
	$2 != "fpwalk" || $4 == "" { next }
	{
		n = split($4, f, ";")
		total += $3
		if (f[n] == "_start" || f[n] ~ "^" ld "$") next
		if (f[n] == "[unknown: no mapping]" && n == 1) { early += $3; next }
		bad += $3; ex = $4
	}
	END {
		if (total == 0) { print "no samples"; exit 1 }
		if (bad || early * 100 > total) {
			printf "%d of %d samples end elsewhere, e.g. %s; %d in no mapping", bad, total,
			       substr(ex, 1, 400), early
			exit 1
		}
		printf "%d samples, %d of them taken before the process was known", total, early
	}' "$tmp/user.txt"); then
	pass "no-CFI stacks end at _start, never in an error frame of the walk ($msg)"
else
	fail "no-CFI stacks end at _start, never in an error frame of the walk" "$msg"
fi
# Frames found by frame-pointer steps in the samples above: five in each
# chain stack (fpw_exe_inner, fpw_lib_link, fpw_exe_outer, main and
# __libc_start_call_main), in each qsort stack main and
# __libc_start_call_main, and msort_with_tmp when called from fpw_cmp. The
# collector's frames_fp_fallback counts them (and those of any other
# process without a table), so it is at least their sum.
fp_want=$(awk -F'\t' -v chain="$(pid_of fpchain)" -v qs="$(pid_of fpqsort)" \
	-v re_chain="^${any}${fp_chain}\$" -v re_qsort="^${fp_qsort}\$" '
	$2 != "fpwalk" { next }
	$1 == chain && $4 ~ re_chain { n += 5 * $3 }
	$1 == qs && $4 ~ re_qsort { n += ($4 ~ /^fpw_cmp;/ ? 3 : 2) * $3 }
	END { print n + 0 }' "$tmp/user.txt")
fp_counted=$(awk '$1 ~ /^opal_collector_frames_fp_fallback_total[{]/ { v = $2 } END { print v }' \
	"$tmp/metrics.txt")
if [ -n "$fp_counted" ] && [ "$fp_want" -gt 0 ] && [ "$fp_counted" -ge "$fp_want" ]; then
	pass "frames_fp_fallback counts the frame-pointer frames ($fp_counted >= $fp_want)"
else
	fail "frames_fp_fallback counts the frame-pointer frames" \
		"counter '${fp_counted}' in /metrics, want >= $fp_want (and > 0)"
fi

finish
