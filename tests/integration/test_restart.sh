#!/usr/bin/env bash
# Restart resilience on the real daemons (docs/deployment.md, "Restarts"):
#
# A. kill -9 of the symbolizer, large send buffer: the collector buffers
#    while it is down and re-sends on reconnect. Two more kills land inside
#    the symbolizer's handling of an interval, stopped there with gdb:
#      W1: the interval files are written, the ledger row is not;
#      W2: the ledger row is written, the Ack is not sent.
#    Asserted: every interval seq 1..final of the run is in the ledger and
#    in out/intervals exactly once (W1's is rewritten under the same name,
#    W2's is acknowledged as already written and not written again);
#    intervals_dropped == 0; each file holds exactly the samples the
#    collector put in that interval, and all intervals together hold
#    samples_total - idle - self - lost.
# B. kill -9 of the symbolizer long enough to overflow a 64 KiB send
#    buffer: exactly the oldest unacknowledged intervals are missing, their
#    number equals intervals_dropped (and the collector's own log), every
#    other interval is written once with its exact samples.
# C. kill -9 of the collector and a new one: the symbolizer keeps serving,
#    the new run has a new run_id, nothing is written twice.
#
# usage: tests/integration/test_restart.sh BUILD_DIR   (as root)
# Prints PASS/FAIL per check and "N passed, N failed"; the temp folder is
# kept on failure (and with OPAL_IT_KEEP=1).
set -uo pipefail
export LC_ALL=C   # sort, join and comm agree on the order
. "$(dirname "$0")/lib/common.sh"
need_build "${1:?usage: test_restart.sh BUILD_DIR}"
chain=$build/fixtures/fp/chain
need_daemons
need_bins "$report"
need_fixtures "$chain"
need_tools gdb sqlite3 python3 setpriv
[ "$prereq_ok" -eq 1 ] || finish

make_tmp opal-restart
nobody_uid=$(id -u nobody)
nobody_gid=$(id -g nobody)

# ---- helpers ------------------------------------------------------------------

# kill9 PID...: kill -9 and reap our own children, without bash's
# "Killed" job notice (printed on stderr when it reaps them).
kill9() {
	{
		kill -KILL "$@"
		wait "$@"
	} 2>/dev/null
}

# wait_lines FILE ERE N SECONDS: until FILE has at least N lines matching ERE.
wait_lines() {
	local i c
	for ((i = 0; i < $4 * 10; i++)); do
		c=$(grep -cE "$2" "$1" 2>/dev/null)
		[ "${c:-0}" -ge "$3" ] && return 0
		sleep 0.1
	done
	return 1
}

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Symbolizer log lines: an interval written, and a re-sent one acknowledged.
WRITTEN_RE='^<6>opal-symbolizer: interval [0-9]+( \(final\))?: [0-9]+ samples'
written_seqs() {   # LOG...: seqs whose files were written, one a line
	sed -nE 's/^<6>opal-symbolizer: interval ([0-9]+)( \(final\))?: [0-9]+ samples.*/\1/p' "$@"
}
dup_seqs() {       # LOG...: seqs acknowledged as already written
	sed -nE 's/^<6>opal-symbolizer: interval ([0-9]+) of run [0-9a-f]+ already written.*/\1/p' "$@"
}

# kill_after_next_write LOG: waits for the symbolizer to write one more
# interval, then kill -9s it: its Ack went out before the log line, so
# nothing is in flight. Sets last_seq to that interval's seq.
kill_after_next_write() {
	local n
	n=$(grep -cE "$WRITTEN_RE" "$1")
	wait_lines "$1" "$WRITTEN_RE" $((n + 1)) 10 || return 1
	kill9 "$sym_pid"
	last_seq=$(written_seqs "$1" | tail -n 1)
}

# kill_inside_write MODE: gdb stops the symbolizer in opal_ledger_record for
# the next interval; MODE "before" kills it there (files written, no ledger
# row), "after" lets the call return first (ledger row, no Ack). Sets
# gdb_seq.
kill_inside_write() {
	local extra=() out
	[ "$1" = after ] && extra=(-ex finish)
	{
		out=$(timeout 60 gdb -p "$sym_pid" -batch -nx -ex 'set pagination off' \
			-ex 'break opal_ledger_record' -ex continue -ex 'print seq' "${extra[@]}" \
			-ex kill 2>&1)
		kill -0 "$sym_pid" || wait "$sym_pid"
	} 2>/dev/null
	gdb_seq=$(printf '%s\n' "$out" | sed -nE 's/^\$1 = ([0-9]+)$/\1/p')
	if [ -z "$gdb_seq" ] || kill -0 "$sym_pid" 2>/dev/null; then
		printf '%s\n' "$out" | tail -n 8 | sed 's/^/    gdb: /'
		return 1
	fi
}

# stop_both DIR COLLECTOR_LOG SYMBOLIZER_LOG NAME: SIGTERM to the collector
# (its final interval is written and acknowledged), the collector counters
# of that last interval from /metrics into $DIR/metrics.txt (and its run ID,
# the series' run label, into $DIR/run.txt), then SIGTERM to the
# symbolizer. Sets final_seq.
stop_both() {
	local dir=$1 clog=$2 slog=$3 name=$4
	final_seq=
	stop_daemon "$name: collector stops cleanly on SIGTERM" "$coll_pid" 30 "$clog"
	echo "$run_hex" >"$dir/run.txt"
	final_seq=$(sed -nE 's/^<6>opal-collector: final interval ([0-9]+) acknowledged$/\1/p' "$clog")
	if [ -n "$final_seq" ] && wait_lines "$slog" "interval $final_seq \(final\): " 1 10; then
		pass "$name: final interval $final_seq written and acknowledged"
	else
		fail "$name: final interval written and acknowledged" "no acknowledgement in $clog"
		show_log collector "$clog"
	fi
	python3 -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' \
		"http://127.0.0.1:$port/metrics" >"$dir/metrics.txt" 2>"$dir/metrics.err" ||
		fail "$name: GET /metrics" "$(head -n 2 "$dir/metrics.err" | tr '\n' ' ')"
	stop_daemon "$name: symbolizer stops cleanly on SIGTERM" "$sym_pid" 30 "$slog"
}

metric() {   # DIR NAME: the last collector's counter NAME (opal_collector_NAME_total)
	awk -v n="opal_collector_$2_total" -v r="run=\"$(cat "$1/run.txt")\"" \
		'$1 ~ "^" n "[{]" && index($1, r) { v = $2 } END { print v }' "$1/metrics.txt"
}

# ledger_seqs DIR RUN_HEX: the seqs the ledger holds for that run, one a
# line, ascending. Read as the symbolizer's user, so that SQLite's -shm and
# -wal files stay its own. run_id is stored as a signed 64-bit integer,
# which is what bash arithmetic makes of the hex.
ledger_seqs() {
	setpriv --reuid "$nobody_uid" --regid "$nobody_gid" --clear-groups \
		sqlite3 "$1/state/state.db" \
		"SELECT seq FROM intervals_written WHERE run_id = $((16#$2)) ORDER BY seq"
}
ledger_runs() {   # DIR: number of distinct run IDs in the ledger
	setpriv --reuid "$nobody_uid" --regid "$nobody_gid" --clear-groups \
		sqlite3 "$1/state/state.db" "SELECT COUNT(DISTINCT run_id) FROM intervals_written"
}

# file_seqs DIR SUFFIX: the seq of every interval file with that suffix,
# one a line, sorted (repeats kept).
file_seqs() {
	local f
	for f in "$1"/out/intervals/interval-*"$2"; do
		[ -e "$f" ] || continue
		f=${f##*/interval-}
		f=${f%"$2"}
		echo $((10#${f#*-}))
	done | sort -n
}

# samples_by_file DIR: "seq samples" for every interval profile.
samples_by_file() {
	local f s
	for f in "$1"/out/intervals/interval-*.pb.gz; do
		[ -e "$f" ] || continue
		s=${f%.pb.gz}
		s=${s##*-}
		echo "$((10#$s)) $("$report" top -n 1 "$f" | sed -nE 's/.*total ([0-9]+) samples.*/\1/p' | head -n 1)"
	done | sort -k1,1   # join's order
}

# samples_by_collector LOG: "seq samples" of every interval the collector
# packed (its debug log): CPU samples, which interval-*.pb.gz and
# samples_total count (off-CPU ones go to offcpu-*.pb.gz).
samples_by_collector() {
	sed -nE 's/^<7>opal-collector: interval ([0-9]+)( \(final\))?: ([0-9]+) CPU samples.*/\1 \3/p' "$1" |
		sort -k1,1   # join's order
}

# check_counters DIR CLOG NAME: no sample was dropped anywhere, and all
# intervals the collector packed hold samples_total - idle - self - lost.
check_counters() {
	local dir=$1 clog=$2 name=$3 total idle self lost packed
	total=$(metric "$dir" samples)
	idle=$(metric "$dir" samples_idle)
	self=$(metric "$dir" samples_self)
	lost=$(metric "$dir" samples_lost)
	packed=$(samples_by_collector "$clog" | awk '{ s += $2 } END { print s + 0 }')
	if [ -z "$total" ] || [ -z "$idle" ] || [ -z "$self" ] || [ -z "$lost" ]; then
		fail "$name: collector counters in /metrics" "missing in $dir/metrics.txt"
		return
	fi
	# samples_dropped (aggregation bound) is not in /metrics: the collector
	# logs every such drop, so no log line means none.
	if grep -qE 'sample dropped|aggregation bound reached|interval [0-9]+ lost' "$clog"; then
		fail "$name: no sample dropped by the collector" "$(grep -m1 -E 'sample dropped|aggregation bound|lost:' "$clog")"
	elif [ "$packed" -eq $((total - idle - self - lost)) ] && [ "$packed" -gt 0 ]; then
		pass "$name: intervals hold samples_total - idle - self - lost ($total - $idle - $self - $lost = $packed)"
	else
		fail "$name: intervals hold samples_total - idle - self - lost" \
			"$total - $idle - $self - $lost != $packed packed by the collector"
	fi
}

# check_file_samples DIR CLOG NAME: each written interval file holds exactly
# the samples the collector packed into that interval.
check_file_samples() {
	local diff
	samples_by_collector "$2" >"$1/packed.txt"
	samples_by_file "$1" >"$1/files.txt"
	diff=$(join "$1/files.txt" "$1/packed.txt" | awk '$2 != $3 || NF != 3')
	if [ -z "$diff" ] && [ -s "$1/files.txt" ] &&
		[ "$(wc -l <"$1/files.txt")" -eq "$(join "$1/files.txt" "$1/packed.txt" | wc -l)" ]; then
		pass "$3: every interval file holds the collector's samples of that interval exactly"
	else
		fail "$3: interval files hold the collector's samples" "seq file packed: $(echo "$diff" | head -n 3 | tr '\n' ',')"
	fi
}

seq_list() { seq "$1" "$2" 2>/dev/null; }
compact() { tr '\n' ' ' | sed 's/ $//'; }

port=$(free_port)
# The daemons' arguments in every phase, besides their folder and log.
sym_args=(--keep-intervals 0 --http-listen "127.0.0.1:$port")
coll_args=(--interval 1 --verbose)

# ---- A: symbolizer killed, large buffer; kills inside an interval's write ------
A=$tmp/a
make_dirs "$A"
"$chain" 90 >/dev/null 2>&1 &
chain_pid=$!

phase_a() {
	start_symbolizer "$A" "$A/sym1.log" "${sym_args[@]}" || return
	start_collector "$A/collector.log" --socket "$A/run/opal.sock" "${coll_args[@]}" --frequency 99 || return
	run_a=$run_hex
	if ! wait_lines "$A/sym1.log" "$WRITTEN_RE" 3 30; then
		fail "A: intervals written" "fewer than 3 in 30 s"
		show_log symbolizer "$A/sym1.log"
		return
	fi
	kill_after_next_write "$A/sym1.log" || { fail "A: kill -9 symbolizer" "no interval"; return; }
	local down_seq=$last_seq
	sleep 4   # the collector buffers ~4 intervals meanwhile
	start_symbolizer "$A" "$A/sym2.log" "${sym_args[@]}" || return
	if wait_lines "$A/sym2.log" "$WRITTEN_RE" 6 30; then
		pass "A: collector reconnects after kill -9 of the symbolizer (killed after interval $down_seq)"
	else
		fail "A: collector reconnects after kill -9 of the symbolizer" "restarted symbolizer wrote < 6 intervals in 30 s"
		show_log collector "$A/collector.log"
		return
	fi
	if kill_inside_write before; then
		w1=$gdb_seq
		pass "A: symbolizer killed after writing interval $w1's files, before its ledger row"
	else
		fail "A: kill inside the write (W1)" "gdb did not stop in opal_ledger_record"
		return
	fi
	start_symbolizer "$A" "$A/sym3.log" "${sym_args[@]}" || return
	wait_lines "$A/sym3.log" "$WRITTEN_RE" 2 30 ||
		{ fail "A: restart after W1" "no intervals written"; return; }
	if kill_inside_write after; then
		w2=$gdb_seq
		pass "A: symbolizer killed after interval $w2's ledger row, before its Ack"
	else
		fail "A: kill inside the write (W2)" "gdb did not stop in opal_ledger_record"
		return
	fi
	start_symbolizer "$A" "$A/sym4.log" "${sym_args[@]}" || return
	wait_lines "$A/sym4.log" "$WRITTEN_RE" 3 30 ||
		{ fail "A: restart after W2" "no intervals written"; return; }
	stop_both "$A" "$A/collector.log" "$A/sym4.log" A
}
w1= w2= run_a=
phase_a
kill9 "$chain_pid"

if [ -n "${final_seq:-}" ] && [ -n "$w1" ] && [ -n "$w2" ]; then
	F=$final_seq
	want=$(seq_list 1 "$F" | compact)
	got=$(ledger_seqs "$A" "$run_a" | compact)
	if [ "$got" = "$want" ] && [ "$(ledger_runs "$A")" -eq 1 ]; then
		pass "A: ledger holds run $run_a's seqs 1..$F, each once"
	else
		fail "A: ledger holds seqs 1..$F" "got: $got"
	fi
	for sfx in .pb.gz .otlp.pb; do
		got=$(file_seqs "$A" "$sfx" | compact)
		if [ "$got" = "$want" ]; then
			pass "A: one interval-*$sfx per seq 1..$F"
		else
			fail "A: one interval-*$sfx per seq 1..$F" "got: $got"
		fi
	done
	# Who wrote what: every seq once, except W2's, whose files the killed
	# symbolizer wrote before its ledger row (it never logged them) and
	# which the next one acknowledged as already written.
	logs=("$A"/sym[1-4].log)
	want_written=$(seq_list 1 "$F" | grep -vx "$w2" | compact)
	got=$(written_seqs "${logs[@]}" | sort -n | compact)
	if [ "$got" = "$want_written" ]; then
		pass "A: each interval written once (W1's $w1 rewritten under the same name by the next symbolizer)"
	else
		fail "A: each interval written once" "written: $got"
	fi
	got=$(dup_seqs "${logs[@]}" | compact)
	if [ "$got" = "$w2" ] && [ "$(dup_seqs "$A/sym4.log")" = "$w2" ]; then
		pass "A: re-sent interval $w2 (ledger row, no Ack) acknowledged, not written again"
	else
		fail "A: re-sent interval $w2 acknowledged as already written" "duplicates logged: '$got'"
	fi
	if grep -q "symbolizer connection lost" "$A/collector.log" &&
		[ "$(grep -c 'connected to symbolizer' "$A/collector.log")" -eq 4 ]; then
		pass "A: collector connected 4 times, one per symbolizer"
	else
		fail "A: collector reconnects" "$(grep -c 'connected to symbolizer' "$A/collector.log") connections"
	fi
	d=$(metric "$A" intervals_dropped)
	if [ "$d" = 0 ] && ! grep -q 'send buffer full' "$A/collector.log"; then
		pass "A: intervals_dropped == 0 with the default 16 MiB buffer"
	else
		fail "A: intervals_dropped == 0" "intervals_dropped=$d"
	fi
	check_counters "$A" "$A/collector.log" A
	check_file_samples "$A" "$A/collector.log" A
else
	fail "A: checks" "phase A did not complete"
fi

# ---- B: symbolizer down long enough to overflow a 64 KiB buffer ----------------
B=$tmp/b
make_dirs "$B"
# Two busy processes at 199 Hz: intervals of 5-7 KB (2026-12-02; 15-20
# KB when this test was written), so 64 KiB keeps about 10 of the ~20
# that pile up while the symbolizer is down (an 8 s outage, 11 queued
# intervals, once dropped none).
"$chain" 90 >/dev/null 2>&1 &
chain_pid=$!
"$chain" 90 >/dev/null 2>&1 &
chain2_pid=$!
final_seq=

phase_b() {
	start_symbolizer "$B" "$B/sym1.log" "${sym_args[@]}" || return
	start_collector "$B/collector.log" --socket "$B/run/opal.sock" "${coll_args[@]}" \
		--frequency 199 --buffer-bytes 65536 || return
	run_b=$run_hex
	wait_lines "$B/sym1.log" "$WRITTEN_RE" 2 30 ||
		{ fail "B: intervals written" "fewer than 2 in 30 s"; return; }
	kill_after_next_write "$B/sym1.log" || { fail "B: kill -9 symbolizer" "no interval"; return; }
	down_b=$last_seq
	sleep 20
	start_symbolizer "$B" "$B/sym2.log" "${sym_args[@]}" || return
	if ! wait_lines "$B/sym2.log" "$WRITTEN_RE" 3 30; then
		fail "B: collector reconnects" "restarted symbolizer wrote < 3 intervals in 30 s"
		show_log collector "$B/collector.log"
		return
	fi
	sleep 2
	stop_both "$B" "$B/collector.log" "$B/sym2.log" B
}
run_b= down_b=
phase_b
kill9 "$chain_pid" "$chain2_pid"

if [ -n "${final_seq:-}" ] && [ -n "$down_b" ]; then
	F=$final_seq
	D=$(metric "$B" intervals_dropped)
	# The collector logs each loss: pushed out unsent, or pushed out in
	# flight and then not acknowledged.
	logged=$( (sed -nE 's/.*send buffer full \([0-9]+ bytes\): ([0-9]+) oldest.*/\1/p' "$B/collector.log"
		sed -nE 's/.*: ([0-9]+) intervals pushed out of the full send buffer while in flight are lost.*/\1/p' \
			"$B/collector.log") | awk '{ s += $1 } END { print s + 0 }')
	files=$(file_seqs "$B" .pb.gz)
	dups=$(printf '%s\n' "$files" | uniq -d | compact)
	missing=$(comm -23 <(seq_list 1 "$F" | sort) <(printf '%s\n' "$files" | sort -u) | sort -n | compact)
	n_missing=$(printf '%s' "$missing" | wc -w)
	want_missing=$(seq_list $((down_b + 1)) $((down_b + D)) | compact)
	if [ -n "$D" ] && [ "$D" -gt 0 ]; then
		pass "B: the 64 KiB buffer overflowed while the symbolizer was down ($D intervals dropped)"
	else
		fail "B: the buffer overflowed" "intervals_dropped=${D:-?}: the outage was too short to test drops"
	fi
	if [ -z "$dups" ] && [ "$n_missing" = "${D:-x}" ] && [ "$logged" = "${D:-x}" ]; then
		pass "B: missing intervals ($missing) == intervals_dropped == collector log ($D)"
	else
		fail "B: missing intervals == intervals_dropped" \
			"missing '$missing', intervals_dropped ${D:-?}, logged $logged, written twice '$dups'"
	fi
	if [ "$missing" = "$want_missing" ]; then
		pass "B: the dropped ones are the oldest unacknowledged ($want_missing, after $down_b)"
	else
		fail "B: the dropped ones are the oldest unacknowledged" "missing '$missing', expected '$want_missing'"
	fi
	got=$(ledger_seqs "$B" "$run_b" | compact)
	if [ "$got" = "$(printf '%s\n' "$files" | compact)" ]; then
		pass "B: ledger rows == interval files"
	else
		fail "B: ledger rows == interval files" "ledger: $got"
	fi
	check_counters "$B" "$B/collector.log" B
	check_file_samples "$B" "$B/collector.log" B
	lost=$(samples_by_collector "$B/collector.log" |
		awk -v m=" $missing " 'index(m, " " $1 " ") { s += $2 } END { print s + 0 }')
	in_files=$(awk '{ s += $2 } END { print s + 0 }' "$B/files.txt")
	packed=$(awk '{ s += $2 } END { print s + 0 }' "$B/packed.txt")
	if [ "$in_files" -eq $((packed - lost)) ]; then
		pass "B: files hold all samples but the dropped intervals' ($packed - $lost = $in_files)"
	else
		fail "B: files hold all samples but the dropped intervals'" "$in_files != $packed - $lost"
	fi
else
	fail "B: checks" "phase B did not complete"
fi

# ---- C: collector killed and restarted ------------------------------------------
C=$tmp/c
make_dirs "$C"
"$chain" 60 >/dev/null 2>&1 &
chain_pid=$!
final_seq=

phase_c() {
	start_symbolizer "$C" "$C/sym.log" "${sym_args[@]}" || return
	sym_c=$sym_pid
	start_collector "$C/collector1.log" --socket "$C/run/opal.sock" "${coll_args[@]}" --frequency 99 || return
	run_c1=$run_hex
	wait_lines "$C/sym.log" "$WRITTEN_RE" 3 30 ||
		{ fail "C: intervals written" "fewer than 3 in 30 s"; return; }
	kill9 "$coll_pid"
	start_collector "$C/collector2.log" --socket "$C/run/opal.sock" "${coll_args[@]}" --frequency 99 || return
	run_c2=$run_hex
	if wait_lines "$C/sym.log" 'collector pid [0-9]+ disconnected' 1 10 &&
		wait_lines "$C/sym.log" 'opal-symbolizer: collector connected' 2 30 &&
		kill -0 "$sym_c" 2>/dev/null; then
		pass "C: the symbolizer (pid $sym_c) keeps serving after kill -9 of the collector"
	else
		fail "C: the symbolizer keeps serving" "no second connection"
		show_log symbolizer "$C/sym.log"
		return
	fi
	local n
	n=$(grep -cE "$WRITTEN_RE" "$C/sym.log")
	wait_lines "$C/sym.log" "$WRITTEN_RE" $((n + 3)) 30 ||
		{ fail "C: second collector's intervals" "fewer than 3 written"; return; }
	stop_both "$C" "$C/collector2.log" "$C/sym.log" C
}
run_c1= run_c2= sym_c=
phase_c
kill9 "$chain_pid"

if [ -n "${final_seq:-}" ] && [ -n "$run_c1" ] && [ -n "$run_c2" ]; then
	F=$final_seq
	if [ "$run_c1" != "$run_c2" ]; then
		pass "C: the new collector has a new run_id ($run_c1 -> $run_c2)"
	else
		fail "C: the new collector has a new run_id" "both $run_c1"
	fi
	l1=$(ledger_seqs "$C" "$run_c1")
	k1=$(printf '%s\n' "$l1" | grep -c .)
	l2=$(ledger_seqs "$C" "$run_c2" | compact)
	# The killed run may lose its last, unacknowledged interval, never more
	# than that, and never a gap.
	if [ "$k1" -ge 3 ] && [ "$(printf '%s\n' "$l1" | compact)" = "$(seq_list 1 "$k1" | compact)" ] &&
		[ "$l2" = "$(seq_list 1 "$F" | compact)" ] && [ "$(ledger_runs "$C")" -eq 2 ]; then
		pass "C: ledger: killed run 1..$k1, new run 1..$F, each once"
	else
		fail "C: ledger of both runs" "run 1: $(printf '%s\n' "$l1" | compact); run 2: $l2"
	fi
	want=$( (seq_list 1 "$k1"; seq_list 1 "$F") | sort -n | compact)
	got=$(file_seqs "$C" .pb.gz | compact)
	written=$(written_seqs "$C/sym.log" | sort -n | compact)
	if [ "$got" = "$want" ] && [ "$written" = "$want" ] && [ -z "$(dup_seqs "$C/sym.log")" ]; then
		pass "C: $((k1 + F)) interval files, one per (run, seq), none written twice"
	else
		fail "C: one file per (run, seq)" "files: $got; written: $written"
	fi
	d=$(metric "$C" intervals_dropped)
	[ "$d" = 0 ] && pass "C: intervals_dropped == 0" || fail "C: intervals_dropped == 0" "$d"
else
	fail "C: checks" "phase C did not complete"
fi

finish
