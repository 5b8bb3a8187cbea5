#!/usr/bin/env bash
# Decompression bombs against the real daemons (docs/deployment.md,
# "Decompression bounds"), built here at test time (never committed) by
# tests/fixtures/bombs/elfbomb.py:
#   xz    a ~640 KB stripped executable whose .gnu_debugdata is xz of 4 GiB of
#         zeros, run while the collector samples (so it passes the file) and
#         uploaded;
#   zlib  an ~800 KB executable whose .debug_info is SHF_COMPRESSED zlib
#         declaring 768 MiB, uploaded;
#   zstd  the same with ELFCOMPRESS_ZSTD, uploaded.
# Checked: the symbolizer's VmHWM stays under the budget (--max-decompress,
# 512 MiB by default) the whole time, intervals keep being written during
# and after, each refusal is counted in /metrics by reason and logged, the
# uploads are refused, and after a symbolizer restart the bomb run again is
# not scanned again: the SQLite cache remembers it (reason "remembered").
# usage: tests/integration/test_decomp_bombs.sh BUILD_DIR   (as root)
set -uo pipefail
. "$(dirname "$0")/lib/common.sh"
need_build "${1:?usage: test_decomp_bombs.sh BUILD_DIR}"
need_daemons
dbg=$build/opal-debuginfo
need_bins "$dbg"
need_tools python3 zstd curl gcc strip
[ "$prereq_ok" -eq 1 ] || finish

budget_kb=$((512 * 1024))   # --max-decompress's default
make_tmp opal-bombs
bombs=$repo/tests/fixtures/bombs
gcc -O2 "$bombs/spin.c" -o "$tmp/spin" && strip --strip-all "$tmp/spin" ||
	{ fail "build spin.c" "gcc or strip failed"; finish; }
python3 "$bombs/elfbomb.py" "$tmp/spin" "$tmp/bomb_xz" xz 4g &&
	python3 "$bombs/elfbomb.py" "$tmp/spin" "$tmp/bomb_zlib" zlib 768m &&
	python3 "$bombs/elfbomb.py" "$tmp/spin" "$tmp/bomb_zstd" zstd 768m ||
	{ fail "build the bombs" "elfbomb.py failed"; finish; }
rm -f "$tmp/spin"
sizes=$(stat -c '%n=%s' "$tmp"/bomb_* | sed "s|$tmp/||" | tr '\n' ' ')
pass "bombs built: $sizes"

make_dirs "$tmp"
sock=$tmp/run/opal.sock

# metric NAME_AND_LABELS: its value in the symbolizer's /metrics (0 when absent).
metric() {
	curl -s "http://127.0.0.1:$port/metrics" |
		awk -v m="$1" '$1 == m { v = $2 } END { print v + 0 }'
}
refused() { metric "opal_debug_decompress_refused_total{reason=\"$1\"}"; }
intervals() { find "$tmp/out/intervals" -name 'interval-*.pb.gz' 2>/dev/null | wc -l; }
hwm_kb() { awk '$1 == "VmHWM:" { print $2 }' "/proc/$sym_pid/status" 2>/dev/null; }

# watch_hwm FILE: records the symbolizer's VmHWM every 0.1 s into FILE
# (the last line is the peak) until killed.
watch_hwm() {
	while kill -0 "$sym_pid" 2>/dev/null; do
		hwm_kb >"$1.tmp" && mv "$1.tmp" "$1"
		sleep 0.1
	done
}

# poll SECONDS CMD...: until CMD succeeds (every 0.2 s); 1 after SECONDS.
poll() {
	local i
	for ((i = 0; i < $1 * 5; i++)); do
		"${@:2}" && return 0
		sleep 0.2
	done
	return 1
}
more_intervals() { [ "$(intervals)" -gt "$1" ]; }
counted() { [ "$(refused "$1")" -ge "$2" ]; }

# --max-debug-memory bounds the sessions of the other files on the machine,
# so that the peak measured is the bombs' (a loaded CI host maps many).
start_sym() {
	start_symbolizer "$tmp" "$tmp/$1" --http-listen 127.0.0.1:0 --max-debug-memory 256m ||
		finish
	port=$(http_port "$tmp/$1")
	watch_hwm "$tmp/hwm" &
	hwm_pid=$!
}

start_sym symbolizer.log
start_collector "$tmp/collector.log" --socket "$sock" --frequency 99 --interval 1 || finish
# The first interval opens every file of the machine: wait for it first.
poll 120 more_intervals 0 || fail "first interval written" "none within 120 s"

# ---- the xz bomb, passed by the collector ------------------------------------
before=$(intervals)
"$tmp/bomb_xz" 8 &
bomb=$!
poll 60 counted over_budget 1
n=$(refused over_budget)
[ "$n" -ge 1 ] && pass "xz bomb passed by the collector: refused, counted ($n over_budget)" ||
	fail "xz bomb refused" "over_budget=$n; $(grep -i 'refused' "$tmp/symbolizer.log" | head -n 3)"
at_refusal=$(intervals)
wait "$bomb"
during=$(intervals)
poll 60 more_intervals "$during"
after=$(intervals)
[ "$during" -gt "$before" ] && [ "$after" -gt "$during" ] &&
	pass "intervals keep being written during and after the xz bomb ($before before, $at_refusal at the refusal, $during at its end, $after after)" ||
	fail "intervals keep being written" "$before before, $during at its end, $after after"
grep -q 'refused before decompression (over budget): section .gnu_debugdata declares 4294967296' \
	"$tmp/symbolizer.log" && pass "the log names the section and its declared size" ||
	fail "refusal logged" "$(grep -i refused "$tmp/symbolizer.log" | head -n 3)"

# ---- uploads: xz, zlib, zstd ------------------------------------------------------
for kind in xz zlib zstd; do
	out=$("$dbg" upload --server "http://127.0.0.1:$port" --type executable "$tmp/bomb_$kind" 2>&1)
	rc=$?
	[ "$rc" -ne 0 ] && grep -q "refused before decompression" <<<"$out" &&
		pass "$kind bomb upload refused: $(grep -o 'refused before decompression[^;]*' <<<"$out" | head -n 1 | cut -c1-110)" ||
		fail "$kind bomb upload refused" "rc=$rc: $out"
done
first=$(refused over_budget)
[ "$first" -ge 4 ] && pass "each refusal counted in /metrics ($first over_budget)" ||
	fail "refusals counted" "over_budget=$first"
sleep 0.3
peak=$(cat "$tmp/hwm")
[ -n "$peak" ] && [ "$peak" -lt "$budget_kb" ] &&
	pass "symbolizer VmHWM ${peak} kB stays under the ${budget_kb} kB budget" ||
	fail "VmHWM under the budget" "VmHWM ${peak:-?} kB, budget $budget_kb kB"

# ---- restart: the refusal is remembered ---------------------------------------------
kill "$hwm_pid" 2>/dev/null
wait "$hwm_pid" 2>/dev/null
stop_daemon "symbolizer stops cleanly" "$sym_pid" 20 "$tmp/symbolizer.log"
start_sym symbolizer2.log
before=$(intervals)
"$tmp/bomb_xz" 4
poll 60 counted remembered 1
poll 60 more_intervals "$(intervals)"
after=$(intervals)
[ "$after" -gt "$before" ] && pass "after the restart intervals are written ($before, $after)" ||
	fail "intervals after the restart" "$before before, $after after"
rem=$(refused remembered) scanned=$(refused over_budget)
[ "$rem" -ge 1 ] && [ "$scanned" -eq 0 ] &&
	pass "after the restart the bomb is not scanned again: remembered=$rem, over_budget=$scanned" ||
	fail "refusal remembered" "remembered=$rem over_budget=$scanned; $(grep -i 'refused\|opened again' "$tmp/symbolizer2.log" | head -n 3)"
grep -q "is not opened again: refused before decompression" "$tmp/symbolizer2.log" &&
	pass "the log says why it is not opened again" ||
	fail "remembered refusal logged" "$(grep -i refused "$tmp/symbolizer2.log" | head -n 3)"
peak=$(cat "$tmp/hwm")
[ -n "$peak" ] && [ "$peak" -lt "$budget_kb" ] &&
	pass "after the restart VmHWM ${peak} kB stays under the budget" ||
	fail "VmHWM after the restart" "VmHWM ${peak:-?} kB"
kill "$hwm_pid" 2>/dev/null
wait "$hwm_pid" 2>/dev/null
stop_daemon "collector stops cleanly" "$coll_pid" 20 "$tmp/collector.log"
final=$(sed -n 's/.*final interval \([0-9]*\) acknowledged.*/\1/p' "$tmp/collector.log")
[ -n "$final" ] && [ "$(intervals)" -eq "$final" ] &&
	pass "every interval of the run is written once ($final)" ||
	fail "every interval written" "final ${final:-not acknowledged}, $(intervals) files"
stop_daemon "symbolizer stops cleanly after the restart" "$sym_pid" 20 "$tmp/symbolizer2.log"
echo "hostile inputs: 3 bombs (xz 4 GiB, zlib and zstd 768 MiB) passed or uploaded 5 times: $first refused, $rem remembered after the restart; VmHWM stayed under ${budget_kb} kB"
finish
