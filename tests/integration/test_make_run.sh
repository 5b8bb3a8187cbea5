#!/usr/bin/env bash
# What `make run` runs (scripts/run.sh), as a newcomer would see it: both
# daemons, the demo load, the pprof/OTLP/flame graph files and the top list;
# then a run stopped early (SIGTERM, as Ctrl-C) still writes its profile;
# then a run with OTEL_EXPORTER_OTLP_ENDPOINT set also exports there.
# usage: tests/integration/test_make_run.sh BUILD_DIR   (as root)
set -uo pipefail
. "$(dirname "$0")/lib/common.sh"
need_build "${1:?usage: test_make_run.sh BUILD_DIR}"
need_daemons
need_bins "$report"
[ "$prereq_ok" -eq 1 ] || finish
need_receiver
make_tmp opal-make-run

"$repo/scripts/run.sh" --build "$build" --out "$tmp/out" --state "$tmp/var" \
	--duration 6 --frequency 49 --interval 2 >"$tmp/run.out" 2>"$tmp/run.err"
rc=$?
[ $rc -eq 0 ] && pass "run.sh exits 0" || fail "run.sh" "rc=$rc: $(tail -5 "$tmp/run.err")"
for f in profile.pb.gz profile.otlp.pb flamegraph.html; do
	[ -s "$tmp/out/$f" ] && pass "$f written" || fail "$f" "missing or empty"
done
n=$(ls "$tmp/out/intervals/"*.pb.gz 2>/dev/null | wc -l)
[ "$n" -ge 2 ] && pass "interval files ($n)" || fail "interval files" "$n"
# The demo load is python3 without frame pointers: its stacks must reach
# _start through libc and show the interpreter's functions by name.
if grep -q ' _start$' "$tmp/run.out" && grep -q ' _PyEval_EvalFrameDefault$' "$tmp/run.out" &&
	grep -q ' __libc_start_main_impl$' "$tmp/run.out"; then
	pass "top list: the demo's python3 stacks, named, down to _start"
else
	fail "top list" "$(head -30 "$tmp/run.out")"
fi
grep -q '^ok: symbolized user frames and kernel frames present' "$tmp/run.out" &&
	pass "profile check passes" || fail "profile check" "$(tail -3 "$tmp/run.out")"
pgrep -f 'import json, os, zlib' >/dev/null &&
	fail "demo load" "still running after run.sh ended" || pass "demo load stopped with the run"
pgrep -f "$tmp/var/collector.sock" >/dev/null &&
	fail "daemons" "still running after run.sh ended" || pass "daemons stopped with the run"

# Stopped early: SIGTERM (what Ctrl-C delivers to a foreground run) makes it
# stop the collector first, which flushes its last interval.
rm -rf "$tmp/out"
"$repo/scripts/run.sh" --build "$build" --out "$tmp/out" --state "$tmp/var" \
	--duration 60 --frequency 49 --interval 30 >"$tmp/run2.out" 2>"$tmp/run2.err" &
runner=$!
wait_log "$tmp/run2.err" "profiling this machine" 10 "$runner"
sleep 4
kill -TERM $runner
wait $runner
rc=$?
if [ $rc -eq 0 ] && [ -s "$tmp/out/profile.pb.gz" ] &&
	"$report" check "$tmp/out/profile.pb.gz" >/dev/null 2>&1; then
	pass "stopped early: the partial interval is written and checks"
else
	fail "stopped early" "rc=$rc: $(tail -5 "$tmp/run2.err")"
fi

# With an OTLP endpoint in its environment (as `OTEL_EXPORTER_OTLP_ENDPOINT=...
# make run`), the run exports profiles there too: the loopback receiver
# decodes and checks each request (tests/otlp_receiver).
if start_otlp_receiver otel ""; then
	rm -rf "$tmp/out"
	OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:$rcv_port \
		"$repo/scripts/run.sh" --build "$build" --out "$tmp/out" --state "$tmp/var" \
		--duration 5 --frequency 49 --interval 2 >"$tmp/run3.out" 2>"$tmp/run3.err"
	rc=$?
	grep -q "also exporting OTLP profiles to http://127.0.0.1:$rcv_port/v1development/profiles" \
		"$tmp/run3.err" && [ $rc -eq 0 ] &&
		pass "OTEL_EXPORTER_OTLP_ENDPOINT: run.sh names the endpoint and exits 0" ||
		fail "OTEL_EXPORTER_OTLP_ENDPOINT" "rc=$rc: $(tail -5 "$tmp/run3.err")"
	report_lines < <(python3 -c '
import json, sys
reqs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def check(what, ok, why=""):
    print(("PASS " if ok else "FAIL ") + "OTLP export of make run: " + what + ("" if ok else ": " + why))
check("requests received", len(reqs) > 0, "none")
check("all to /v1development/profiles, valid", reqs and all(
    r["valid"] and r["path"] == "/v1development/profiles" for r in reqs),
    "; ".join("%s %s" % (r["path"], r.get("error", "")) for r in reqs[:3]))
names = set(n for r in reqs for n in r["functions"])
check("the demo load python3 frames are exported by name",
      "_PyEval_EvalFrameDefault" in names and "_start" in names, "%d names" % len(names))
' "$rcv_log")
else
	fail "OTLP receiver starts" "$(cat "$tmp/otel.receiver.log")"
fi
finish
