#!/usr/bin/env bash
# OTLP/HTTP export end to end: the real collector (BPF) and symbolizer
# profile the `chain` fixture and export to the loopback test receiver
# (tests/otlp_receiver), which decodes every request, checks the dictionary
# rules and answers from a script:
#   phase 1, profiles, endpoint from OTEL_EXPORTER_OTLP_ENDPOINT, headers from
#   OTEL_EXPORTER_OTLP_HEADERS, timeout from OTEL_EXPORTER_OTLP_TIMEOUT:
#     503 + Retry-After: 3  -> the same request again >= 3 s later
#     429                   -> the same request again, after a short backoff
#     400                   -> never sent again
#     partial success       -> never sent again, logged
#     slow answer (4 s)     -> times out (1.5 s) and the same request is retried
#   and symbolization keeps writing intervals meanwhile;
#   phase 2, "profiles as logs" to {--otlp-endpoint}/v1/logs: valid
#   base64 gzip'd pprof bodies holding the fixture's frames.
# usage: tests/integration/test_otlp_export.sh BUILD_DIR   (as root)
# Prints PASS/FAIL per case and "N passed, N failed"; missing prerequisites
# are failures. OPAL_IT_KEEP=1 keeps the temp folder (kept on failure).
set -uo pipefail

build_arg=${1:?usage: test_otlp_export.sh BUILD_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
passed=0
failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1: $2"; failed=$((failed + 1)); }
finish() {
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit
}

prereq_ok=1
need() { fail "prerequisite $1" "$2"; prereq_ok=0; }
build=$(cd "$build_arg" 2>/dev/null && pwd) || { need build-dir "no folder $build_arg"; finish; }
fx=$build/fixtures/fp
collector=$build/opal-collector
symbolizer=$build/opal-symbolizer
receiver=$build/tests/otlp-receiver
[ "$(id -u)" -eq 0 ] || need root "run as root: the collector loads BPF programs"
[ -r /sys/kernel/btf/vmlinux ] || need bpf "/sys/kernel/btf/vmlinux is missing"
id nobody >/dev/null 2>&1 || need user "user 'nobody' does not exist"
command -v python3 >/dev/null || need python3 "python3 reads the receiver's JSON log"
for b in "$collector" "$symbolizer"; do
	[ -x "$b" ] || need binaries "$b is missing: run 'make all'"
done
[ -x "$fx/chain" ] || need fixtures "$fx/chain is missing: run 'make fixtures'"
[ "$prereq_ok" -eq 1 ] || finish
if ! "$root/tests/otlp_receiver/build.sh" "$build" >/dev/null 2>&1; then
	fail "receiver builds" "tests/otlp_receiver/build.sh $build failed"
	finish
fi

tmp=$(mktemp -d /tmp/opal-otlp.XXXXXX)
chmod 0755 "$tmp"
echo "otlp export: working in $tmp"

# Kills this script's own background jobs (never anything by name).
cleanup() {
	local p
	for p in $(jobs -p); do
		kill -KILL "$p" 2>/dev/null || true
	done
}
trap cleanup EXIT

wait_for_exit() {   # PID SECONDS; sets wait_rc (124 on timeout)
	local pid=$1 limit=$2 i
	for ((i = 0; i < limit * 10; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		wait_rc=124
		return
	fi
	wait "$pid"
	wait_rc=$?
}

start_receiver() {   # NAME SCRIPT; sets rcv_pid, rcv_port, rcv_log
	rcv_log=$tmp/$1.requests.jsonl
	rm -f "$tmp/$1.port"
	"$receiver" --log "$rcv_log" --script "$2" --port-file "$tmp/$1.port" \
		>"$tmp/$1.receiver.log" 2>&1 &
	rcv_pid=$!
	for _ in $(seq 50); do
		[ -s "$tmp/$1.port" ] && break
		sleep 0.1
	done
	rcv_port=$(cat "$tmp/$1.port" 2>/dev/null)
	[ -n "$rcv_port" ]
}

# run_phase NAME SECONDS SYMBOLIZER-ARGS... : symbolizer (as nobody) and
# collector (1 s intervals, 99 Hz) around the chain fixture; the symbolizer
# environment comes from the caller's `sym_env` array.
run_phase() {
	local name=$1 secs=$2
	shift 2
	local dir=$tmp/$name
	mkdir -p "$dir/state" "$dir/out" "$dir/run"
	chown nobody "$dir/state" "$dir/out" "$dir/run"
	local sock=$dir/run/opal.sock
	env "${sym_env[@]}" "$symbolizer" --socket "$sock" --state-dir "$dir/state" \
		--out-dir "$dir/out" --user nobody "$@" >"$dir/symbolizer.log" 2>&1 &
	local sym_pid=$!
	for _ in $(seq 100); do
		[ -S "$sock" ] && break
		kill -0 "$sym_pid" 2>/dev/null || break
		sleep 0.1
	done
	if [ ! -S "$sock" ]; then
		fail "$name: symbolizer starts" "$(tail -n 3 "$dir/symbolizer.log" | tr '\n' ' ')"
		return 1
	fi
	"$collector" --socket "$sock" --frequency 99 --interval 1 >"$dir/collector.log" 2>&1 &
	local coll_pid=$!
	"$fx/chain" "$secs" >"$dir/chain.out" 2>&1 &
	chain_pid=$!
	wait_for_exit "$chain_pid" $((secs + 30))
	sleep 1
	kill -TERM "$coll_pid" 2>/dev/null
	wait_for_exit "$coll_pid" 30
	sleep 1
	kill -TERM "$sym_pid" 2>/dev/null
	wait_for_exit "$sym_pid" 60
	if [ "$wait_rc" -ne 0 ]; then
		fail "$name: symbolizer stops cleanly" "exit status $wait_rc"
		tail -n 20 "$dir/symbolizer.log" | sed 's/^/    /'
		return 1
	fi
	pass "$name: symbolizer ran and stopped cleanly"
}

# Checks on the receiver's JSON lines; prints PASS/FAIL lines.
analyze() {   # PHASE LOG CHAIN_PID EXTRA...
	python3 - "$@" <<'PY'
import json, sys
phase, log, chain_pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
reqs = sorted((json.loads(l) for l in open(log) if l.strip()), key=lambda r: r["t_ms"])
chain = ["spin_inline", "leaf", "level3", "level2", "level1", "main"]
def check(what, ok, why=""):
    print(("PASS " if ok else "FAIL ") + phase + ": " + what + ("" if ok else ": " + why))

def common(path):
    check("requests received", len(reqs) > 0, "none")
    bad = [r for r in reqs if not r["valid"]]
    check("every request decodes and passes the checks", not bad,
          "; ".join(r["error"] for r in bad[:3]))
    check("path " + path, all(r["path"] == path for r in reqs),
          str(sorted({r["path"] for r in reqs})))
    check("Content-Type application/x-protobuf, Content-Encoding gzip",
          all(r["content_type"] == "application/x-protobuf" and r["content_encoding"] == "gzip"
              for r in reqs), str({(r["content_type"], r["content_encoding"]) for r in reqs}))
    names = set(n for r in reqs for n in r["functions"])
    missing = [n for n in chain if n not in names]
    check("the fixture's frames are exported", not missing, "missing " + ",".join(missing))

if phase == "profiles":
    common("/v1development/profiles")
    check("OTEL_EXPORTER_OTLP_HEADERS sent", all(r["x_opal_test"] == "integration" for r in reqs),
          str({r["x_opal_test"] for r in reqs}))
    noid = sum(r.get("mappings_without_build_id", 0) for r in reqs)
    print("mappings without a build ID attribute (counted, not failed): %d" % noid)
    check("the fixture's process is a resource", any(chain_pid in r["pids"] for r in reqs),
          "pid %d not in any request" % chain_pid)
    check("no empty request", all(r["resources"] > 0 for r in reqs),
          "%d requests without resources" % sum(r["resources"] == 0 for r in reqs))
    check("period = 1e9/99 ns", all(r["period"] == 10101010 for r in reqs if r["valid"]),
          str({r["period"] for r in reqs if r["valid"]}))
    if len(reqs) < 10:
        check("10 scripted answers used", False, "only %d requests" % len(reqs))
        sys.exit(0)
    st = [r["status"] for r in reqs[:10]]
    check("scripted answers in order", st == [503, 200, 429, 200, 400, 200, 200, 200, 200, 200],
          str(st))
    h = [r["hash"] for r in reqs]
    later = lambda i: h[i + 1:]
    gap = reqs[1]["t_ms"] - reqs[0]["t_done_ms"]
    check("503 retried with the same request after Retry-After: 3 (%.0f ms)" % gap,
          h[1] == h[0] and 2900 <= gap <= 8000, "same=%s gap=%.0f ms" % (h[1] == h[0], gap))
    gap = reqs[3]["t_ms"] - reqs[2]["t_done_ms"]
    check("429 retried with the same request after a backoff (%.0f ms)" % gap,
          h[3] == h[2] and gap < 2900, "same=%s gap=%.0f ms" % (h[3] == h[2], gap))
    check("400 not retried", h[4] not in later(4), "request sent again")
    check("partial success not retried", h[6] not in later(6), "request sent again")
    gap = reqs[9]["t_ms"] - reqs[8]["t_ms"]
    check("slow answer timed out and retried (%.0f ms later)" % gap,
          h[9] == h[8] and 1400 <= gap < 4000, "same=%s gap=%.0f ms" % (h[9] == h[8], gap))
else:
    common("/v1/logs")
    check("one log record per request", all(r["log_records"] == 1 for r in reqs),
          str({r["log_records"] for r in reqs}))
    check("sampling period attribute = 1e9/99 ns", all(r["period"] == 10101010 for r in reqs),
          str({r["period"] for r in reqs}))
    check("log bodies hold samples", sum(r["samples"] for r in reqs) > 0, "0 samples")
PY
}

report_lines() {
	while IFS= read -r line; do
		case $line in
		"PASS "*) pass "${line#PASS }" ;;
		"FAIL "*) rest=${line#FAIL }; fail "${rest%%: *}: ${rest#*: }" "see above" ;;
		*) echo "    $line" ;;
		esac
	done
}

# ---- phase 1: profiles -------------------------------------------------------
script="503:ra=3,ok,429,ok,400,ok,partial,ok,slow=4000,ok"
if start_receiver profiles "$script"; then
	pass "profiles: receiver listening on port $rcv_port"
	sym_env=(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$rcv_port"
		OTEL_EXPORTER_OTLP_HEADERS="x-opal-test=integration"
		OTEL_EXPORTER_OTLP_TIMEOUT=1500)
	if run_phase profiles 14 --export pprof,otlp; then
		n_int=$(find "$tmp/profiles/out/intervals" -name '*.pb.gz' | wc -l)
		# 14 s of 1 s intervals while the exporter waited 3 s + 1.5 s + backoffs
		if [ "$n_int" -ge 10 ]; then
			pass "profiles: symbolization not blocked by export ($n_int intervals written)"
		else
			fail "profiles: symbolization not blocked by export" "only $n_int interval files"
		fi
		if grep -q "partial success" "$tmp/profiles/symbolizer.log"; then
			pass "profiles: partial success logged"
		else
			fail "profiles: partial success logged" "no 'partial success' in the symbolizer log"
		fi
		report_lines < <(analyze profiles "$rcv_log" "$chain_pid")
	fi
	kill -TERM "$rcv_pid" 2>/dev/null
	wait_for_exit "$rcv_pid" 10
else
	fail "profiles: receiver starts" "$(tail -n 3 "$tmp/profiles.receiver.log" | tr '\n' ' ')"
fi

# ---- phase 2: profiles as logs -----------------------------------------------
if start_receiver logs "ok"; then
	pass "logs: receiver listening on port $rcv_port"
	sym_env=(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:1")   # the flag must win
	if run_phase logs 4 --export pprof,otlp-logs --otlp-endpoint "http://127.0.0.1:$rcv_port"; then
		report_lines < <(analyze logs "$rcv_log" "$chain_pid")
	fi
	kill -TERM "$rcv_pid" 2>/dev/null
	wait_for_exit "$rcv_pid" 10
else
	fail "logs: receiver starts" "$(tail -n 3 "$tmp/logs.receiver.log" | tr '\n' ' ')"
fi

trap - EXIT
cleanup
if [ "$failed" -eq 0 ] && [ "${OPAL_IT_KEEP:-0}" != 1 ]; then
	rm -rf "$tmp"
else
	echo "otlp export: kept $tmp"
fi
finish
