#!/usr/bin/env bash
# Go programs end to end (issue 13): the real collector (BPF) and
# symbolizer profile tests/fixtures/go/gostack, built by Debian's golang-go
# with -ldflags='-s -w' (no DWARF, no .symtab, no .debug_frame: the
# collector unwinds it with the rules of its .gopclntab, the symbolizer
# names it from the same table) and unstripped, and each case asserts the
# stacks in `opal-report stacks --lines` of the whole-run profile:
#   - the worker goroutine: main.mix (inlined, at its line) in main.crunch
#     (at the call site), main.worker, main.main.func2 (the wrapper Go
#     makes of `go worker(out)`), runtime.goexit;
#   - the main goroutine: ... main.spinMain, main.main, runtime.main,
#     runtime.goexit;
#   - every stack of the program ends at a root Go's own traceback ends
#     at (runtime.goexit, runtime.mstart, runtime.rt0_go, runtime.sigtramp);
#   - the unstripped build (DWARF, .debug_frame) gives the same stacks;
#   - `make run` (scripts/run.sh) with the stripped program running names
#     its frames in the top list and the flame graph.
# The expected lines come from the "LINE:" markers of gostack/main.go and
# are checked against `go tool objdump` first.
# usage: tests/integration/test_go.sh BUILD_DIR [--emulated]   (as root)
#   --emulated  under qemu's TCG (the 6.1 row of test_kernels.sh): leaves
#               out the share of samples inside the inlined main.mix (TCG
#               takes interrupts at translated blocks' starts: its samples
#               land on main.crunch's loop head) and the make run part
#               (too few samples in its 6 s), and wants 90% of the stacks
#               at a root instead of 97% (the runtime's start and its
#               thread creation, walked through runtime.systemstack by the
#               frame-pointer guess, take a larger share of the samples)
# Prints PASS/FAIL per check and ends with "N passed, N failed"; exits
# non-zero on any failure. Missing prerequisites are failures, not skips.
# OPAL_IT_KEEP=1 keeps the temp folder (it is always kept on failure).
set -uo pipefail

. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/stacks.sh"

# ---- prerequisites ---------------------------------------------------------------
need_build "${1:?usage: test_go.sh BUILD_DIR [--emulated]}"
emulated=0 root_share=97
[ "${2:-}" = --emulated ] && emulated=1 root_share=90
fx=$build/fixtures/go
need_daemons
need_bins "$report"
need_tools go readelf
need_fixtures "$fx/gostack" "$fx/gostack_stripped"
[ "$prereq_ok" -eq 1 ] || finish
src=$(realpath "$fx/gostack-src/main.go" 2>/dev/null)
[ -r "$src" ] || need fixtures "$src is missing: run 'make fixtures'"
# no DWARF, symbols or CFI anywhere in the stripped build
sections=$(readelf -SW "$fx/gostack_stripped" 2>&1)
if grep -qE '\.(z?debug_|symtab|eh_frame)' <<<"$sections" ||
	! grep -q '\.gopclntab' <<<"$sections"; then
	need fixtures "gostack_stripped has DWARF, .symtab or CFI, or no .gopclntab: $(grep -oE '\.[a-z_.]+' <<<"$sections" | tr '\n' ' ')"
fi
[ "$prereq_ok" -eq 1 ] || finish

marker() {   # marker NAME: the line of "// LINE:NAME" in the fixture's source
	grep -n "// LINE:$1\$" "$src" | cut -d: -f1
}
l_mix=$(marker mix) l_crunch=$(marker crunch) l_worker=$(marker worker)
l_spin=$(marker spinMain) l_main=$(marker main) l_go=$(marker go)
# Go's own tools agree: main.crunch has instructions at mix's line (the
# inlined body) and at its call site
objdump=$(go tool objdump -s '^main\.crunch$' "$fx/gostack" 2>&1)
if grep -q "main.go:$l_mix\s" <<<"$objdump" && grep -q "main.go:$l_crunch\s" <<<"$objdump"; then
	pass "go tool objdump: main.mix inlined into main.crunch at lines $l_mix and $l_crunch"
else
	fail "go tool objdump" "no main.go:$l_mix and main.go:$l_crunch in main.crunch: $(head -5 <<<"$objdump")"
fi

# ---- profile -------------------------------------------------------------------------
make_tmp opal-go
make_dirs "$tmp"
logs=$tmp/logs
mkdir -p "$logs"
sock=$tmp/run/opal.sock
start_symbolizer "$tmp" "$tmp/symbolizer.log" --whole-run || finish
start_collector "$tmp/collector.log" --socket "$sock" --frequency 199 --interval 2 \
	${OPAL_IT_VERBOSE:+--verbose} || finish
"$fx/gostack_stripped" 6 >"$logs/stripped" 2>&1
stripped_rc=$?
"$fx/gostack" 6 >"$logs/unstripped" 2>&1
unstripped_rc=$?
sleep 0.5
stop_daemon "collector stops cleanly" "$coll_pid" 30 "$tmp/collector.log"
wait_log "$tmp/symbolizer.log" 'interval [0-9]* \(final\): ' 10
stop_daemon "symbolizer stops cleanly" "$sym_pid" 60 "$tmp/symbolizer.log"
if [ $stripped_rc -eq 0 ] && [ $unstripped_rc -eq 0 ]; then
	pass "the Go programs ran"
else
	fail "the Go programs" "exit $stripped_rc / $unstripped_rc: $(cat "$logs/stripped" "$logs/unstripped")"
fi

stacks=$tmp/stacks.txt
if ! "$report" stacks --lines "$tmp/out/profile.pb.gz" >"$stacks" 2>"$tmp/stacks.err"; then
	fail "opal-report stacks" "$(head -n 3 "$tmp/stacks.err" | tr '\n' ' ')"
	finish
fi
user_stacks "$stacks" "$tmp/user.txt"
ready_pid() { awk '/^ready / { print $2; exit }' "$logs/$1"; }

# ---- checks ------------------------------------------------------------------------------
# shellcheck disable=SC2016 # the $ is one of the characters escaped
re() { sed 's/[][\.*^$()+?{}|/]/\\&/g' <<<"$1"; }   # ERE for the literal text $1
s=$(re "$src")
any='[^\t]*'
goexit='runtime\.goexit \([^)]*/asm_amd64\.s:[0-9]+\)'
crunch="(main\.mix \($s:$l_mix\);main\.crunch \($s:$l_crunch\)|main\.crunch \($s:[0-9]+\))"
for build_kind in stripped unstripped; do
	pid=$(ready_pid $build_kind)
	check_share "$build_kind: the worker goroutine to runtime.goexit, with files and lines" \
		"$tmp/user.txt" "$pid" "$any\t.*main\.worker .*" \
		"$any\t$crunch;main\.worker \($s:$l_worker\);main\.main\.func2 \($s:$l_go\);$goexit" 90
	[ $emulated -eq 1 ] ||
		check_share "$build_kind: the worker's inlined main.mix as an inline frame at its call site" \
			"$tmp/user.txt" "$pid" "$any\t.*main\.worker .*" \
			"$any\tmain\.mix \($s:$l_mix\);main\.crunch \($s:$l_crunch\);.*" 40
	check_share "$build_kind: the main goroutine to runtime.main and runtime.goexit" \
		"$tmp/user.txt" "$pid" "$any\t.*main\.spinMain .*" \
		"$any\t$crunch;main\.spinMain \($s:$l_spin\);main\.main \($s:$l_main\);runtime\.main \([^)]*/proc\.go:[0-9]+\);$goexit" 90
	# (the shell's samples before the exec left out: comm gostack...)
	check_share "$build_kind: every stack ends at a root of Go's traceback" \
		"$tmp/user.txt" "$pid" "gostack$any\t.*" \
		"$any\t.*runtime\.(goexit|mstart|rt0_go|sigtramp) \([^)]*\)" "$root_share"
done

# The two builds' stacks: the same two most frequent ones (one per
# goroutine), names and lines.
top_stacks() {   # top_stacks PID: the two stacks of PID with the most samples
	awk -F'\t' -v pid="$1" '$1 == pid { n[$4] += $3 } END { for (k in n) print n[k] "\t" k }' \
		"$tmp/user.txt" | sort -t$'\t' -k1,1nr | head -n 2 | cut -f2 | sort
}
ps_=$(ready_pid stripped) pu=$(ready_pid unstripped)
diff_out=$(diff <(top_stacks "$ps_") <(top_stacks "$pu"))
if [ "$(top_stacks "$ps_" | wc -l)" -eq 2 ] && [ -z "$diff_out" ]; then
	pass "stripped and unstripped: the same two most frequent stacks"
else
	fail "stripped and unstripped stacks" "$(head -c 600 <<<"$diff_out")"
fi

[ $emulated -eq 1 ] && finish

# ---- make run -----------------------------------------------------------------------------
# scripts/run.sh as `make run` runs it, with the stripped program as a
# service of this machine: its frames are named in the top list and in
# the flame graph.
"$fx/gostack_stripped" 12 >"$logs/service" 2>&1 &
service=$!
"$repo/scripts/run.sh" --build "$build" --out "$tmp/mr-out" --state "$tmp/mr-var" \
	--duration 6 --frequency 49 --interval 2 >"$tmp/run.out" 2>"$tmp/run.err"
rc=$?
kill "$service" 2>/dev/null
wait "$service" 2>/dev/null
if [ $rc -eq 0 ] && grep -qE ' main\.(mix|crunch)$' "$tmp/run.out"; then
	pass "make run: the stripped Go service's functions in the top list"
else
	fail "make run: top list" "rc=$rc: $(head -25 "$tmp/run.out") $(tail -3 "$tmp/run.err")"
fi
if grep -q 'main\.crunch' "$tmp/mr-out/flamegraph.html" 2>/dev/null &&
	grep -q 'main\.worker' "$tmp/mr-out/flamegraph.html"; then
	pass "make run: the Go frames in flamegraph.html"
else
	fail "make run: flamegraph.html" "no main.crunch / main.worker in $tmp/mr-out/flamegraph.html"
fi
finish
