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
# ... and, through the interpreter, the demo's own Python functions with
# their file and first line (scripts/demo_load.py).
demo=$repo/scripts/demo_load.py
missing=
for fn in main compress_round json_round sort_round; do
	line=$(grep -n "^def $fn(" "$demo" | cut -d: -f1)
	grep -qF " $fn ($demo:$line)" "$tmp/run.out" || missing+=" $fn:$line"
done
[ -z "$missing" ] && pass "top list: the demo's Python functions with file and line" ||
	fail "top list: the demo's Python functions" "missing$missing in: $(grep -F "$demo" "$tmp/run.out" | head -5)"
# The flame graph shows them too, as Python frames, between the right
# native frames: sort_key's caller chain runs through the native sort
# (Python -> C -> Python) to sort_round, main, <module> and then native
# frames again down to _start; compress_round calls into zlib.
report_lines < <(python3 - "$tmp/out/flamegraph.html" "$demo" <<'EOF'
import json, re, sys
page, demo = open(sys.argv[1]).read(), sys.argv[2]
m = re.search(r'<script id="opal-data" type="application/json">(.*?)</script>', page, re.S)
data = json.loads(m.group(1)) if m else {"names": [], "kinds": [], "nodes": {}}
nodes, names, kinds = data["nodes"], data["names"], data["kinds"]
n = len(nodes.get("name", []))
name = lambda i: names[nodes["name"][i]]
kind = lambda i: kinds[nodes["kind"][i]]
lines = {f: i + 1 for i, l in enumerate(open(demo)) for f in [l[4:l.find("(")]]
         if l.startswith("def ")}
def check(what, ok, why):
    print(("PASS " if ok else "FAIL ") + "flame graph: " + what + ("" if ok else ": " + why))
def label(fn):
    return "%s (%s:%d)" % (fn, demo, lines[fn])
def ancestors(i):
    out = []
    while nodes["parent"][i] >= 0:
        i = nodes["parent"][i]
        out.append(i)
    return out
for fn in ("main", "compress_round", "json_round", "sort_round", "sort_key"):
    found = [i for i in range(n) if name(i) == label(fn) and kind(i) == "cpython"]
    check("%s as a Python frame with file and first line" % label(fn), bool(found),
          "no such cpython node among %d" % n)
def chains(fn):
    return [[i] + ancestors(i) for i in range(n) if name(i) == label(fn)]
good = []
for c in chains("sort_key"):
    py = [k for k, i in enumerate(c) if kind(c[k]) == "cpython"]
    between = [name(i) for i in c[1:py[1]]] if len(py) > 1 else []
    rest = [name(i) for i in c[py[-1] + 1:]]
    if (len(py) > 3 and [name(c[k]) for k in py[1:4]] == [label("sort_round"), label("main"),
            "<module> (%s:1)" % demo] and between and between[0] == "_PyEval_EvalFrameDefault"
            and any("sort" in b for b in between) and "_start" in rest):
        good.append(c)
check("sort_key <- _PyEval_EvalFrameDefault ... native sort ... <- sort_round <- main <- "
      "<module> <- native frames to _start", bool(good),
      "; ".join(";".join(name(i) for i in c) for c in chains("sort_key")[:2])[:600])
rounds = set(c[0] for c in chains("compress_round"))
zlib = [j for j in range(n) if "zlib" in name(j) and kind(j) != "cpython" and
        rounds.intersection(ancestors(j))]
check("compress_round calls into zlib (native zlib frames leafward of it)", bool(zlib),
      "no zlib frame under %d compress_round nodes" % len(rounds))
EOF
)
grep -q '^ok: symbolized user frames and kernel frames present' "$tmp/run.out" &&
	pass "profile check passes" || fail "profile check" "$(tail -3 "$tmp/run.out")"
# run.sh names the pid of each process it starts, each the leader of its
# own session (setsid): once it has ended, nothing may be left in those
# sessions.
session_gone() {   # CHECK NAME: PASS when run.sh named NAME's pid and its session is empty
	local pid left
	pid=$(sed -n "s/^make run: $2 is pid \([0-9]*\) (its own session)$/\1/p" "$tmp/run.err")
	if [ -z "$pid" ]; then
		fail "$1" "run.sh did not name the pid of $2"
		return
	fi
	left=$(ps -o pid=,args= -s "$pid" 2>/dev/null)
	[ -z "$left" ] && pass "$1 (pid $pid)" || fail "$1" "still running after run.sh ended: $left"
}
session_gone "demo load stopped with the run" "the demo load"
session_gone "symbolizer stopped with the run" opal-symbolizer
session_gone "collector stopped with the run" opal-collector

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
