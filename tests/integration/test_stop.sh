#!/usr/bin/env bash
# Stop times (docs/deployment.md, "Stopping"): SIGTERM stops each daemon
# within its 5 s deadline whatever its clients do, with exit status 0 and
# the last interval on disk. The symbolizer: idle; during and right after
# 200 slow HTTP connections; with an upload in progress; with a debuginfod
# download hanging; with an OTLP endpoint that never answers; with a
# stalled collector peer. In each, a collector's final interval sent after
# the SIGTERM is written and acknowledged. The collector: with its
# symbolizer stalled (accepting, never reading) and gone; only these with
# --collector (the kernel matrix's row on 6.1).
# usage: tests/integration/test_stop.sh [--collector] BUILD_DIR   (as root)
set -uo pipefail
. "$(dirname "$0")/lib/common.sh"
only_collector=0
[ "${1:-}" = --collector ] && only_collector=1 && shift
need_build "${1:?usage: test_stop.sh [--collector] BUILD_DIR}"
need_daemons
need_tools python3 curl
[ "$prereq_ok" -eq 1 ] || finish

make_tmp opal-stop
DEADLINE_MS=5000
load=$lib_dir/stop_load.py

# stop_case MODE [SYMBOLIZER_ARG...]: a fresh symbolizer under load MODE
# (stop_load.py), stopped by the load's SIGTERM; checks the stop time, the
# exit status and the final interval.
stop_case() {
	local mode=$1 d=$tmp/$1 ms t0 t1 n
	shift
	mkdir -p "$d"
	launch_symbolizer "$d/sym.log" --socket "$d/s.sock" --state-dir "$d/state" \
		--out-dir "$d/out" --user nobody --http-listen 127.0.0.1:0 --whole-run "$@" || return
	local sym=$sym_pid port
	port=$(http_port "$d/sym.log")
	python3 "$load" run "$mode" "$d/s.sock" "$port" "$sym" "${hang_log:-}" >"$d/load.log" 2>&1 &
	local ld=$!
	if ! wait_log "$d/load.log" '^term_at ' 30 "$ld"; then
		fail "$mode: load set up" "$(tail -n 5 "$d/load.log")"
		kill -TERM "$sym"
		wait "$sym"
		return
	fi
	wait_for_exit "$sym" 60
	t1=$(date +%s%N)
	t0=$(sed -n 's/^term_at //p' "$d/load.log")
	ms=$(((t1 - t0) / 1000000))
	wait "$ld"
	if [ "$wait_rc" -eq 0 ] && [ "$ms" -lt "$DEADLINE_MS" ]; then
		pass "$mode: symbolizer stopped in $ms ms, exit 0"
	else
		fail "$mode: symbolizer stop" "$ms ms, exit status $wait_rc (deadline $DEADLINE_MS ms)"
		show_log symbolizer "$d/sym.log"
	fi
	n=$(find "$d/out/intervals" -name 'interval-*.pb.gz' | wc -l)
	if grep -q "final ack ($((4711)), 2)" "$d/load.log" && [ "$n" -eq 2 ] && [ -s "$d/out/profile.pb.gz" ]; then
		pass "$mode: final interval sent after SIGTERM written and acknowledged ($n interval files, whole-run profile)"
	else
		fail "$mode: final interval" "$n interval files; load: $(tail -n 3 "$d/load.log" | tr '\n' ' ')"
	fi
}

# start_hang NAME: a server that accepts and never answers; sets hang_port
# and hang_log.
start_hang() {
	hang_log=$tmp/$1.hang.log
	python3 "$load" hang "$tmp/$1.port" >"$hang_log" 2>&1 &
	wait_log "$tmp/$1.port" '.' 5
	hang_port=$(cat "$tmp/$1.port")
}

hang_log=
if [ $only_collector -eq 0 ]; then
	stop_case idle
	stop_case slow200
	stop_case slow200-closed
	stop_case upload
	stop_case stalled-peer
	start_hang debuginfod
	sym_env=(DEBUGINFOD_URLS="http://127.0.0.1:$hang_port")
	stop_case debuginfod
	sym_env=()
	start_hang otlp
	stop_case otlp --export pprof,otlp --otlp-endpoint "http://127.0.0.1:$hang_port"
	hang_log=
fi

# ---- the collector ---------------------------------------------------------------------
# stalled: a root listener (trusted) that accepts and never reads; gone:
# nobody listens.
for peer in stalled gone; do
	d=$tmp/coll-$peer
	mkdir -p "$d"
	if [ $peer = stalled ]; then
		python3 - "$d/s.sock" >"$d/peer.log" 2>&1 <<'PY' &
import socket, sys, time
ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
ls.bind(sys.argv[1])
ls.listen(8)
held = []
while True:
    c, _ = ls.accept()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    held.append(c)
    print("accepted", flush=True)
PY
		wait_log "$d/peer.log" '' 1
	fi
	start_collector "$d/coll.log" --socket "$d/s.sock" --frequency 199 --interval 1 || continue
	busy_load 4
	t0=$(date +%s%N)
	kill -TERM "$coll_pid"
	wait_for_exit "$coll_pid" 60
	ms=$((($(date +%s%N) - t0) / 1000000))
	if [ "$wait_rc" -eq 0 ] && [ "$ms" -lt "$DEADLINE_MS" ]; then
		pass "collector with its symbolizer $peer: stopped in $ms ms, exit 0"
	else
		fail "collector with its symbolizer $peer" "$ms ms, exit status $wait_rc (deadline $DEADLINE_MS ms)"
		show_log collector "$d/coll.log"
	fi
done
finish
