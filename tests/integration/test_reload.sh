#!/usr/bin/env bash
# SIGHUP on the real daemons, both configured by JSON files (--config):
# - symbolizer (as nobody, sandboxed, so the config file's folder must stay
#   readable under Landlock): a new file turns on "profiles as logs" export
#   to the loopback test receiver, lowers keep-intervals and
#   flamegraph-keep, turns on verbose logging, and changes max-open-files
#   (which needs a restart: logged, not applied) and the socket (which the
#   command line sets: flags beat the file, so no change); a broken file
#   changes nothing; the same file again applies nothing; /metrics counts
#   what was exported;
# - collector: the same file reloads nothing; a new file changes the
#   interval (applied: the interval files written afterwards are 2 s apart)
#   and the frequency (needs a restart).
# usage: tests/integration/test_reload.sh BUILD_DIR   (as root)
# Prints PASS/FAIL per case and "N passed, N failed"; missing prerequisites
# are failures. OPAL_IT_KEEP=1 keeps the temp folder (kept on failure).
set -uo pipefail

. "$(dirname "$0")/lib/common.sh"
check() {   # NAME COMMAND...: PASS when the command succeeds
	local name=$1
	shift
	if "$@"; then pass "$name"; else fail "$name" "${why:-check failed}"; fi
	why=
}

need_build "${1:?usage: test_reload.sh BUILD_DIR}"
need_daemons
command -v curl >/dev/null || need curl "curl reads /metrics"
[ "$prereq_ok" -eq 1 ] || finish
need_receiver

make_tmp opal-reload
start_otlp_receiver logs ok || { fail "receiver starts" "$(cat "$tmp/logs.receiver.log")"; finish; }

make_dirs "$tmp"
mkdir -m 0755 "$tmp/conf"
sconf=$tmp/conf/symbolizer.json
cconf=$tmp/conf/collector.json
# Written whole then renamed, as editors and config managers do: the
# running daemon must read the new file (a new inode) on SIGHUP.
put() {   # FILE TEXT
	printf '%s\n' "$2" >"$1.new" && chmod 0644 "$1.new" && mv "$1.new" "$1"
}
put "$sconf" '{"keep-intervals": 100, "flamegraph-keep": 50, "export": ["pprof"],
 "http-listen": "127.0.0.1:0"}'
put "$cconf" '{"interval": 1, "frequency": 99}'

sock=$tmp/run/opal.sock
sym_env=(-u OTEL_EXPORTER_OTLP_ENDPOINT -u OTEL_EXPORTER_OTLP_LOGS_ENDPOINT)
start_symbolizer "$tmp" "$tmp/symbolizer.log" --config "$sconf" || finish
sym=$sym_pid
port=$(http_port "$tmp/symbolizer.log")
check "symbolizer took http-listen from the config file (port $port)" test -n "$port"
start_collector "$tmp/collector.log" --config "$cconf" --socket "$sock" || finish
coll=$coll_pid
timeout 60 bash -c 'while :; do :; done' &
busy=$!
# count_files DIR PATTERN
count_files() { find "$1" -name "$2" 2>/dev/null | wc -l; }
for _ in $(seq 150); do
	[ "$(count_files "$tmp/out/intervals" 'interval-*.pb.gz')" -ge 3 ] && break
	sleep 0.1
done
n=$(count_files "$tmp/out/intervals" 'interval-*.pb.gz')
check "intervals of 1 s written before the reload ($n)" test "$n" -ge 3

# ---- symbolizer: applied and needs-restart changes ------------------------------
put "$sconf" '{"keep-intervals": 2, "flamegraph-keep": 2, "export": ["pprof", "otlp-logs"],
 "otlp-endpoint": "http://127.0.0.1:'"$rcv_port"'", "verbose": true,
 "http-listen": "127.0.0.1:0", "socket": "/tmp/elsewhere.sock", "max-open-files": 64}'
kill -HUP "$sym"
wait_log "$tmp/symbolizer.log" "otlp-logs export to" 10
for want in "SIGHUP: keep-intervals: 100 -> 2" "SIGHUP: flamegraph-keep: 50 -> 2" \
	"SIGHUP: export: pprof -> pprof,otlp-logs" "SIGHUP: verbose: false -> true" \
	"SIGHUP: otlp-endpoint: (none) -> http://127.0.0.1:$rcv_port" \
	"otlp-logs export to http://127.0.0.1:$rcv_port/v1/logs" \
	"SIGHUP: max-open-files changed in the configuration: needs a restart"; do
	why="not in the log: $(grep SIGHUP "$tmp/symbolizer.log" | tail -n 8 | tr '\n' '|')"
	check "symbolizer log: $want" grep -qF -- "$want" "$tmp/symbolizer.log"
done
# two intervals exported after the reload (each also rotates the files)
for _ in $(seq 150); do
	[ "$(grep -c '"path": *"/v1/logs"' "$rcv_log" 2>/dev/null)" -ge 2 ] && break
	sleep 0.1
done
n=$(find "$tmp/out/intervals" -name 'interval-*.pb.gz' | wc -l)
why="$n interval files"
check "keep-intervals 2 applied: $n interval files left" test "$n" -le 2
n=$(find "$tmp/state/recent" -name 'recent-*.pb.gz' | wc -l)
why="$n recent profiles"
check "flamegraph-keep 2 applied: $n recent profiles left" test "$n" -le 2 -a "$n" -ge 1
n=$(grep -c '"path": *"/v1/logs"' "$rcv_log" 2>/dev/null)
why="$n requests at the receiver"
check "otlp-logs export turned on by SIGHUP: $n requests received" test "${n:-0}" -ge 2
why="no debug line after the reload"
check "verbose turned on: debug lines logged" grep -q '^<7>opal-symbolizer' "$tmp/symbolizer.log"
why="$(grep -m1 'SIGHUP: socket' "$tmp/symbolizer.log")"
check "socket: the flag beats the file, so nothing changed" test -S "$sock" -a -z "$why"
metrics=$(curl -s "http://127.0.0.1:$port/metrics")
sent=$(sed -n 's/^opal_export_requests_total{exporter="otlp-logs",outcome="sent"} \([0-9]*\)$/\1/p' <<<"$metrics")
why="sent='$sent'"
check "/metrics counts the logs exporter's requests (sent $sent)" test "${sent:-0}" -ge 1

# ---- broken and unchanged files --------------------------------------------------
cp "$sconf" "$tmp/conf/good.json"
put "$sconf" '{"keep-intervals": 7, "otlp-timeout": 0}'
kill -HUP "$sym"
wait_log "$tmp/symbolizer.log" "configuration not reloaded" 5
why="$(grep -m1 'not reloaded' "$tmp/symbolizer.log")"
check "broken file: not reloaded, reason logged" \
	grep -q "SIGHUP: configuration not reloaded, keeping the running one: otlp-timeout: '0' (from config file)" \
	"$tmp/symbolizer.log"
check "broken file: symbolizer still running" kill -0 "$sym"
put "$sconf" "$(cat "$tmp/conf/good.json")"
applied_before=$(grep -c 'SIGHUP: .* -> ' "$tmp/symbolizer.log")
restart_before=$(grep -c 'SIGHUP: max-open-files changed' "$tmp/symbolizer.log")
kill -HUP "$sym"
sleep 1
applied_after=$(grep -c 'SIGHUP: .* -> ' "$tmp/symbolizer.log")
restart_after=$(grep -c 'SIGHUP: max-open-files changed' "$tmp/symbolizer.log")
why="applied lines $applied_before -> $applied_after, restart lines $restart_before -> $restart_after"
check "same file again: nothing applied, max-open-files still reported as needing a restart" \
	test "$applied_after" -eq "$applied_before" -a "$restart_after" -eq $((restart_before + 1))

# ---- collector ---------------------------------------------------------------------
kill -HUP "$coll"
wait_log "$tmp/collector.log" "SIGHUP: nothing to reload" 5
check "collector: unchanged file, nothing to reload" \
	grep -q "SIGHUP: nothing to reload: configuration unchanged" "$tmp/collector.log"
put "$cconf" '{"interval": 2, "frequency": 49}'
kill -HUP "$coll"
wait_log "$tmp/collector.log" "SIGHUP: interval" 5
check "collector log: interval 1 -> 2" grep -q "SIGHUP: interval: 1 -> 2" "$tmp/collector.log"
check "collector log: frequency needs a restart" \
	grep -q "SIGHUP: frequency changed in the configuration: needs a restart" "$tmp/collector.log"
# Three intervals after the reload, so that the last two kept are both of
# the new length.
seq_now=$(find "$tmp/out/intervals" -name 'interval-*.pb.gz' -printf '%f\n' | sort | tail -n 1 |
	sed -n 's/^interval-[0-9]*-0*\([0-9]*\)\.pb\.gz$/\1/p')
for _ in $(seq 200); do
	last=$(find "$tmp/out/intervals" -name 'interval-*.pb.gz' -printf '%f\n' | sort | tail -n 1 |
		sed -n 's/^interval-[0-9]*-0*\([0-9]*\)\.pb\.gz$/\1/p')
	[ -n "$last" ] && [ "$last" -ge $((${seq_now:-0} + 3)) ] && break
	sleep 0.1
done
# The two interval files kept are the last two: 2 s apart now.
mapfile -t starts < <(find "$tmp/out/intervals" -name 'interval-*.pb.gz' -printf '%f\n' | sort |
	sed -n 's/^interval-\([0-9]*\)-.*/\1/p')
gap=0
[ "${#starts[@]}" -eq 2 ] && gap=$(( (10#${starts[1]} - 10#${starts[0]}) / 1000000 ))
why="${#starts[@]} files, ${gap} ms apart"
check "collector intervals are 2 s long after SIGHUP (${gap} ms)" test "$gap" -ge 1800 -a "$gap" -le 2300

kill "$busy" 2>/dev/null
kill -TERM "$coll"
wait_for_exit "$coll" 30
why="exit $wait_rc"
check "collector stops cleanly" test "$wait_rc" -eq 0
sleep 1
kill -TERM "$sym"
wait_for_exit "$sym" 60
why="exit $wait_rc: $(tail -n 3 "$tmp/symbolizer.log")"
check "symbolizer stops cleanly, logging the exporter totals" \
	test "$wait_rc" -eq 0 -a -n "$(grep 'otlp-logs export totals' "$tmp/symbolizer.log")"
check_exit_denials "no seccomp denial" "$tmp/symbolizer.log" 0

kill -TERM "$rcv_pid" 2>/dev/null
wait_for_exit "$rcv_pid" 10
finish
