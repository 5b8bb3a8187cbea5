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

. "$(dirname "$0")/lib/common.sh"

need_build "${1:?usage: test_otlp_export.sh BUILD_DIR}"
fx=$build/fixtures/fp
need_daemons
command -v python3 >/dev/null || need python3 "python3 reads the receiver's JSON log"
need_fixtures "$fx/chain"
[ "$prereq_ok" -eq 1 ] || finish
need_receiver

make_tmp opal-otlp

# run_phase NAME SECONDS SYMBOLIZER-ARGS... : symbolizer (as nobody) and
# collector (1 s intervals, 99 Hz) around the chain fixture; the symbolizer
# environment comes from the caller's `sym_env` array.
run_phase() {
	local name=$1 secs=$2
	shift 2
	local dir=$tmp/$name
	make_dirs "$dir"
	start_symbolizer "$dir" "$dir/symbolizer.log" "$@" || return 1
	start_collector "$dir/collector.log" --socket "$dir/run/opal.sock" --frequency 99 --interval 1 ||
		return 1
	"$fx/chain" "$secs" >"$dir/chain.out" 2>&1 &
	chain_pid=$!
	wait_for_exit "$chain_pid" $((secs + 30))
	sleep 1
	kill -TERM "$coll_pid" 2>/dev/null
	wait_for_exit "$coll_pid" 30
	sleep 1
	stop_daemon "$name: symbolizer ran and stopped cleanly" "$sym_pid" 60 "$dir/symbolizer.log"
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

# ---- phase 1: profiles -------------------------------------------------------
script="503:ra=3,ok,429,ok,400,ok,partial,ok,slow=4000,ok"
if start_otlp_receiver profiles "$script"; then
	pass "profiles: receiver listening on port $rcv_port"
	sym_env=(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$rcv_port"
		OTEL_EXPORTER_OTLP_HEADERS="x-opal-test=integration"
		OTEL_EXPORTER_OTLP_TIMEOUT=1500)
	if run_phase profiles 14 --export pprof,otlp; then
		n_int=$(find "$tmp/profiles/out/intervals" -name 'interval-*.pb.gz' | wc -l)
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
if start_otlp_receiver logs "ok"; then
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

finish
