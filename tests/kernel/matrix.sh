#!/usr/bin/env bash
# opal on the running kernel, as one row of the kernel matrix
# (tests/integration/test_kernels.sh runs it on the host and, through
# tests/kernel/qemu.sh, on Debian 12's 6.1 kernel):
#   - the collector refuses to run without root or without its
#     capabilities, saying so;
#   - every BPF program loads, with the verifier's instruction counts
#     (the collector's "BPF programs verified" line) printed;
#   - a 10 s profile of the frame-pointer-less fixture nofp
#     (tests/fixtures/nofp, "spin" through libnofp.so) gives the exact
#     stack, leaf to _start;
#   - processes living 20 ms each (nofp "short", run one after the other)
#     are symbolized: of their samples with a user stack, the share that
#     reaches _start with no "[unknown" frame (in main's chain or still in
#     ld.so, whose outermost frame before main's _start is _dl_start_user:
#     under qemu's emulation most of their life is the loader's) is
#     printed as "short-lived symbolized N%" and must reach SHORT_MIN_PCT
#     (80); tests/integration/test_kernels.sh compares it across kernels;
#   - 40 children forked without exec, 20 ms each, one after the other
#     (nofp "forks"): SHORT_MIN_PCT of their samples with the exact stack
#     to _start (the mappings they inherited, from their exit events);
#   - both daemons stop cleanly (exit 0);
#   - with --lockdown (last: lockdown cannot be lifted), the kernel is put
#     into lockdown=confidentiality and the collector must name it.
# Ends with "summary: Linux RELEASE: ..." and "N passed, N failed".
# usage: tests/kernel/matrix.sh [--lockdown] BUILD_DIR   (as root)
set -uo pipefail

lockdown=0
if [ "${1:-}" = --lockdown ]; then
	lockdown=1
	shift
fi
# shellcheck source=tests/integration/lib/common.sh
. "$(dirname "$0")/../integration/lib/common.sh"
. "$(dirname "$0")/../integration/lib/stacks.sh"

SHORT_MIN_PCT=${SHORT_MIN_PCT:-80}
PROFILE_S=10

need_build "${1:?usage: matrix.sh [--lockdown] BUILD_DIR}"
fx=$build/fixtures/nofp
need_daemons
need_bins "$report"
need_fixtures "$fx/nofp" "$fx/libnofp.so"
need_tools setpriv timeout
[ "$prereq_ok" -eq 1 ] || finish

release=$(uname -r)
started=$(date +%s)
make_tmp opal-matrix
make_dirs "$tmp"
sock=$tmp/run/opal.sock
summary=()

# expect_refusal NAME LOG RE CMD...: CMD (a collector run) must exit 1
# and log a line matching the extended regular expression RE.
expect_refusal() {
	local name=$1 log=$2 re=$3 rc
	shift 3
	timeout 60 "$@" >"$log" 2>&1
	rc=$?
	if [ "$rc" -eq 1 ] && grep -qE -- "$re" "$log"; then
		pass "$name: $(grep -oE -- "$re" "$log" | head -n 1)"
	else
		fail "$name" "exit status $rc, log: $(head -c 400 "$log" | tr '\n' ' ')"
	fi
}

# ---- refusals that need no BPF ----------------------------------------------------
expect_refusal "not root: the collector says it must run as root" "$tmp/nonroot.log" \
	'must run as root: it runs as uid [0-9]+ \(nobody\) without CAP_BPF' \
	setpriv --reuid=nobody --regid=nogroup --clear-groups "$collector" --socket "$sock"
expect_refusal "root without CAP_BPF/CAP_PERFMON/CAP_SYS_ADMIN: the collector names them" \
	"$tmp/nocaps.log" 'runs as root but without CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN' \
	setpriv --bounding-set=-bpf,-perfmon,-sys_admin --inh-caps=-all "$collector" --socket "$sock"

# ---- a profile -------------------------------------------------------------------------
start_symbolizer "$tmp" "$tmp/symbolizer.log" --whole-run || finish
start_collector "$tmp/collector.log" --socket "$sock" --frequency 99 --interval 2 ${OPAL_MATRIX_VERBOSE:+--verbose} || finish
counts=$(sed -nE 's/.*BPF programs verified on Linux [^ ]+ \(instructions processed\): //p' \
	"$tmp/collector.log" | head -n 1)
# opal_mmap runs only where the kernel lacks the VMA iterator, opal_switch
# only with --off-cpu (0 otherwise: not loaded)
if [[ $counts =~ opal_sample\ [1-9][0-9]*,\ (opal_switch\ [0-9]+,\ )?opal_exec\ [1-9][0-9]*,\ opal_mmap\ [0-9]+,\ opal_exit\ [1-9][0-9]*,\ opal_fork\ [1-9][0-9]* ]]; then
	pass "every BPF program loads on Linux $release (verified instructions: $counts)"
else
	fail "every BPF program loads on Linux $release" "no counts line: '$counts'"
fi
summary+=("verified $counts")

"$fx/nofp" spin "$PROFILE_S" 2 >"$tmp/spin.out" 2>&1 &
spin_pid=$!
# processes living 20 ms each, one after the other, on the other CPU
short_end=$(($(date +%s) + PROFILE_S - 1))
: >"$tmp/short.out"
n_short=0
while [ "$(date +%s)" -lt "$short_end" ] && [ "$n_short" -lt 200 ]; do
	"$fx/nofp" short 0.02 >>"$tmp/short.out" 2>&1
	n_short=$((n_short + 1))
done
# children forked without exec, 20 ms each, one after the other
"$fx/nofp" forks 0.02 40 >"$tmp/forks.out" 2>&1
wait "$spin_pid"
spin_rc=$?
sleep 0.5
stop_daemon "collector stops cleanly (exit 0)" "$coll_pid" 60 "$tmp/collector.log"
coll_rc=$wait_rc
wait_log "$tmp/symbolizer.log" 'interval [0-9]* \(final\): ' 30
stop_daemon "symbolizer stops cleanly (exit 0)" "$sym_pid" 60 "$tmp/symbolizer.log"
sym_rc=$wait_rc
summary+=("daemons exit $coll_rc/$sym_rc")
[ "$spin_rc" -eq 0 ] || fail "nofp spin runs" "exit status $spin_rc"

stacks=$tmp/stacks.txt
if ! "$report" stacks "$tmp/out/profile.pb.gz" >"$stacks" 2>"$tmp/stacks.err"; then
	fail "opal-report stacks" "$(head -n 3 "$tmp/stacks.err" | tr '\n' ' ')"
	show_log symbolizer "$tmp/symbolizer.log"
	finish
fi

# user.txt: PID <tab> COMM <tab> COUNT <tab> user frames (leaf first)
user_stacks "$stacks" "$tmp/user.txt"

# share PIDS COMM REGEX: "GOOD TOTAL" samples of PIDS with comm COMM, GOOD
# of them with a user stack matching REGEX (anchored).
share() {
	awk -F'\t' -v pids="$1" -v comm="$2" -v re="^$3\$" '
		BEGIN { n = split(pids, p, " "); for (i = 1; i <= n; i++) want[p[i]] = 1 }
		($1 in want) && $2 == comm { total += $3; if ($4 ~ re) good += $3 }
		END { printf "%d %d\n", good, total }' "$tmp/user.txt"
}
pct() { awk -v g="$1" -v t="$2" 'BEGIN { printf "%.1f", t ? 100 * g / t : 0 }'; }

root='__libc_start_call_main;__libc_start_main_impl;_start'
any='([^;]+;)*'   # callees of the leaf (the vDSO's clock_gettime)
read -r good total < <(share "$(awk '/^ready / { print $2; exit }' "$tmp/spin.out")" nofp \
	"${any}spin_leaf;work;walk_exe;lib_walk;walk_exe;lib_walk;walk_exe;main;$root")
if [ "$total" -ge 100 ] && [ $((good * 100)) -ge $((total * 95)) ]; then
	pass "frame-pointer-less chain through libnofp.so: exact stack to _start ($good of $total samples)"
else
	fail "frame-pointer-less chain through libnofp.so: exact stack to _start" \
		"$good of $total samples (want >= 95% of >= 100)"
fi
summary+=("nofp chain $good/$total exact")

# A process that exits before the collector has read its maps is
# symbolized from the mappings its exit event lists: the VMA iterator's
# (6.7+), or those recorded as it made them (older kernels).
short_pids=$(awk '/^ready / { printf "%s ", $2 }' "$tmp/short.out")
# a complete stack: the program's _start, or ld.so's outermost frame
complete='(^|;)(_start|_dl_start_user)$'
read -r good total < <(awk -F'\t' -v pids="$short_pids" -v complete="$complete" '
	BEGIN { n = split(pids, p, " "); for (i = 1; i <= n; i++) want[p[i]] = 1 }
	($1 in want) && $2 == "nofp" && $4 != "" {
		total += $3
		if ($4 ~ complete && $4 !~ /\[unknown/) good += $3
	}
	END { printf "%d %d\n", good, total }' "$tmp/user.txt")
short_pct=$(pct "$good" "$total")
if [ "$total" -ge 20 ] && [ $((good * 100)) -ge $((total * SHORT_MIN_PCT)) ]; then
	pass "$n_short processes living 20 ms: ${short_pct}% of their samples symbolized to _start ($good of $total, want >= $SHORT_MIN_PCT%)"
else
	fail "$n_short processes living 20 ms symbolized" \
		"${short_pct}% ($good of $total samples; want >= $SHORT_MIN_PCT% of >= 20)"
fi
summary+=("short-lived symbolized ${short_pct}% ($good/$total)")
echo "matrix.sh: short-lived samples not symbolized to _start, by user stack (count, leaf first):"
awk -F'\t' -v pids="$short_pids" -v complete="$complete" 'BEGIN { n = split(pids, p, " "); for (i = 1; i <= n; i++) want[p[i]] = 1 }
	($1 in want) && $4 != "" && ($4 !~ complete || $4 ~ /\[unknown/) { c[$2 " " $4] += $3 }
	END { for (k in c) printf "%8d  %s\n", c[k], substr(k, 1, 150) }' \
	"$tmp/user.txt" | sort -rn | head -n 10

# A child forked without exec that is gone before its maps are read has
# the mappings of its exit event: the VMA iterator's, or (older kernels)
# the copy of its parent's records it got at fork.
read -r good total < <(share "$(awk '/^child / { printf "%s ", $2 }' "$tmp/forks.out")" nofp \
	"${any}spin_leaf;fork_child_spin;do_forks;main;$root")
forks_pct=$(pct "$good" "$total")
if [ "$total" -ge 20 ] && [ $((good * 100)) -ge $((total * SHORT_MIN_PCT)) ]; then
	pass "40 children forked without exec, living 20 ms: ${forks_pct}% of their samples exact to _start ($good of $total, want >= $SHORT_MIN_PCT%)"
else
	fail "40 children forked without exec, living 20 ms: exact to _start" \
		"${forks_pct}% ($good of $total samples; want >= $SHORT_MIN_PCT% of >= 20)"
fi
summary+=("forked children exact ${forks_pct}% ($good/$total)")

# ---- lockdown ----------------------------------------------------------------------------
if [ "$lockdown" -eq 1 ]; then
	lock=/sys/kernel/security/lockdown
	if [ -w "$lock" ] && echo confidentiality >"$lock" 2>/dev/null; then
		expect_refusal "lockdown=confidentiality: the collector names the lockdown" \
			"$tmp/lockdown.log" "the kernel's lockdown \\(confidentiality, $lock\\) refuses bpf_probe_read_kernel" \
			"$collector" --socket "$sock"
	else
		fail "lockdown=confidentiality" "cannot write $lock (no lockdown LSM or securityfs?)"
	fi
fi

# In the guest /tmp dies with it: a failed run's files go to the host.
if [ "$failed" -gt 0 ] && [ -n "${OPAL_GUEST_RESULTS:-}" ]; then
	cp -r "$tmp" "$OPAL_GUEST_RESULTS/" && echo "matrix.sh: copied $tmp to $OPAL_GUEST_RESULTS"
fi
echo "summary: Linux $release: ${summary[0]}; ${summary[2]}; ${summary[3]}; ${summary[4]}; ${summary[1]}; $(($(date +%s) - started)) s"
finish
