#!/usr/bin/env bash
# End-to-end checks of JIT code (docs/jit.md): the real collector (BPF)
# and symbolizer profile the loads of tests/fixtures/jit, and each case
# asserts the stacks through `opal-report stacks` on the whole-run
# profile:
#   - Node.js with --perf-basic-prof --interpreted-frames-native-stack
#     (perf map) and with --perf-prof --interpreted-frames-native-stack
#     (jitdump): opalJitLeaf under opalJitCaller, named, walked on through
#     node's native frames to _start;
#   - Node.js without flags: the same stacks reach _start, the JIT frames
#     unnamed ([jit]+0xOFF);
#   - OpenJDK with -XX:+PreserveFramePointer, its perf map written while
#     it runs (jcmd PID Compiler.perfmap, read by the collector when it
#     appears; jcmd 3 s after it is up): "int Spin.hot(int)" named and
#     walked on to the JVM's native frames (JavaCalls::call_helper, the
#     thread's start);
#   - CPython 3.12 with -X perf: stacks in Python code reach _start
#     through the perf trampolines, which are named (opal_py_leaf under
#     opal_py_caller under <module>).
# usage: tests/integration/test_jit.sh BUILD_DIR   (as root)
# JIT_CASES: the cases to run (default "node nodedump nodeplain java
# python": node is the perf map, nodedump the jitdump; the kernel matrix
# runs fewer under qemu). JIT_MIN_PCT: the share each case
# must reach (default 90). JIT_SECONDS: length of each load (default 8).
# Prints PASS/FAIL per check and ends with "N passed, N failed"; exits
# non-zero on any failure. Missing prerequisites are failures, not skips.
set -uo pipefail

. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/stacks.sh"

CASES=${JIT_CASES:-node nodedump nodeplain java python}
MIN=${JIT_MIN_PCT:-90}
SECS=${JIT_SECONDS:-8}
fx=$repo/tests/fixtures/jit

has_case() { [[ " $CASES " == *" $1 "* ]]; }

# ---- prerequisites ---------------------------------------------------------------
need_build "${1:?usage: test_jit.sh BUILD_DIR}"
need_daemons
need_bins "$report"
[ -r /proc/kallsyms ] || need kallsyms "/proc/kallsyms is not readable"
if has_case node || has_case nodeplain; then
	need_tools node
fi
if has_case java; then
	need_tools java javac jcmd
fi
if has_case python; then
	py312=$(ls -d "$(pyenv root 2>/dev/null || echo /root/.pyenv)"/versions/3.12.*/bin/python3.12 \
		2>/dev/null | head -n 1)
	[ -x "$py312" ] || need python3.12 "no pyenv Python 3.12 (\$(pyenv root)/versions/3.12.*)"
fi
[ "$prereq_ok" -eq 1 ] || finish

# ---- run -------------------------------------------------------------------------------
make_tmp opal-jit
make_dirs "$tmp"
sock=$tmp/run/opal.sock
if has_case java && ! javac -d "$tmp" "$fx/Spin.java" 2>"$tmp/javac.err"; then
	fail "javac Spin.java" "$(head -n 3 "$tmp/javac.err" | tr '\n' ' ')"
	finish
fi
start_symbolizer "$tmp" "$tmp/symbolizer.log" --whole-run || finish
start_collector "$tmp/collector.log" --socket "$sock" --frequency 199 --interval 2 \
	${OPAL_IT_VERBOSE:+--verbose} || finish
coll_start=$(date +%s)

# caught_up: waits (up to 240 s) until the symbolizer has written the
# intervals of the loads: under qemu's emulation it lags far behind the
# collector, which would stop with them unsent.
caught_up() {
	local want=$((($(date +%s) - coll_start) / 2 - 1)) i n
	for ((i = 0; i < 240; i++)); do
		n=$(grep -oE 'interval [0-9]+: ' "$tmp/symbolizer.log" | tail -n 1 | grep -oE '[0-9]+')
		[ "${n:-0}" -ge "$want" ] && return 0
		sleep 1
	done
}

# Each load writes "ready PID" into $tmp/NAME.out; the loads run one after
# the other, so that each has the CPUs it needs to get compiled, and in
# $tmp, where node writes its jitdump and V8 logs.
cd "$tmp" || finish
pid_of() { awk '/^ready / { print $2; exit }' "$tmp/$1.out" 2>/dev/null; }
if has_case node || has_case nodedump || has_case nodeplain; then
	# unchecked: node's unwind table (a 90 MB binary) is built while
	# this one runs, so that the checked runs find it loaded instead of
	# parking their first seconds of samples beyond the parking bound
	node "$fx/spin.js" 3 >"$tmp/warmup.out" 2>&1
fi
if has_case node; then
	node --perf-basic-prof --interpreted-frames-native-stack "$fx/spin.js" "$SECS" \
		>"$tmp/nodemap.out" 2>&1
fi
if has_case nodedump; then
	node --perf-prof --interpreted-frames-native-stack "$fx/spin.js" "$SECS" \
		>"$tmp/nodedump.out" 2>&1
fi
if has_case nodeplain; then
	node "$fx/spin.js" "$SECS" >"$tmp/nodeplain.out" 2>&1
fi
if has_case java; then
	# dontinline: on an idle machine C2 soon inlines hot into caller, and
	# the stack then has no frame of its own for it
	java -XX:+PreserveFramePointer -XX:CompileCommand=quiet \
		-XX:CompileCommand=dontinline,Spin::hot -cp "$tmp" Spin "$((SECS + 5))" \
		>"$tmp/java.out" 2>&1 &
	java_pid=$!
	# the perf map is written while it runs, once its code is compiled
	wait_log "$tmp/java.out" '^ready ' 120 "$java_pid"
	sleep 3
	jpid=$(pid_of java)
	if [ -z "$jpid" ] || ! jcmd "$jpid" Compiler.perfmap >"$tmp/jcmd.out" 2>&1; then
		fail "jcmd Compiler.perfmap" "$(head -n 3 "$tmp/jcmd.out" 2>/dev/null | tr '\n' ' ')"
	fi
	wait "$java_pid"
fi
if has_case python; then
	"$py312" -X perf "$fx/spin.py" "$SECS" >"$tmp/python.out" 2>&1
fi
sleep 0.5
caught_up

stop_daemon "collector stops cleanly" "$coll_pid" 30 "$tmp/collector.log"
wait_log "$tmp/symbolizer.log" 'interval [0-9]* \(final\): ' 10
stop_daemon "symbolizer stops cleanly" "$sym_pid" 60 "$tmp/symbolizer.log"

if ! "$report" stacks "$tmp/out/profile.pb.gz" >"$tmp/stacks.txt" 2>"$tmp/stacks.err"; then
	fail "opal-report stacks" "$(head -n 3 "$tmp/stacks.err" | tr '\n' ' ')"
	finish
fi
user_stacks "$tmp/stacks.txt" "$tmp/user.txt"
# under qemu (tests/kernel/qemu.sh) the guest's /tmp is lost: keep the
# run's folder with the results when a check fails
keep_for_host() {
	if [ "$failed" -gt 0 ] && [ -n "${OPAL_GUEST_RESULTS:-}" ]; then
		cp -r "$tmp" "$OPAL_GUEST_RESULTS/" && echo "$it_name: copied $tmp to $OPAL_GUEST_RESULTS"
	fi
}

# ---- checks ------------------------------------------------------------------------------
c='[^\t]*\t'   # any comm
for v in nodemap nodedump; do
	if { [ $v = nodemap ] && has_case node; } || { [ $v = nodedump ] && has_case nodedump; }; then
		check_share "node ($v): opalJitLeaf named under opalJitCaller, to _start" \
			"$tmp/user.txt" "$(pid_of $v)" "$c(.*;)?opalJitLeaf;.*" \
			"$c(.*;)?opalJitLeaf;opalJitCaller;.*;Builtins_JSEntry;.*;node::Start\(.*;$libc_root" \
			"$MIN"
	fi
done
if has_case nodeplain; then
	check_share "node without flags: JIT frames unnamed, walked through to _start" \
		"$tmp/user.txt" "$(pid_of nodeplain)" "$c.*\[jit\]\+0x[0-9a-f]+;.*" \
		"$c.*\[jit\]\+0x[0-9a-f]+;.*;Builtins_JSEntry;.*;node::Start\(.*;$libc_root" "$MIN"
fi
if has_case java; then
	# named once the perf map is there (jcmd after 3 s, the collector
	# looks every 2 s): a few seconds of samples
	check_share "java: Spin.hot named, walked on to the JVM's native frames" \
		"$tmp/user.txt" "$(pid_of java)" "$c(.*;)?int Spin\.hot\(int\);.*" \
		"$c(.*;)?int Spin\.hot\(int\);(.*;)?JavaCalls::call_helper\(.*;start_thread;__clone3" \
		"$MIN" 20
fi
if has_case python; then
	# once the trampolines are on (not during the interpreter's own
	# start): the innermost evaluation's trampoline named from the perf
	# map, then every frame to _start
	check_share "python 3.12 -X perf: through the named trampolines to _start" \
		"$tmp/user.txt" "$(pid_of python)" "$c(.*;)?_PyEval_EvalFrameDefault;.*;py_trampoline_evaluator;.*" \
		"$c([^;]*;)*_PyEval_EvalFrameDefault;[^[;][^;]*;py_trampoline_evaluator;.*;$libc_root" \
		"$MIN"
	check_share "python 3.12 -X perf: opal_py_leaf under opal_py_caller under <module>, to _start" \
		"$tmp/user.txt" "$(pid_of python)" "$c(.*;)?_PyEval_EvalFrameDefault;opal_py_leaf;py_trampoline_evaluator;.*" \
		"$c(.*;)?_PyEval_EvalFrameDefault;opal_py_leaf;py_trampoline_evaluator;(.*;)?opal_py_caller;py_trampoline_evaluator;(.*;)?<module>;py_trampoline_evaluator;.*;$libc_root" \
		"$MIN" 20
fi
keep_for_host
finish
