"""The checks of tests/integration/test_python.sh: opal's samples of
tests/fixtures/python/workload.py against the stacks the program reported
of itself (DIR/INDEX/expect-*.json), per interpreter of the INTERPRETERS
file ("INDEX VERSION SUPPORTED LABEL PATH", tab separated). Prints a
"PASS NAME" or "FAIL NAME: WHY" line per check, then one "summary: ..."
line naming every version passed, failed, unsupported and not installed.

usage: python_stacks.py --stacks FILE --dir DIR --interpreters FILE
                        --collector-log FILE --min PERCENT --scenarios A,B,...
--stacks is `opal-report stacks` output (Python frames are
"FUNCTION (FILE:LINE)"); a sample's Python frames, innermost first, must
equal the reported ones, its thread name the reported name, its last
frame the thread's root, with no error frame anywhere."""
import argparse
import collections
import glob
import json
import os
import re
import sys

SAMPLE_RE = re.compile(r"^pid=(\d+) tid=(\d+) comm=(.*) count=(\d+): (.*)$")
PY_RE = re.compile(r"^(.+) \(([^()]+):(\d+)\)$")
ERROR_RE = re.compile(r"^\[(unknown|truncated|cpython: unknown)")
# the error frames of interpreter frames (symbolizer/ingest.c)
INTERP_ERROR_RE = re.compile(r"^\[(unknown: unreadable interpreter frame|truncated interpreter "
                             r"stack|unknown: bad interpreter frame|cpython: unknown code)\]$")
EVAL = "_PyEval_EvalFrameDefault"
LEAF_CALL = "time_thread_time"   # time.thread_time, workload.py's cpu_time
MAIN_ROOT = "_start"
THREAD_ROOTS = ("clone3", "__clone3", "clone", "__clone")
MIN_SAMPLES = 10

# What each scenario of workload.py reports: the leaf functions, and for
# Python -> C -> Python the native frames between the leaf and its
# caller: first the evaluation function that runs the leaf, then one
# named like the C function that called back.
SCENARIOS = {
    "chain": ["chain_leaf"],
    "callback": ["sort_key", "reduce_step"],
    "threads": ["thread_python", "thread_deeper_leaf", "thread_zlib"],
    "generator": ["generator_leaf", "async_leaf"],
    "fork": ["fork_child_leaf", "fork_parent_leaf"],
    "early": ["early_leaf"],
}
DESCRIBED = {
    "chain_leaf": "call chain",
    "sort_key": "Python -> C -> Python, sorted(key=)",
    "reduce_step": "Python -> C -> Python, functools.reduce",
    "thread_python": "thread py-pure",
    "thread_deeper_leaf": "thread py-deeper",
    "thread_zlib": "thread py-zlib, in zlib without the GIL",
    "generator_leaf": "generator",
    "async_leaf": "asyncio coroutine chain",
    "fork_child_leaf": "forked child",
    "fork_parent_leaf": "parent of the forked child",
    "early_leaf": "process started before the collector",
}
CALLBACK = {"sort_key": ("sort_caller", "sort"), "reduce_step": ("reduce_caller", "reduce")}


class Sample:
    def __init__(self, line):
        m = SAMPLE_RE.match(line)
        if not m:
            raise ValueError("not a sample line: " + line[:200])
        self.pid, self.tid, self.comm = int(m.group(1)), int(m.group(2)), m.group(3)
        self.count = int(m.group(4))
        self.frames = m.group(5).split(";")
        self.py = []   # (index in frames, (function, file, line))
        for i, f in enumerate(self.frames):
            p = PY_RE.match(f)
            if p:
                self.py.append((i, (p.group(1), p.group(2), int(p.group(3)))))
        self.errors = [f for f in self.frames if ERROR_RE.match(f)]

    def python(self):
        return [f for _, f in self.py]


class Checks:
    def __init__(self):
        self.failed = collections.Counter()   # interpreter index -> failures

    def result(self, index, name, ok, why):
        if ok:
            print("PASS %s (%s)" % (name, why))
        else:
            print("FAIL %s: %s" % (name, why))
            self.failed[index] += 1


def share(checks, index, name, selected, good, minimum, explain):
    """PASS when at least `minimum` percent of the samples `selected`
    (at least MIN_SAMPLES) satisfy `good`; else FAIL with the most
    frequent other one, as `explain` shows it."""
    total = sum(s.count for s in selected)
    ok_n = sum(s.count for s in selected if good(s))
    other = collections.Counter()
    for s in selected:
        if not good(s):
            other[explain(s)] += s.count
    if total < MIN_SAMPLES:
        checks.result(index, name, False, "only %d samples (want %d)" % (total, MIN_SAMPLES))
        return
    ok = ok_n * 100 >= total * minimum
    why = "%d of %d samples" % (ok_n, total)
    if not ok:
        worst, n = other.most_common(1)[0]
        why += " (want %d%%); most frequent other (%d): %s" % (minimum, n, worst[:600])
    checks.result(index, name, ok, why)


def check_expected(checks, index, name, exp, samples, minimum):
    leaf = exp["leaf"]
    want = [tuple(f) for f in exp["frames"]]
    main = exp["pid"] == exp["tid"]
    mine = [s for s in samples if s.pid == exp["pid"] and s.tid == exp["tid"]]
    # the leaf's samples, and those lost: in the leaf's CPU clock call
    # (only the leaves call it) with no Python frame named
    selected = [s for s in mine if (s.py and s.py[0][1][0] == leaf) or
                (not s.py and EVAL in s.frames and LEAF_CALL in s.frames)]

    def root_ok(s):
        return s.frames[-1] == MAIN_ROOT if main else s.frames[-1] in THREAD_ROOTS

    def good(s):
        return (s.python() == want and root_ok(s) and not s.errors and
                s.comm == exp["thread"])

    def explain(s):
        return "comm=%s: %s" % (s.comm, ";".join(s.frames))

    share(checks, index, "%s: %s: %s, thread %s, to %s" % (
        name, DESCRIBED[leaf], " <- ".join("%s:%d" % (f[0], f[2]) for f in want),
        exp["thread"], "_start" if main else "clone3"), selected, good, minimum, explain)
    return selected, good


def check_callback(checks, index, name, leaf, selected, good, minimum):
    caller, native = CALLBACK[leaf]

    def between(s):
        at = {f[0]: i for i, f in s.py}
        return s.frames[at[leaf] + 1:at[caller]] if leaf in at and caller in at else []

    def native_ok(s):
        b = between(s)
        return (good(s) and b and b[0] == EVAL and
                any(native in f and not PY_RE.match(f) for f in b))

    share(checks, index, "%s: %s: %s's evaluation, then native *%s*, between %s and %s" % (
        name, DESCRIBED[leaf], EVAL, native, leaf, caller), selected, native_ok, minimum,
        lambda s: ";".join(between(s)) or ";".join(s.frames))


def check_supported(checks, index, name, directory, samples, minimum, scenarios):
    d = os.path.join(directory, str(index))
    found = {}
    for path in glob.glob(os.path.join(d, "expect-*.json")):
        with open(path) as f:
            exp = json.load(f)
        found[exp["leaf"]] = exp
    for scenario in scenarios:
        for leaf in SCENARIOS[scenario]:
            if leaf not in found:
                checks.result(index, "%s: %s: the program reported its stack" % (
                    name, DESCRIBED[leaf]), False, "no expect-*-%s.json in %s" % (leaf, d))
                continue
            exp = found[leaf]
            selected, good = check_expected(checks, index, name, exp, samples, minimum)
            if leaf in CALLBACK:
                check_callback(checks, index, name, leaf, selected, good, minimum)


def check_unsupported(checks, index, name, path, directory, samples, log):
    with open(os.path.join(directory, str(index), "chain.out")) as f:
        pids = [int(l.split()[1]) for l in f if l.startswith("ready ")]
    mine = [s for s in samples if s.pid in pids]
    in_eval = [s for s in mine if s.pid == s.tid and EVAL in s.frames]
    with_py = [s for s in mine if s.py]
    with_err = [s for s in mine if any(INTERP_ERROR_RE.match(f) for f in s.frames)]
    checks.result(index, "%s: no Python frames" % name, bool(mine) and not with_py,
                  "%d samples, %d with Python frames%s" % (
                      sum(s.count for s in mine), sum(s.count for s in with_py),
                      (": " + ";".join(with_py[0].frames)[:400]) if with_py else ""))
    checks.result(index, "%s: no interpreter error frames" % name, not with_err,
                  "%d with interpreter error frames%s" % (sum(s.count for s in with_err),
                                              (": " + ";".join(with_err[0].frames)[:400])
                                              if with_err else ""))
    share(checks, index, "%s: native stacks through %s to _start" % (name, EVAL), in_eval,
          lambda s: s.frames[-1] == MAIN_ROOT, 95, lambda s: ";".join(s.frames))
    # a library with _PyRuntime (3.7+) is an interpreter opal cannot walk:
    # said so; an older one is not recognised as an interpreter at all
    version = tuple(int(x) for x in re.findall(r"\d+", name)[:2])
    if version >= (3, 7):
        libdir = os.path.join(os.path.dirname(os.path.dirname(path)), "lib")
        said = [l for l in log if "interpreter opal cannot walk" in l and
                (path in l or libdir in l)]
        checks.result(index, "%s: the collector logs it as unsupported" % name, bool(said),
                      said[0].strip() if said else "no such line naming %s or %s" % (
                          path, libdir))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stacks", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--interpreters", required=True)
    ap.add_argument("--collector-log", required=True)
    ap.add_argument("--min", type=int, required=True)
    ap.add_argument("--scenarios", required=True, help="the scenarios run, comma separated")
    a = ap.parse_args()
    with open(a.stacks) as f:
        samples = [Sample(l.rstrip("\n")) for l in f if l.strip()]
    with open(a.collector_log, errors="replace") as f:
        log = f.readlines()
    checks = Checks()
    interpreters = []
    with open(a.interpreters) as f:
        for line in f:
            index, version, supported, label, path = line.rstrip("\n").split("\t")
            interpreters.append((int(index), version, supported == "1", label, path))
    for index, version, supported, label, path in interpreters:
        name = "%s (%s)" % (version, label if label != "pyenv" else "pyenv " + path)
        if supported:
            check_supported(checks, index, name, a.dir, samples, a.min,
                            a.scenarios.split(","))
        else:
            check_unsupported(checks, index, name, path, a.dir, samples, log)
    passed = ["%s (%s)" % (v, l) for i, v, s, l, _ in interpreters if s and not checks.failed[i]]
    failed = ["%s (%s)" % (v, l) for i, v, s, l, _ in interpreters if s and checks.failed[i]]
    unsupported = ["%s (%s%s)" % (v, l, ", checks failed" if checks.failed[i] else "")
                   for i, v, s, l, _ in interpreters if not s]
    minors = set(v.rsplit(".", 1)[0] for _, v, s, _, _ in interpreters if s)
    missing = ["3.%d" % m for m in range(8, 14) if "3.%d" % m not in minors]
    print("summary: python: passed %s; failed %s; unsupported, native frames only: %s; "
          "not tested (not installed): %s" % tuple(", ".join(x) or "none" for x in (
              passed, failed, unsupported, missing)))


main()
