#!/usr/bin/env bash
# Python frames from a process's first samples (issue 12, "100 Python
# processes at once"): processes sampled before the collector has read
# their maps get their walk from BPF (bpf/interp_early.h) once the
# collector has set up one process of the same interpreter file. Per
# interpreter, Debian's /usr/bin/python3.11 (the interpreter in the
# executable: set up at exec) and the newest pyenv CPython 3.8-3.13 (in
# libpython3.X.so: set up at the first sample, from its PC's mapping):
#   - one process the collector sets up (it publishes the file);
#   - EARLY_N (20) processes started at once (burst), each spinning
#     EARLY_SPIN_S (1.5) s;
#   - a parent forking EARLY_N children without exec (fork: they start
#     with the parent's walk).
# Of each group's samples in the evaluation loop, PY_EARLY_PCT (98) % or
# more must have Python frames (PY_EARLY_LIB_PCT, 95 %, for a burst of the
# libpython interpreter: a process is set up at its first sample in
# libpython's text, and a first sample elsewhere, as in ld.so's
# __tls_get_addr, has none; its processes get about 10 samples each) (the program's, or those of the start-up's
# imports, named or not), the program's frames must be the outer part of its call chain
# (tests/fixtures/python/early.py: leaf, mid, main, <module>) in every
# sample (a contiguous part of it where the walk ended at a frame it marked
# unreadable, in at most 1% of the samples), and 10 or more samples must
# have the whole chain. Before BPF set processes up itself, a burst had them on
# about 90% (docs/performance.md, "Python").
# usage: tests/integration/test_python_early.sh BUILD_DIR   (as root)
# Prints PASS/FAIL per check and ends with "N passed, N failed"; exits
# non-zero on any failure. Missing prerequisites are failures, not skips.
set -uo pipefail

. "$(dirname "$0")/lib/common.sh"

N=${EARLY_N:-20}
SPIN=${EARLY_SPIN_S:-1.5}
PCT=${PY_EARLY_PCT:-98}
LIB_PCT=${PY_EARLY_LIB_PCT:-95}
need_build "${1:?usage: test_python_early.sh BUILD_DIR}"
need_daemons
need_bins "$report"
need_tools python3 curl
fixture=$repo/tests/fixtures/python/early.py
pythons=()
[ -x /usr/bin/python3.11 ] && pythons+=(/usr/bin/python3.11) ||
	need python3.11 "Debian's /usr/bin/python3.11 is not installed (apt-get install python3.11)"
pyenv_root=$(pyenv root 2>/dev/null || echo "${PYENV_ROOT:-$HOME/.pyenv}")
lib_py=
for v in 13 12 11 10 9 8; do
	for p in "$pyenv_root"/versions/3.$v.*/bin/python3.$v; do
		[ -x "$p" ] && ldd "$p" 2>/dev/null | grep -q "libpython3.$v" && lib_py=$p && break 2
	done
done
[ -n "$lib_py" ] && pythons+=("$lib_py") ||
	need "a CPython 3.8-3.13 in libpython3.X.so" "none under $pyenv_root/versions"
[ "$prereq_ok" -eq 1 ] || finish

make_tmp opal-python-early
make_dirs "$tmp"
trap cleanup EXIT
start_symbolizer "$tmp" "$tmp/symbolizer.log" --whole-run --http-listen 127.0.0.1:0 || finish
port=$(http_port "$tmp/symbolizer.log")
start_collector "$tmp/collector.log" --socket "$tmp/run/opal.sock" --frequency 99 --interval 2 \
	--verbose || finish

k=0
for py in "${pythons[@]}"; do
	k=$((k + 1))
	d=$tmp/py$k
	mkdir -p "$d"
	echo "$py" >"$d/python"
	if [ "$py" = "$lib_py" ]; then echo "$LIB_PCT $PCT"; else echo "$PCT $PCT"; fi >"$d/pct"
	# it spins until the collector has set it up (under emulation that
	# takes seconds)
	"$py" "$fixture" spin 120 >"$d/first.out" 2>&1 &
	first=$!
	if wait_log "$tmp/collector.log" "pid $first: cpython frames on" 60; then
		pass "$py: the collector sets up a first process"
	else
		fail "$py: the collector sets up a first process" "no 'pid $first: cpython frames on'"
	fi
	kill "$first"
	wait "$first" 2>/dev/null
	pids=()
	for ((i = 0; i < N; i++)); do
		"$py" "$fixture" spin "$SPIN" >"$d/burst.$i.out" 2>&1 &
		pids+=($!)
	done
	"$py" "$fixture" fork "$N" "$SPIN" >"$d/fork.out" 2>&1 &
	pids+=($!)
	for p in "${pids[@]}"; do
		wait "$p" || fail "$py: workload $p exits 0" "exit status $?"
	done
done
sleep 4   # two more intervals
wait_acked "$tmp/collector.log" 240 "$coll_pid" ||
	fail "the symbolizer catches up before the stop" "not within 240 s"
# the counters come with each interval: read them once the final one
# is written (under emulation the collector runs intervals behind)
stop_daemon "collector stops cleanly" "$coll_pid" 30 "$tmp/collector.log"
wait_log "$tmp/symbolizer.log" 'interval [0-9]* \(final\): ' 20
curl -sf "http://127.0.0.1:$port/metrics" >"$tmp/metrics.txt"
grep -E '^opal_collector_(interp|samples)_[a-z_]+_total' "$tmp/metrics.txt" |
	sed -E 's/\{[^}]*\}//; s/^/    /'
early=$(awk '/^opal_collector_interp_early_total/ { s += $NF } END { print s + 0 }' "$tmp/metrics.txt")
stop_daemon "symbolizer stops cleanly" "$sym_pid" 60 "$tmp/symbolizer.log"
# at least Debian's burst (at exec) and every forked child (at fork); a
# libpython process may be set up by the collector first
if [ "$early" -ge $((3 * N)) ]; then
	pass "BPF set up $early processes itself (interp_early)"
else
	fail "BPF set up the burst and the forked children itself" \
		"interp_early $early, want >= $((3 * N))"
fi
if ! "$report" stacks "$tmp/out/profile.pb.gz" >"$tmp/stacks.txt" 2>"$tmp/stacks.err"; then
	fail "opal-report stacks" "$(head -n 3 "$tmp/stacks.err" | tr '\n' ' ')"
	finish
fi

report_lines < <(python3 - "$tmp" <<'PY'
import glob, os, re, sys
tmp = sys.argv[1]
sample = re.compile(r"^pid=(\d+) tid=\d+ comm=.* count=(\d+): (.*)$")
pyframe = re.compile(r"^(.+) \(([^()]+):\d+\)$")   # native frames have no (file:line)
WALK_ENDED = ("[unknown: unreadable interpreter frame]", "[unknown: bad interpreter frame]")
stacks = [m for m in map(sample.match, open(os.path.join(tmp, "stacks.txt"))) if m]
for d in sorted(glob.glob(os.path.join(tmp, "py*"))):
    py = open(os.path.join(d, "python")).read().strip()
    burst_pct, fork_pct = map(float, open(os.path.join(d, "pct")).read().split())
    spins = lambda pat: {int(l.split()[1]) for f in glob.glob(os.path.join(d, pat))
                         for l in open(f) if l.startswith("spin ")}
    fork_out = spins("fork.out")
    groups = (("burst", spins("burst.*.out"), ["burst_leaf", "burst_mid", "main", "<module>"],
               burst_pct),
              ("fork", fork_out, ["child_leaf", "child_mid", "main", "<module>"], fork_pct))
    for name, pids, want, pct in groups:
        in_eval = with_py = ours = right = whole = ended = 0
        for m in stacks:
            if int(m.group(1)) not in pids:
                continue
            frames, n = m.group(3).split(";"), int(m.group(2))
            if "_PyEval_EvalFrameDefault" not in frames:
                continue
            in_eval += n
            names = [pm.group(1) for pm in map(pyframe.match, frames) if pm and
                     pm.group(2).endswith("early.py")]
            # an unnamed Python frame ("[cpython: unknown code]": its code
            # object freed before the collector copied it) was walked too
            with_py += n if any(pyframe.match(f) or f.startswith("[cpython")
                                for f in frames) else 0
            if names and any(f in WALK_ENDED for f in frames):
                # a walk that stopped at a frame it could not read (a page
                # of a just-forked child, say) is marked, never wrong:
                # counted apart, at most 1% of the samples
                ended += n
                right_part = any(names == want[k:k + len(names)] for k in range(len(want)))
                right += n if right_part else 0
                ours += n
            elif names:
                ours += n
                right += n if names == want[len(want) - len(names):] else 0
                whole += n if names == want else 0
        what = "%s: %s (%d processes)" % (py, name, len(pids))
        if not pids:
            print("FAIL %s: its processes said they spin -- none did" % what)
            continue
        if in_eval < 20:
            print("FAIL %s: samples in the evaluation loop -- only %d" % (what, in_eval))
            continue
        share = 100.0 * with_py / in_eval
        print("%s %s: %.1f%% of %d samples in the evaluation loop have Python frames%s" % (
            "PASS" if share >= pct else "FAIL", what, share, in_eval,
            "" if share >= pct else " -- want >= %g%%" % pct))
        print("%s %s: the program's frames are its call chain's in every sample (%d of %d)%s" % (
            "PASS" if right == ours else "FAIL", what, right, ours,
            "" if right == ours else " -- the outer part of %s wanted" % ";".join(want)))
        print("%s %s: %d samples whose walk ended at a marked unreadable frame (at most 1%%)" % (
            "PASS" if ended * 100 <= in_eval else "FAIL", what, ended))
        print("%s %s: %d samples with the whole chain%s" % (
            "PASS" if whole >= 10 else "FAIL", what, whole,
            "" if whole >= 10 else " -- want >= 10"))
PY
)
finish
