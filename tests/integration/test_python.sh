#!/usr/bin/env bash
# End-to-end checks of Python frames (issue 12): the real collector (BPF)
# and symbolizer profile tests/fixtures/python/workload.py under every
# CPython found, all at once, and each stack the program reports of
# itself (sys._current_frames(), read while the worker spins) must be the
# Python frames of the samples taken there, function, file and line,
# innermost first, between the right native frames and down to the
# thread's root (tests/integration/lib/python_stacks.py):
#   - a call chain with known lines (chain);
#   - Python -> C -> Python: sorted(key=...) and functools.reduce (callback);
#   - three threads with different functions and names, one in zlib
#     without the GIL (threads);
#   - a generator, and an asyncio coroutine chain (generator);
#   - a child forked without exec, and its parent (fork);
#   - a process started before the collector (early).
# Interpreters: Debian's /usr/bin/python3.11 and python3.11d
# (python3.11-dbg), any other /usr/bin/python3.N[d], and every
# $(pyenv root)/versions/*/bin/python3.N, each run directly (not through
# the shim); or, given, only the PYTHONs named. Versions outside 3.8-3.13
# run the chain only and must degrade to native frames: no Python frame,
# no error frame, stacks to _start. The summary line names every version
# passed, failed, unsupported, and each 3.8-3.13 minor not installed (not
# tested).
# usage: tests/integration/test_python.sh BUILD_DIR [--scenarios A,B,...] [PYTHON...]
#        (as root; --scenarios: only those of chain, callback, threads,
#        generator, fork, early: e.g. under tests/kernel/qemu.sh, where each
#        Python process takes seconds to start)
# Prints PASS/FAIL per check and ends with "N passed, N failed"; exits
# non-zero on any failure. Missing prerequisites are failures, not skips.
# OPAL_IT_KEEP=1 keeps the temp folder (it is always kept on failure).
# PY_CPU_S: CPU seconds each worker spins (default 1); PY_MIN_PCT: the
# share of samples that must be exact (default 95).
set -uo pipefail

. "$(dirname "$0")/lib/common.sh"

CPU_S=${PY_CPU_S:-1}
MIN=${PY_MIN_PCT:-95}
SCENARIOS=(chain callback threads generator fork early)

# ---- prerequisites ---------------------------------------------------------------
need_build "${1:?usage: test_python.sh BUILD_DIR [--scenarios A,B,...] [PYTHON...]}"
shift
if [ "${1:-}" = --scenarios ]; then
	IFS=, read -r -a SCENARIOS <<<"${2:?--scenarios needs a list}"
	shift 2
fi
workload=$repo/tests/fixtures/python/workload.py
checker=$lib_dir/python_stacks.py
need_daemons
need_bins "$report"
need_tools python3
[ -r /proc/kallsyms ] || need kallsyms "/proc/kallsyms is not readable"
if [ $# -gt 0 ]; then
	pythons=("$@")
else
	pythons=()
	for p in /usr/bin/python3.11 /usr/bin/python3.11d; do
		[ -x "$p" ] || need "$p" "$p is missing (scripts/install-deps.sh installs python3.11 and python3.11-dbg)"
		pythons+=("$p")
	done
	for p in /usr/bin/python3.*; do
		[[ ${p##*/} =~ ^python3\.[0-9]+d?$ ]] && [ -x "$p" ] || continue
		[[ " ${pythons[*]} " == *" $p "* ]] || pythons+=("$p")
	done
	if command -v pyenv >/dev/null; then
		pyenv_root=$(pyenv root)
	else
		pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
	fi
	for p in "$pyenv_root"/versions/*/bin/python3.*; do
		[[ ${p##*/} =~ ^python3\.[0-9]+$ ]] && [ -x "$p" ] && pythons+=("$p")
	done
fi
[ "$prereq_ok" -eq 1 ] || finish

# ---- the interpreters -------------------------------------------------------------------
make_tmp opal-python
make_dirs "$tmp"
sock=$tmp/run/opal.sock
# interpreters.tsv: INDEX VERSION SUPPORTED(1/0) LABEL PATH, one per interpreter
: >"$tmp/interpreters.tsv"
n=0
for p in "${pythons[@]}"; do
	if ! v=$("$p" -c 'import platform, sys
print(platform.python_version(), int((3, 8) <= sys.version_info[:2] <= (3, 13)))' 2>&1); then
		fail "$p runs" "$v"
		continue
	fi
	case $p in
	/usr/bin/*d) label="Debian $p, debug build" ;;
	/usr/bin/*) label="Debian $p" ;;
	*/versions/*) label="pyenv" ;;
	*) label=$p ;;
	esac
	printf '%d\t%s\t%s\t%s\t%s\n' "$n" "${v% *}" "${v#* }" "$label" "$p" >>"$tmp/interpreters.tsv"
	mkdir -p "$tmp/py/$n"
	n=$((n + 1))
done

# run INDEX SCENARIO: workload.py under interpreter INDEX, in the
# background, its output in $tmp/py/INDEX/SCENARIO.out; pid in pids[].
declare -A pids
run() {
	local path
	path=$(awk -F'\t' -v i="$1" '$1 == i { print $5 }' "$tmp/interpreters.tsv")
	"$path" "$workload" "$tmp/py/$1" "$CPU_S" "$2" >"$tmp/py/$1/$2.out" 2>&1 &
	pids[$1.$2]=$!
}

# started before the collector: each supported interpreter's early run,
# waiting (off CPU) for the up file
if [[ " ${SCENARIOS[*]} " == *" early "* ]]; then
	while IFS=$'\t' read -r i _ supported _; do
		[ "$supported" = 1 ] && run "$i" early
	done <"$tmp/interpreters.tsv"
fi
for k in "${!pids[@]}"; do
	wait_log "$tmp/py/${k%.*}/early.out" '^ready ' 30 "${pids[$k]}" ||
		fail "started before the collector: ${k%.*} ready" "$(head -c 300 "$tmp/py/${k%.*}/early.out")"
done

start=$(date +%s)
start_symbolizer "$tmp" "$tmp/symbolizer.log" --whole-run || finish
# --verbose: the test waits for its "pid N: cpython frames on" lines
start_collector "$tmp/collector.log" --socket "$sock" --frequency 99 --interval 2 --verbose ||
	finish
while IFS=$'\t' read -r i _ supported _; do
	touch "$tmp/py/$i/up"
	if [ "$supported" = 1 ]; then
		for s in "${SCENARIOS[@]}"; do
			[ "$s" = early ] || run "$i" "$s"
		done
	else
		run "$i" chain
	fi
done <"$tmp/interpreters.tsv"

# The handshake of workload.py: each process warmed up is let go once the
# collector has set it up (its samples before that have no Python frames:
# the collector sets a process up from its first sample); every process
# that has spun waits until the collector has read its samples (two more
# intervals) before it may exit.
supported_of() { awk -F'\t' -v i="$1" '$1 == i { print $3 }' "$tmp/interpreters.tsv"; }
declare -A warm_at
let_go() {   # touches go-PID for each warm process the collector set up
	local out dir pid
	for out in "$tmp"/py/*/*.out; do
		dir=${out%/*}
		for pid in $(sed -n 's/^warm \([0-9]*\)$/\1/p' "$out"); do
			[ -e "$dir/go-$pid" ] && continue
			: "${warm_at[$pid]:=$SECONDS}"
			if [ "$(supported_of "${dir##*/}")" = 0 ] ||
				grep -q "pid $pid: cpython frames on" "$tmp/collector.log"; then
				touch "$dir/go-$pid"
			elif [ $((SECONDS - warm_at[$pid])) -ge 60 ]; then
				fail "the collector sets up pid $pid (${out#"$tmp"/py/})" \
					"no 'pid $pid: cpython frames on' within 60 s"
				touch "$dir/go-$pid"
			fi
		done
	done
}
all_spun() {   # every process of every run still running has started and spun
	local k out n
	for k in "${!pids[@]}"; do
		out=$tmp/py/${k%.*}/${k#*.}.out
		kill -0 "${pids[$k]}" 2>/dev/null || continue
		# not started yet (under qemu's emulation a start takes seconds)
		n=$(grep -c '^ready ' "$out")
		[ "$n" -gt 0 ] && [ "$n" -eq "$(grep -c '^spun ' "$out")" ] || return 1
	done
}
echo "$it_name: daemons up, $(grep -c . "$tmp/interpreters.tsv") interpreters started"
limit=$((SECONDS + 300))
until all_spun || [ $SECONDS -ge $limit ]; do
	let_go
	sleep 0.2
done
all_spun || fail "workloads spin" "not all done within 300 s"
echo "$it_name: every workload has spun; waiting for two more intervals"
intervals() { grep -cE 'interval [0-9]+( \(final\))?: [0-9]+ samples' "$tmp/symbolizer.log"; }
n0=$(intervals)
limit=$((SECONDS + 60))
while [ "$(intervals)" -lt $((n0 + 2)) ] && [ $SECONDS -lt $limit ]; do
	sleep 0.2
done
for d in "$tmp"/py/*/; do
	touch "$d/done"
done
for k in "${!pids[@]}"; do
	wait_for_exit "${pids[$k]}" 60
	[ "$wait_rc" -eq 0 ] ||
		fail "workload ${k#*.} under interpreter ${k%.*} exits 0" \
			"exit status $wait_rc: $(tail -c 300 "$tmp/py/${k%.*}/${k#*.}.out")"
done
echo "$it_name: the workloads ran $(($(date +%s) - start)) s"
wait_acked "$tmp/collector.log" 240 "$coll_pid" ||
	fail "the symbolizer catches up before the stop" "not within 240 s"

stop_daemon "collector stops cleanly" "$coll_pid" 30 "$tmp/collector.log"
wait_log "$tmp/symbolizer.log" 'interval [0-9]* \(final\): ' 20
stop_daemon "symbolizer stops cleanly" "$sym_pid" 60 "$tmp/symbolizer.log"

if ! "$report" stacks "$tmp/out/profile.pb.gz" >"$tmp/stacks.txt" 2>"$tmp/stacks.err"; then
	fail "opal-report stacks" "$(head -n 3 "$tmp/stacks.err" | tr '\n' ' ')"
	finish
fi

# ---- checks ------------------------------------------------------------------------------
python3 "$checker" --stacks "$tmp/stacks.txt" --dir "$tmp/py" \
	--interpreters "$tmp/interpreters.tsv" --collector-log "$tmp/collector.log" \
	--min "$MIN" --scenarios "$(IFS=,; echo "${SCENARIOS[*]}")" >"$tmp/checks.txt" 2>&1
report_lines < <(grep -v '^summary: ' "$tmp/checks.txt")
grep '^summary: ' "$tmp/checks.txt" || fail "summary" "the checker printed none"
finish
