#!/usr/bin/env bash
# The flame graph served by the symbolizer: GET /flamegraph?seconds=N[&pid=P]
# on its HTTP API, built from the recent interval profiles it keeps in
# <state-dir>/recent. The real collector (BPF) and symbolizer profile the
# `chain` and `sysloop` fixtures at the same time; then the page (the same
# generator as opal-report flamegraph) must hold both fixtures' frames, and
# with &pid= only that process's frames. Also: bad arguments give 400, a
# window longer than the kept one is clamped and says so, the startup log
# names the URL (no OTLP endpoint configured), and the recent profiles stay
# within --flamegraph-keep.
# usage: tests/integration/test_flamegraph_http.sh BUILD_DIR   (as root)
# Prints PASS/FAIL per case and "N passed, N failed"; missing prerequisites
# are failures. OPAL_IT_KEEP=1 keeps the temp folder (kept on failure).
set -uo pipefail

. "$(dirname "$0")/lib/common.sh"

need_build "${1:?usage: test_flamegraph_http.sh BUILD_DIR}"
fx=$build/fixtures/fp
need_daemons
command -v python3 >/dev/null || need python3 "python3 reads the page's embedded data"
command -v curl >/dev/null || need curl "curl fetches the page"
need_fixtures "$fx/chain" "$fx/sysloop"
[ "$prereq_ok" -eq 1 ] || finish

make_tmp opal-fghttp
make_dirs "$tmp"
# No OTLP endpoint from the caller's environment: the served page is the
# way to see the profiles, and the log says so.
sym_env=(-u OTEL_EXPORTER_OTLP_ENDPOINT -u OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT)
start_symbolizer "$tmp" "$tmp/symbolizer.log" --http-listen 127.0.0.1:0 --flamegraph-keep 40 || finish
port=$(http_port "$tmp/symbolizer.log")
url_line=$(grep -o 'flame graph of recent profiles: http://127.0.0.1:[0-9]*/flamegraph[^;]*; no OTLP endpoint' \
	"$tmp/symbolizer.log")
if [ -n "$port" ] && [ -n "$url_line" ] && [[ $url_line == *":$port/flamegraph"* ]]; then
	pass "startup log names the flame graph URL (port $port, no OTLP endpoint)"
else
	fail "startup log names the flame graph URL" "port '$port'; $(grep -i 'flame\|http:' "$tmp/symbolizer.log")"
	[ -n "$port" ] || finish
fi
base=http://127.0.0.1:$port

start_collector "$tmp/collector.log" --socket "$tmp/run/opal.sock" --frequency 99 --interval 1 || finish
"$fx/chain" 5 >"$tmp/chain.out" 2>&1 &
chain_pid=$!
"$fx/sysloop" 5 >"$tmp/sysloop.out" 2>&1 &
sys_pid=$!
wait_for_exit "$chain_pid" 40
wait_for_exit "$sys_pid" 40
# Until a kept profile starts after the fixtures ended: the intervals
# holding their last samples are written by then.
ended=$(date +%s%N)
for _ in $(seq 150); do
	find "$tmp/state/recent" -name 'recent-*.pb.gz' -printf '%f\n' 2>/dev/null |
		awk -F- -v e="$ended" '$2 + 0 > e + 0 { found = 1 } END { exit !found }' && break
	sleep 0.1
done

# fetch NAME QUERY: the page into $tmp/NAME.html, the status into $tmp/NAME.status
fetch() {
	curl -s -o "$tmp/$1.html" -w '%{http_code} %{content_type}' "$base/flamegraph$2" \
		>"$tmp/$1.status" 2>/dev/null
}

# names FILE: the frame names and the title embedded in a page, one per line
# ("title: ..." first); exit status 1 when the data is missing.
names() {
	python3 - "$1" <<'PY'
import html, json, re, sys
text = open(sys.argv[1], encoding="utf-8").read()
m = re.search(r'<script[^>]*id="opal-data"[^>]*>(.*?)</script>', text, re.S)
if not m:
    sys.exit(1)
d = json.loads(m.group(1))
print("title: " + d["title"])
print("total: %d" % d["total"])
for n in d["names"]:
    print(n)
PY
}

fetch all "?seconds=60"
if [ "$(cat "$tmp/all.status")" = "200 text/html; charset=utf-8" ] && names "$tmp/all.html" >"$tmp/all.names"; then
	pass "GET /flamegraph?seconds=60: 200 text/html with the embedded call tree ($(sed -n 2p "$tmp/all.names"))"
else
	fail "GET /flamegraph?seconds=60" "status $(cat "$tmp/all.status"); $(head -c 300 "$tmp/all.html")"
	finish
fi
has_all() {   # FILE NAME...: every name is a frame of the page
	local f=$1 n
	shift
	for n in "$@"; do grep -qx "$n" "$f" || { echo "missing $n"; return 1; }; done
}
has_none() {
	local f=$1 n
	shift
	for n in "$@"; do grep -qx "$n" "$f" && { echo "has $n"; return 1; }; done
	return 0
}
chain_frames=(spin_inline leaf level3 level2 level1 main)
sys_frames=(read_zero_loop do_syscalls)
if msg=$(has_all "$tmp/all.names" "${chain_frames[@]}" "${sys_frames[@]}"); then
	pass "without pid: both fixtures' frames (chain with its inline frame, sysloop)"
else
	fail "without pid: both fixtures' frames" "$msg"
fi

fetch chain "?seconds=60&pid=$chain_pid"
names "$tmp/chain.html" >"$tmp/chain.names" 2>/dev/null
if [ "$(cut -d' ' -f1 "$tmp/chain.status")" = 200 ] && msg=$(has_all "$tmp/chain.names" "${chain_frames[@]}") &&
	msg=$(has_none "$tmp/chain.names" "${sys_frames[@]}") && grep -q "^title: .*pid $chain_pid" "$tmp/chain.names"; then
	pass "pid=$chain_pid (chain): its frames only, title names the pid"
else
	fail "pid=$chain_pid (chain): its frames only" "${msg:-status $(cat "$tmp/chain.status")}; $(head -n 1 "$tmp/chain.names")"
fi
fetch sys "?seconds=60&pid=$sys_pid"
names "$tmp/sys.html" >"$tmp/sys.names" 2>/dev/null
if msg=$(has_all "$tmp/sys.names" "${sys_frames[@]}") && msg=$(has_none "$tmp/sys.names" level1 spin_inline); then
	pass "pid=$sys_pid (sysloop): its frames only"
else
	fail "pid=$sys_pid (sysloop): its frames only" "$msg"
fi
fetch other "?seconds=60&pid=4194304"
if names "$tmp/other.html" >"$tmp/other.names" && grep -qx "total: 0" "$tmp/other.names"; then
	pass "a pid without samples gives an empty graph"
else
	fail "a pid without samples gives an empty graph" "$(head -n 2 "$tmp/other.names")"
fi

fetch long "?seconds=999999"
if names "$tmp/long.html" >"$tmp/long.names" && grep -q '^title: .*last 3600 s (the longest kept)' "$tmp/long.names"; then
	pass "a window beyond --flamegraph-max-age is clamped (3600 s) and says so"
else
	fail "a window beyond the kept one is clamped" "$(head -n 1 "$tmp/long.names")"
fi
bad_ok=1
for q in "?seconds=abc" "?seconds=0" "?pid=0" "?pid=x1" "?pid=99999999"; do
	fetch bad "$q"
	st=$(cut -d' ' -f1 "$tmp/bad.status")
	[ "$st" = 400 ] || { fail "bad argument $q gives 400" "status $st"; bad_ok=0; }
done
[ "$bad_ok" -eq 1 ] && pass "bad seconds/pid arguments give 400"
st=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$base/flamegraph")
[ "$st" = 405 ] && pass "POST /flamegraph gives 405" || fail "POST /flamegraph gives 405" "status $st"
hdr=$(curl -s -D - -o /dev/null "$base/flamegraph?seconds=5")
if grep -qi "^content-security-policy: default-src 'none'" <<<"$hdr" && grep -qi '^cache-control: no-store' <<<"$hdr"; then
	pass "served with Content-Security-Policy default-src 'none' and no-store"
else
	fail "served with CSP and no-store" "$hdr"
fi

n_recent=$(find "$tmp/state/recent" -name 'recent-*.pb.gz' | wc -l)
n_int=$(find "$tmp/out/intervals" -name 'interval-*.pb.gz' | wc -l)
if [ "$n_recent" -ge 5 ] && [ "$n_recent" -le 40 ]; then
	pass "recent profiles kept in state-dir/recent within --flamegraph-keep 40 ($n_recent; $n_int interval files)"
else
	fail "recent profiles kept within --flamegraph-keep" "$n_recent files"
fi
# /metrics lists the exporters (nothing configured: zero counters).
metrics=$(curl -s "$base/metrics")
if grep -q '^opal_export_requests_total{exporter="otlp",outcome="sent"} 0$' <<<"$metrics" &&
	grep -q '^opal_export_queue_requests{exporter="otlp-logs"} 0$' <<<"$metrics"; then
	pass "/metrics has the exporter counters"
else
	fail "/metrics has the exporter counters" "$(grep opal_export <<<"$metrics" | head -n 3)"
fi

kill -TERM "$coll_pid" 2>/dev/null
wait_for_exit "$coll_pid" 30
sleep 1
kill -TERM "$sym_pid" 2>/dev/null
wait_for_exit "$sym_pid" 60
if [ "$wait_rc" -eq 0 ]; then
	pass "symbolizer stops cleanly"
else
	fail "symbolizer stops cleanly" "exit $wait_rc; $(grep -m3 'error' "$tmp/symbolizer.log")"
fi
check_exit_denials "no seccomp denial while serving" "$tmp/symbolizer.log" 0

finish
