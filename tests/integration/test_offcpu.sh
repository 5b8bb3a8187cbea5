#!/usr/bin/env bash
# End-to-end checks of off-CPU profiles (issue 14, docs/offcpu.md): the real
# collector (BPF, --off-cpu at every blocking switch, no rate bound) and symbolizer profile
# tests/fixtures/offcpu, whose thread oc-sleep blocks in nanosleep and
# oc-pipe in a pipe read for known times (the fixture measures them), while
# oc-busy spins:
#   - out/offcpu.pb.gz reads with `go tool pprof` and has sample type off_cpu;
#   - the off-CPU profile shows each blocking thread under its call chain
#     (kernel and user frames) with a value within 10% of the time it
#     measured itself blocked;
#   - oc-busy shows in the CPU profile and not in the off-CPU one;
#   - the OTLP request (to a test receiver, which checks the dictionary
#     rules) holds both sample types; per-interval off-CPU files exist;
#   - --off-cpu-max-rate bounds the blocks recorded per CPU per second
#     (the rest counted in offcpu_capped).
# usage: tests/integration/test_offcpu.sh BUILD_DIR   (as root)
# Prints PASS/FAIL per check and ends with "N passed, N failed"; exits
# non-zero on any failure. Missing prerequisites are failures, not skips.
set -uo pipefail

. "$(dirname "$0")/lib/common.sh"

need_build "${1:?usage: test_offcpu.sh BUILD_DIR}"
fx=$build/fixtures/offcpu
need_daemons
need_bins "$report"
need_fixtures "$fx/offcpu"
need_tools go python3
[ "$prereq_ok" -eq 1 ] || finish
# built on the host already when the kernel matrix runs this under qemu
receiver=$build/tests/otlp-receiver
if [ ! -x "$receiver" ] || [ -n "$(find "$repo/tests/otlp_receiver" -newer "$receiver")" ]; then
	need_receiver
fi

make_tmp opal-offcpu
make_dirs "$tmp"
trap cleanup EXIT
sock=$tmp/run/opal.sock

if ! start_otlp_receiver offcpu ok; then
	fail "receiver starts" "see $tmp/offcpu.receiver.log"
	finish
fi
start_symbolizer "$tmp" "$tmp/symbolizer.log" --whole-run --export pprof,otlp \
	--otlp-endpoint "http://127.0.0.1:$rcv_port" --http-listen 127.0.0.1:0 || finish
port=$(http_port "$tmp/symbolizer.log")
start_collector "$tmp/collector.log" --socket "$sock" --frequency 99 --interval 2 --off-cpu \
	--off-cpu-threshold 1000000 --off-cpu-max-rate 0 ${OPAL_IT_VERBOSE:+--verbose} || finish

# 40 blocks of 50 ms each: 2 s per blocking thread
"$fx/offcpu" 50 40 >"$tmp/fixture.out" 2>&1
fx_pid=$(awk '/^ready / { print $2 }' "$tmp/fixture.out")
sleep_ns=$(awk '/^sleep_ns / { print $2 }' "$tmp/fixture.out")
pipe_ns=$(awk '/^pipe_ns / { print $2 }' "$tmp/fixture.out")
sleep 0.5
stop_daemon "collector stops cleanly" "$coll_pid" 30 "$tmp/collector.log"
wait_log "$tmp/symbolizer.log" 'interval [0-9]* \(final\): ' 10
sleep 2   # the exporter's last request
# the drop counters, shown for a value check that fails
curl -sf "http://127.0.0.1:$port/metrics" | grep -E '^opal_collector_offcpu_[a-z_]+_total' |
	sed -E 's/\{[^}]*\}//; s/^/    /'
# the flame graph page's two views, each linking to the other
fg_get() { curl -sf "http://127.0.0.1:$port/flamegraph?seconds=600$1" -o "$tmp/fg$2.html"; }
if fg_get "&kind=offcpu" off && grep -q 'ns off CPU' "$tmp/fgoff.html" &&
	grep -q 'offcpu_sleep_leaf' "$tmp/fgoff.html" &&
	grep -q '"on-CPU view"' "$tmp/fgoff.html" && fg_get "" cpu &&
	grep -q 'kind=offcpu' "$tmp/fgcpu.html" && grep -q 'offcpu_busy_spin' "$tmp/fgcpu.html"; then
	pass "flame graph page: off-CPU view (ns off CPU) and CPU view link to each other"
else
	fail "flame graph page: both views" "see $tmp/fgoff.html and $tmp/fgcpu.html"
fi
stop_daemon "symbolizer stops cleanly" "$sym_pid" 60 "$tmp/symbolizer.log"
kill "$rcv_pid" 2>/dev/null
wait "$rcv_pid" 2>/dev/null

off=$tmp/out/offcpu.pb.gz
if [ -z "$fx_pid" ] || [ -z "$sleep_ns" ] || [ -z "$pipe_ns" ]; then
	fail "fixture ran" "$(head -c 300 "$tmp/fixture.out")"
	finish
fi
if go tool pprof -raw "$off" >"$tmp/offcpu.raw" 2>"$tmp/pprof.err" &&
	grep -q '^PeriodType: off_cpu nanoseconds' "$tmp/offcpu.raw" &&
	grep -q 'samples/count off_cpu/nanoseconds' "$tmp/offcpu.raw"; then
	pass "go tool pprof reads offcpu.pb.gz (off_cpu/nanoseconds)"
else
	fail "go tool pprof reads offcpu.pb.gz" "$(head -n 3 "$tmp/pprof.err" "$tmp/offcpu.raw" | tr '\n' ' ')"
fi
"$report" stacks "$off" >"$tmp/off.txt" 2>"$tmp/report.err" ||
	fail "opal-report stacks offcpu.pb.gz" "$(head -n 2 "$tmp/report.err")"
"$report" stacks "$tmp/out/profile.pb.gz" >"$tmp/cpu.txt" 2>>"$tmp/report.err" ||
	fail "opal-report stacks profile.pb.gz" "$(head -n 2 "$tmp/report.err")"

# off_value COMM: the off-CPU nanoseconds of the fixture's thread COMM (its
# name is unique), summed over go tool pprof's raw listing of its samples.
off_value() {
	go tool pprof -raw -sample_index=off_cpu -tagfocus="thread_name=$1" "$off" 2>/dev/null |
		awk '/^Samples:/ { on = 1; next } /^Locations/ { on = 0 }
			on && /^ *[0-9]+ +[0-9]+:/ { sub(/:.*/, ""); split($0, v, " "); s += v[2] }
			END { printf "%.0f\n", s }'
}
within() {   # NAME GOT WANT: GOT within 10% of WANT
	if awk -v g="$2" -v w="$3" 'BEGIN { exit !(w > 0 && g >= w * 0.9 && g <= w * 1.1) }'; then
		pass "$1 ($2 ns off CPU, the fixture measured $3)"
	else
		fail "$1" "$2 ns off CPU in the profile, the fixture measured $3 (want within 10%)"
	fi
}
stack_of() {   # NAME COMM USER_ERE FULL_ERE
	# Every off-CPU stack of thread COMM runs through the fixture's user
	# chain USER_ERE, and those matching FULL_ERE (the kernel's blocking
	# path too) hold at least 90% of its samples. The rest is real
	# off-CPU time spent elsewhere in the chain: a page fault waiting for
	# the mmap lock while another thread maps its stack, say.
	local lines verdict
	lines=$(grep -E "^pid=$fx_pid tid=[0-9]+ comm=$2 " "$tmp/off.txt")
	verdict=$(awk -v user="$3" -v full="$4" '
		{ n = $4; sub(/^count=/, "", n); sub(/:$/, "", n); all += n }
		$0 !~ user { bad = bad ? bad : $0 }
		$0 ~ full { hit += n }
		END {
			if (bad != "") print "not through the fixture: " bad
			else if (all == 0 || hit < all * 0.9)
				printf "%d of %d samples on the blocking path\n", hit, all
		}' <<<"$lines")
	if [ -n "$lines" ] && [ -z "$verdict" ]; then
		pass "$1"
	else
		fail "$1" "$(head -c 400 <<<"${verdict:-no off-CPU stack of $2}")"
	fi
}
stack_of "nanosleep: kernel and user chain" oc-sleep \
	';offcpu_sleep_leaf;offcpu_sleep_mid;offcpu_sleep_outer;sleeper;start_thread;' \
	'count=[0-9]+: __schedule;schedule;do_nanosleep;.*;offcpu_sleep_leaf;'
stack_of "pipe read: kernel and user chain" oc-pipe \
	';offcpu_pipe_leaf;offcpu_pipe_outer;reader;start_thread;' \
	'count=[0-9]+: __schedule;schedule;.*pipe_read;vfs_read;.*;offcpu_pipe_leaf;'
within "nanosleep: off-CPU value" "$(off_value oc-sleep)" "$sleep_ns"
within "pipe read: off-CPU value" "$(off_value oc-pipe)" "$pipe_ns"
if grep -qE "^pid=$fx_pid tid=[0-9]+ comm=oc-busy .*offcpu_busy_spin" "$tmp/cpu.txt"; then
	pass "busy thread in the CPU profile"
else
	fail "busy thread in the CPU profile" "no oc-busy stack in offcpu_busy_spin"
fi
# while it spins; its exit may block (under qemu, closing a 9p file in
# do_exit waits for the host), and that wait is off-CPU time
busy_off=$(grep -E "^pid=$fx_pid tid=[0-9]+ comm=oc-busy " "$tmp/off.txt" | grep -v ';do_exit;')
if [ -n "$busy_off" ]; then
	fail "busy thread not in the off-CPU profile" "$(head -n 1 <<<"$busy_off" | head -c 300)"
else
	pass "busy thread not in the off-CPU profile"
fi
n_off=$(find "$tmp/out/intervals" -name 'offcpu-*.pb.gz' | wc -l)
if [ "$n_off" -ge 1 ]; then
	pass "per-interval off-CPU files ($n_off)"
else
	fail "per-interval off-CPU files" "none in $tmp/out/intervals"
fi
report_lines < <(python3 - "$rcv_log" "$fx_pid" <<'PY'
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
pid = int(sys.argv[2])
bad = [r for r in reqs if not r.get("valid", False)]
mine = [r for r in reqs if pid in r.get("pids", [])]
both = [r for r in mine if r.get("samples", 0) > 0 and r.get("off_cpu_samples", 0) > 0]
def check(name, ok, why):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + why))
check("OTLP requests valid", reqs and not bad,
      "%d of %d invalid: %s" % (len(bad), len(reqs), bad[0].get("error", "") if bad else "none"))
check("an OTLP request holds CPU and off-CPU samples of the fixture", both,
      "%d requests name the fixture, none with both sample types" % len(mine))
PY
)

# ---- the rate bound ----------------------------------------------------------------------
# every blocking switch picked, at most 5 recorded per CPU per second: the
# fixture's two threads block 500 times a second each
rm -rf "$tmp/state" "$tmp/out" && make_dirs "$tmp"
start_symbolizer "$tmp" "$tmp/symbolizer2.log" --http-listen 127.0.0.1:0 || finish
port=$(http_port "$tmp/symbolizer2.log")
t0=$(date +%s)
start_collector "$tmp/collector2.log" --socket "$sock" --frequency 20 --interval 2 --off-cpu \
	--off-cpu-threshold 1000000 --off-cpu-max-rate 5 || finish
"$fx/offcpu" 2 1000 >"$tmp/fixture2.out" 2>&1
stop_daemon "collector stops cleanly (rate bound)" "$coll_pid" 30 "$tmp/collector2.log"
elapsed=$(($(date +%s) - t0 + 1))
wait_log "$tmp/symbolizer2.log" 'interval [0-9]* \(final\): ' 10
metric() { curl -sf "http://127.0.0.1:$port/metrics" | awk -v m="opal_collector_$1_total" '$1 ~ "^" m "[{ ]" || $1 == m { s += $NF } END { print s + 0 }'; }
sampled=$(metric offcpu_sampled) capped=$(metric offcpu_capped) full=$(metric offcpu_table_full)
recorded=$((sampled - capped - full))
bound=$((5 * $(nproc) * elapsed))
if [ "$capped" -gt 0 ] && [ "$recorded" -le "$bound" ] && [ "$recorded" -gt 0 ]; then
	pass "--off-cpu-max-rate 5: $recorded of $sampled picked blocks recorded in ${elapsed} s on $(nproc) CPUs (<= $bound), $capped capped"
else
	fail "--off-cpu-max-rate 5 bounds the blocks recorded" \
		"$recorded of $sampled recorded in ${elapsed} s (want 1..$bound), $capped capped"
fi
stop_daemon "symbolizer stops cleanly (rate bound)" "$sym_pid" 30 "$tmp/symbolizer2.log"
finish
