#!/usr/bin/env bash
# End-to-end checks of correlation (issue 14): the real collector (BPF) and
# symbolizer profile tests/fixtures/correlation processes and the checks
# read the whole-run OTLP file (protoc --decode), the pprof (go tool
# pprof) and what the test OTLP receiver validated:
#   - a process that published an OTEP 4719 process context has its
#     service.name, service.version and deployment.environment.name on its
#     resource in OTLP and as pprof labels;
#   - from the interval the collector first read it in (the process's first
#     or second), every sample of that process carries it; a context
#     published after the process's first second is found too;
#   - a process without one gets none (service.name unknown_service:...);
#   - a context left in the middle of an update (torn) is never read;
#   - every resource carries host.name, host.id, os.type and os.version,
#     and (--command-line) process.command_line;
#   - thread contexts (OTEP 4947), in a library built with TLSDESC, in one
#     built with the traditional dialect, and in the executable: every
#     sample in phase A's function carries A's trace and span IDs, and
#     its attributes (pprof labels) from the interval the process context
#     that names their keys was read in; B's B's, none mixed; a record marked
#     invalid is never read; the OTLP link table holds A's and B's links;
#   - the exported OTLP requests pass the receiver's dictionary checks
#     (link table included).
# usage: tests/integration/test_correlation.sh BUILD_DIR   (as root)
# Prints PASS/FAIL per check and ends with "N passed, N failed"; exits
# non-zero on any failure. Missing prerequisites are failures, not skips.
# OPAL_IT_KEEP=1 keeps the temp folder (it is always kept on failure).
set -uo pipefail

. "$(dirname "$0")/lib/common.sh"

# ---- prerequisites ---------------------------------------------------------------
need_build "${1:?usage: test_correlation.sh BUILD_DIR}"
fx=$build/fixtures/correlation
need_daemons
need_fixtures "$fx/pctx" "$fx/pctx-gnu2" "$fx/pctx-gnu"
need_tools protoc go python3
[ "$prereq_ok" -eq 1 ] || finish
# a receiver built after its sources is used as is (under qemu's emulation
# a build takes minutes)
receiver=$build/tests/otlp-receiver
if [ ! -x "$receiver" ] || [ -n "$(find "$repo/tests/otlp_receiver" "$build/libopal_shared.a" \
	-newer "$receiver" 2>/dev/null | head -n 1)" ]; then
	need_receiver
fi

# ---- run ---------------------------------------------------------------------------------
make_tmp opal-correlation
make_dirs "$tmp"
logs=$tmp/logs
mkdir -p "$logs"
trap cleanup EXIT
if ! start_otlp_receiver otlp ok; then
	fail "receiver starts" "no port (see $tmp/otlp.receiver.log)"
	finish
fi
start_symbolizer "$tmp" "$tmp/symbolizer.log" --whole-run --export pprof,otlp \
	--otlp-endpoint "http://127.0.0.1:$rcv_port" || finish
start_collector "$tmp/collector.log" --socket "$tmp/run/opal.sock" --frequency 99 --interval 2 \
	--command-line \
	${OPAL_IT_VERBOSE:+--verbose} || finish

declare -A pids
"$fx/pctx" publish 3 opal-ctx-published >"$logs/published" 2>&1 &
pids[published]=$!
"$fx/pctx" torn 3 opal-ctx-torn >"$logs/torn" 2>&1 &
pids[torn]=$!
"$fx/pctx" none 3 >"$logs/none" 2>&1 &
pids[none]=$!
"$fx/pctx" late 4 opal-ctx-late >"$logs/late" 2>&1 &
pids[late]=$!
wait "${pids[@]}"
"$fx/pctx-gnu2" phases 3 opal-tctx-gnu2 >"$logs/gnu2" 2>&1 &
pids[gnu2]=$!
"$fx/pctx-gnu" phases 3 opal-tctx-gnu >"$logs/gnu" 2>&1 &
pids[gnu]=$!
"$fx/pctx" phases 3 opal-tctx-exe >"$logs/exe" 2>&1 &
pids[exe]=$!
wait "${pids[@]}"
sleep 0.5
stop_daemon "collector stops cleanly" "$coll_pid" 30 "$tmp/collector.log"
wait_log "$tmp/symbolizer.log" 'interval [0-9]* \(final\): ' 10
sleep 2
stop_daemon "symbolizer stops cleanly" "$sym_pid" 60 "$tmp/symbolizer.log"
kill -TERM "$rcv_pid" 2>/dev/null
wait_for_exit "$rcv_pid" 10

# ---- checks ------------------------------------------------------------------------------
otlp=$tmp/out/profile.otlp.pb
if ! protoc -I"$repo/proto" --decode \
	opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest \
	"$repo/proto/opentelemetry/proto/collector/profiles/v1development/profiles_service.proto" \
	<"$otlp" >"$tmp/otlp.txt" 2>"$tmp/otlp.err"; then
	fail "the OTLP file decodes" "$(head -n 3 "$tmp/otlp.err" | tr '\n' ' ')"
	finish
fi
go tool pprof -traces "$tmp/out/profile.pb.gz" >"$tmp/pprof-traces.txt" 2>/dev/null
mkdir -p "$tmp/iv"
for f in "$tmp"/out/intervals/interval-*.pb.gz; do
	go tool pprof -raw "$f" >"$tmp/iv/$(basename "$f" .pb.gz).txt" 2>/dev/null
	go tool pprof -traces "$f" >"$tmp/iv/$(basename "$f" .pb.gz).traces" 2>/dev/null
done
go tool pprof -raw "$tmp/out/profile.pb.gz" >"$tmp/pprof-raw.txt" 2>"$tmp/pprof.err" &&
	pass "go tool pprof reads the profile" ||
	fail "go tool pprof reads the profile" "$(head -n 3 "$tmp/pprof.err" | tr '\n' ' ')"

analyze() {   # TMP PUBLISHED-PID TORN-PID NONE-PID GNU2-PID GNU-PID EXE-PID LATE-PID FIXTURES
	python3 - "$@" <<'PY'
import glob, json, re, sys
tmp, published, torn, none = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
tctx = {"TLSDESC library": int(sys.argv[5]), "traditional-TLS library": int(sys.argv[6]),
        "executable (local-exec)": int(sys.argv[7])}
late, fx = int(sys.argv[8]), sys.argv[9]
text = open(tmp + "/otlp.txt").read()

def resources():
    # each ResourceProfiles' resource attributes, as {key: value}
    for block in text.split("resource_profiles {")[1:]:
        res = block.split("scope_profiles {")[0]
        attrs = {}
        for m in re.finditer(r'attributes \{\s*key: "([^"]*)"\s*value \{\s*(\w+): ("([^"]*)"|-?\d+)', res):
            attrs[m.group(1)] = m.group(4) if m.group(4) is not None else int(m.group(3))
        yield attrs

def check(what, ok, why=""):
    print(("PASS " if ok else "FAIL ") + what + ("" if ok else ": " + why))

# a process may be up to three resources of the whole-run profile: as the
# shell that forked it (samples before its exec), without its context
# (intervals before the collector read it) and with it
by_pid = {}
for a in resources():
    by_pid.setdefault(a.get("process.pid"), []).append(a)
for pid, name in ((published, "published"), (torn, "torn"), (none, "none")):
    check("the %s process is a resource" % name, pid in by_pid, "pid %d not in %s" % (pid, sorted(by_pid, key=str)))
def named(pid):   # its resource with a service.name of its own, else its first
    rs = by_pid.get(pid, [])
    own = [a for a in rs if not str(a.get("service.name", "")).startswith("unknown_service:")]
    return own[0] if own else (rs[0] if rs else {})
p, t, n = named(published), named(torn), named(none)
others = [a for a in by_pid.get(published, []) if a is not p]
paths = [a.get("process.executable.path") for a in others]
check("published context: besides it, at most one resource without it per executable (before it was read; before exec)",
      len(paths) == len(set(paths)) and all(str(a.get("service.name", "")).startswith("unknown_service:")
                                            for a in others), str(others))
check("published context: service.name", p.get("service.name") == "opal-ctx-published", str(p.get("service.name")))
check("published context: service.version, deployment.environment.name",
      p.get("service.version") == "1.2.3" and p.get("deployment.environment.name") == "test", str(p))
check("published context: threadlocal.* keys are not exported",
      not any(k.startswith("threadlocal.") for k in p), str(p))
check("no context: no service.name of its own", str(n.get("service.name", "")).startswith("unknown_service:"), str(n.get("service.name")))
check("torn context: never read", str(t.get("service.name", "")).startswith("unknown_service:") and "service.version" not in t, str(t))
check("process.command_line: the published process's arguments",
      p.get("process.command_line") == fx + "/pctx publish 3 opal-ctx-published",
      str(p.get("process.command_line")))
for key in ("host.name", "host.id", "os.type", "os.version"):
    every = [a for rs in by_pid.values() for a in rs]
    check("resources carry " + key, all(key in a for a in every),
          "missing in %d" % sum(key not in a for a in every))

# go tool pprof -raw: a sample line "COUNT VALUE: LOCATIONS", then its
# label lines "key:[value] ..."
def raw_samples(path):
    samples, cur = [], None
    for line in open(path):
        if re.match(r"^\s+\d+\s+\d+: ", line):
            cur = {}
            samples.append(cur)
        elif cur is not None and ":[" in line:
            cur.update(re.findall(r"([\w.]+):\[([^\]]*)\]", line))
    return samples
samples = raw_samples(tmp + "/pprof-raw.txt")
of = lambda pid, s=samples: [x for x in s if x.get("pid") == str(pid)]
# per interval (in sequence order) that has samples of `pid`: how many, and
# how many carry service.name `name`
def by_interval(pid, name):
    files = sorted(glob.glob(tmp + "/iv/interval-*.txt"),
                   key=lambda f: int(re.findall(r"-(\d+)\.txt$", f)[0]))
    rows = []
    for f in files:
        mine = of(pid, raw_samples(f))
        if mine:
            rows.append((len(mine), sum(x.get("service.name") == name for x in mine)))
    return rows
# A sample belongs to the resource of its time: in the interval the
# context was read in, the samples taken before the read have no label.
rows = by_interval(published, "opal-ctx-published")
first = next((i for i, (_, k) in enumerate(rows) if k), None)
check("pprof: the context read in the process's first or second interval, every sample of "
      "the published process has its service.name label from the next one",
      first is not None and first <= 1 and all(n == k for n, k in rows[first + 1:]),
      "(samples, labelled) per interval: %s" % rows)
rows = by_interval(late, "opal-ctx-late")
first = next((i for i, (_, k) in enumerate(rows) if k), None)
check("a context published after the first second is found, and kept to the end",
      first is not None and all(n == k for n, k in rows[first + 1:]) and
      any(a.get("process.pid") == late and a.get("service.name") == "opal-ctx-late"
          for a in resources()),
      "(samples, labelled) per interval: %s" % rows)
check("pprof: no service.name label on the others",
      of(none) and of(torn) and not any("service.name" in x for x in of(none) + of(torn)),
      "%d/%d samples" % (len(of(none)), len(of(torn))))

# go tool pprof -traces: per pprof sample (one thread, stack and context,
# many CPU samples), "key:  value" label lines, then the stack, leaf
# first, its first line with the value: CPU time, counted back to CPU
# samples at the collector's 99 Hz
unit_ns = {"ns": 1, "us": 1e3, "\u00b5s": 1e3, "ms": 1e6, "s": 1e9}
def parse_traces(path):
    traces = []
    for block in open(path).read().split("-----------+")[1:]:
        labels, funcs, n = {}, [], 0
        for line in block.splitlines()[1:]:
            m = re.match(r"^\s*([\w.]+):\s+(\S.*)$", line)
            if m and not funcs:
                labels[m.group(1)] = m.group(2).strip()
            elif line.strip():
                v = None if funcs else re.match(r"^\s*([\d.]+)(ns|us|\u00b5s|ms|s)\s", line)
                if v:
                    n = round(float(v.group(1)) * unit_ns[v.group(2)] * 99 / 1e9)
                funcs.append(line.split()[-1])
        traces.append((labels, funcs, n))
    return traces
# per interval: its traces, and whether each pid's process context was
# known in it (the thread attributes' keys are named by it)
intervals = []
for f in sorted(glob.glob(tmp + "/iv/interval-*.traces"),
                key=lambda f: int(re.findall(r"-(\d+)\.traces$", f)[0])):
    tr = parse_traces(f)
    known = {l.get("pid") for l, _, _ in tr if "service.name" in l}
    intervals.append((tr, known))
traces = parse_traces(tmp + "/pprof-traces.txt")
want = {"phase_a_spin": ("0a" * 16, "a1" * 8, "/a", "alice"),
        "phase_b_spin": ("0b" * 16, "b2" * 8, "/b", "bob")}
# In an interval before the process context was read, a record's
# attributes cannot be named: its samples carry trace and span alone.
for what, pid in tctx.items():
    for fn, (trace, span, route, user) in want.items():
        n = n_named = 0
        bad = []
        for tr, known in intervals:
            named = str(pid) in known
            for l, f, c in tr:
                if l.get("pid") != str(pid) or fn not in f:
                    continue
                n += c
                n_named += c if named else 0
                attrs = (route, user) if named else (None, None)
                if (l.get("trace_id"), l.get("span_id"), l.get("http.route"),
                        l.get("user.id")) != (trace, span) + attrs:
                    bad.append(l)
        check("%s: every sample in %s carries its trace, span and attributes" % (what, fn),
              n_named >= 3 and not bad, "%d samples (%d with the context read), %d wrong, e.g. %s" %
              (n, n_named, len(bad), bad[:1]))
    mine = [t for t in traces if t[0].get("pid") == str(pid)]
    torn_phase = [l for l, f, _ in mine if "phase_torn_spin" in f]
    n = sum(c for _, f, c in mine if "phase_torn_spin" in f)
    check("%s: a record marked invalid is never read" % what,
          n >= 3 and not any("trace_id" in l or "http.route" in l for l in torn_phase),
          "%d samples, %s" % (n, torn_phase[:1]))
links = re.findall(r"link_table \{(.*?)\n  \}", text, re.S)
check("OTLP link table: the zero link, A's and B's (%d entries)" % len(links),
      len(links) == 3 and not any("\\014" in l for l in links), str(links)[:300])
check("OTLP samples refer to links", "link_index: " in text, "no Sample.link_index")

reqs = [json.loads(l) for l in open(tmp + "/otlp.requests.jsonl") if l.strip()]
check("OTLP requests exported", len(reqs) > 0, "none")
bad = [r for r in reqs if not r["valid"]]
check("every OTLP request passes the receiver's checks", not bad, "; ".join(r["error"] for r in bad[:3]))
PY
}
report_lines < <(analyze "$tmp" "${pids[published]}" "${pids[torn]}" "${pids[none]}" \
	"${pids[gnu2]}" "${pids[gnu]}" "${pids[exe]}" "${pids[late]}" "$fx")
finish
