#!/usr/bin/python3
"""Cost of Python frames (docs/performance.md, "Python"). Runs as root.

usage: bench/python/cost.py [--build DIR] [--python PATH] [--seconds S]
                            [--repeat N] [--codes N] [--burst N] [--burst-only]

Walk cost: per repeat, per frequency (20 and 99 Hz) and per mode (Python
frames, and the same collector with --native-only: what a profiler
without interpreter support pays), the order rotating from one repeat to
the next, a fresh symbolizer and collector profile four `deep.py deep`
processes (30 Python frames, about 20 native ones) on a machine whose
CPUs they keep busy. Over --seconds, after 3 s of warm-up: BPF ns per
sample (run time / run count of the collector's perf_event programs,
statistics on), the collector's CPU as a share of the machine, and its
peak RSS (VmHWM). Medians with [min, max]. The stacks of the last run
with Python frames are checked: the share of the leaf's samples with all
30 Python frames and a native root, and the mean frame counts.

Burst: --burst (100) `deep.py deep` processes started at once under a
fresh collector at 99 Hz, the same stack checks on their samples (BPF
sets each process up itself once the collector has set up the first:
docs/interpreters.md, "Set up in BPF"). --burst-only runs only this.

Memory: the collector at 5000 Hz and a symbolizer (no whole-run profile)
profile one `deep.py
codes N` process (N distinct code objects called in turn), then, for a
baseline, `deep.py codes 10`; each run reads the collector's code object
copies from the symbolizer's /metrics and both daemons' RSS at the end.
The difference between the runs, per 10,000 code objects copied, is the
memory that 10,000 distinct code objects cost: in the collector their raw
bytes (the code object cache) and the distinct stacks they make in its
intervals, in the symbolizer their parsed names and line tables and the
stacks, locations and functions of its recent profiles.

Prints tables; never passes or fails on a figure.
"""
import argparse
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True     # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(HERE, "..", "overhead"))
from overhead import NCPU, Proc, bpf_delta, cpu_ns, enable_bpf_stats, snapshot  # noqa: E402

DEEP = os.path.join(HERE, "deep.py")
SAMPLE_RE = re.compile(r"^pid=(\d+) tid=(\d+) comm=(.*) count=(\d+): (.*)$")
PY_FRAME_RE = re.compile(r"^.+ \([^()]+:\d+\)$")


def vm_kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemons:
    """A symbolizer (as nobody, --whole-run) and a collector in a fresh
    temp folder."""

    def __init__(self, build, collector_args, http=None, whole_run=True):
        self.dir = tempfile.mkdtemp(prefix="opal-bench-python.")
        for d in ("state", "out", "run"):
            os.mkdir(os.path.join(self.dir, d))
        for d in ("state", "out"):
            shutil.chown(os.path.join(self.dir, d), "nobody")
        sock = os.path.join(self.dir, "run", "opal.sock")
        self.sym_log = os.path.join(self.dir, "symbolizer.log")
        self.sym = Proc([os.path.join(build, "opal-symbolizer"), "--socket", sock,
                         "--state-dir", os.path.join(self.dir, "state"),
                         "--out-dir", os.path.join(self.dir, "out"), "--user", "nobody",
                         "--http-listen", http or "none"] + (["--whole-run"] if whole_run else []),
                        stdout=open(self.sym_log, "w"), stderr=subprocess.STDOUT)
        wait_for(lambda: "listening on" in read(self.sym_log), 30, "the symbolizer listens")
        self.coll_log = os.path.join(self.dir, "collector.log")
        self.coll = Proc([os.path.join(build, "opal-collector"), "--socket", sock,
                          "--interval", "2"] + collector_args,
                         stdout=open(self.coll_log, "w"), stderr=subprocess.STDOUT)
        wait_for(lambda: re.search(r"opal-collector: run [0-9a-f]{16}:", read(self.coll_log)),
                 30, "the collector samples")

    def stop(self):
        self.coll.stop()
        wait_for(lambda: "(final)" in read(self.sym_log), 60, "the final interval")
        self.sym.stop()

    def stacks(self, build):
        out = subprocess.run([os.path.join(build, "opal-report"), "stacks",
                              os.path.join(self.dir, "out", "profile.pb.gz")],
                             capture_output=True, text=True, check=True).stdout
        return out.splitlines()

    def remove(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def wait_for(cond, seconds, what):
    end = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > end:
            raise SystemExit("cost.py: timed out waiting for " + what)
        time.sleep(0.1)


def start_work(python, argv, n):
    procs = [Proc([python, DEEP] + argv, stdout=subprocess.PIPE) for _ in range(n)]
    for p in procs:
        line = p.p.stdout.readline().decode()
        if not line.startswith("ready "):
            raise SystemExit("cost.py: deep.py did not start: " + line)
    return procs


def walk_run(a, hz, native_only):
    d = Daemons(a.build, ["--frequency", str(hz)] + (["--native-only"] if native_only else []))
    work = start_work(a.python, ["deep", str(a.seconds + 10)], 4)
    try:
        time.sleep(3)
        pid = d.coll.pid
        s0, c0 = snapshot([], [pid]), cpu_ns(pid)
        time.sleep(a.seconds)
        s1, c1 = snapshot([], [pid]), cpu_ns(pid)
        hwm = vm_kib(pid, "VmHWM")
    finally:
        for w in work:
            w.stop()
    d.stop()
    _, rt, cnt = bpf_delta(s0, s1)
    wall = s1["t"] - s0["t"]
    res = {"ns": rt / cnt if cnt else float("nan"), "cnt": cnt,
           "cpu": 100.0 * (c1 - c0) / (wall * NCPU), "hwm": hwm / 1024.0,
           "pids": {w.pid for w in work}}
    return d, res


def depth_check(lines, pids):
    """Of the deep processes' samples: (samples in the evaluation loop,
    share of those with Python frames, samples in leaf, share of those
    with all 30 Python frames and _start, mean Python frames and mean
    native frames in leaf)."""
    in_eval = with_py = total = full = py_sum = nat_sum = 0
    for line in lines:
        m = SAMPLE_RE.match(line)
        if not m or int(m.group(1)) not in pids:
            continue
        frames, n = m.group(5).split(";"), int(m.group(4))
        py = sum(1 for f in frames if PY_FRAME_RE.match(f))
        if "_PyEval_EvalFrameDefault" in frames:
            in_eval += n
            with_py += n if py else 0
        if not frames[0].startswith("leaf (") or not PY_FRAME_RE.match(frames[0]):
            continue
        total += n
        py_sum += py * n
        nat_sum += (len(frames) - py) * n
        if py == 30 and frames[-1] == "_start":
            full += n
    pct = lambda a, b: 100.0 * a / b if b else float("nan")  # noqa: E731
    return (in_eval, pct(with_py, in_eval), total, pct(full, total),
            py_sum / total if total else float("nan"), nat_sum / total if total else float("nan"))


def burst_run(a, n):
    """n deep.py processes started at once under a fresh collector at 99 Hz."""
    d = Daemons(a.build, ["--frequency", "99"])
    work = [Proc([a.python, DEEP, "deep", str(a.seconds)]) for _ in range(n)]
    for w in work:
        w.p.wait(timeout=a.seconds * n + 60)
    time.sleep(4)   # two more intervals
    d.stop()
    res = depth_check(d.stacks(a.build), {w.pid for w in work})
    d.remove()
    return res


def metric(port, name):
    body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10).read()
    total = 0
    for line in body.decode().splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


def memory_run(a, n):
    port = free_port()
    d = Daemons(a.build, ["--frequency", "5000"], http="127.0.0.1:%d" % port, whole_run=False)
    work = start_work(a.python, ["codes", str(n), str(a.seconds + 10)], 1)
    try:
        time.sleep(a.seconds + 4)   # the last copies reach the symbolizer within two intervals
        reads = metric(port, "opal_collector_interp_code_reads_total")
        rss = (vm_kib(d.coll.pid, "VmRSS"), vm_kib(d.sym.pid, "VmRSS"))
    finally:
        for w in work:
            w.stop()
    d.stop()
    d.remove()
    return reads, rss


def med(vals, fmt):
    return (fmt + " [" + fmt + "-" + fmt + "]") % (statistics.median(vals), min(vals), max(vals))


def print_stacks(runs):
    for name, r in runs:
        print("stacks of %s: %d samples in the evaluation loop, %.2f%% with Python frames; "
              "%d in leaf, %.2f%% with all 30 Python frames and _start; mean %.1f Python + "
              "%.1f native frames" % ((name,) + r))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--python", default="/usr/bin/python3.11")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--codes", type=int, default=10000)
    ap.add_argument("--burst", type=int, default=100)
    ap.add_argument("--burst-only", action="store_true", help="only the burst run")
    a = ap.parse_args()
    version = subprocess.run([a.python, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, check=True).stdout.strip()
    if a.burst_only:
        print_stacks([("%d deep.py started at once (99 Hz, %g s)" % (a.burst, a.seconds),
                       burst_run(a, a.burst))])
        return
    stats_fd = enable_bpf_stats()
    modes = [("python frames", False), ("--native-only", True)]
    runs = [(hz, m) for hz in (20, 99) for m in modes]
    res = {(hz, m[0]): [] for hz, m in runs}
    last = None
    try:
        for r in range(a.repeat):
            k = r % len(runs)
            for hz, (name, native_only) in runs[k:] + runs[:k]:
                d, x = walk_run(a, hz, native_only)
                res[(hz, name)].append(x)
                print("repeat %d: %2d Hz %-14s %6.0f ns/sample (%d samples), collector "
                      "%.3f%% of the machine, VmHWM %.1f MiB" % (
                          r + 1, hz, name, x["ns"], x["cnt"], x["cpu"], x["hwm"]), flush=True)
                if not native_only:
                    if last:
                        last[0].remove()
                    last = (d, x["pids"])
                else:
                    d.remove()
        lines = last[0].stacks(a.build) if last else []
        steady = depth_check(lines, last[1] if last else set())
        if last:
            last[0].remove()
        burst = burst_run(a, a.burst)
        mem = {n: memory_run(a, n) for n in (a.codes, 10)}
    finally:
        os.close(stats_fd)

    print("\nPython %s (%s), four deep.py processes on %d CPUs, %g s per run, %d repeats"
          % (version, a.python, NCPU, a.seconds, a.repeat))
    print("%-6s %-14s %-26s %-28s %s" % ("Hz", "mode", "BPF ns/sample", "collector % of machine",
                                         "collector VmHWM MiB"))
    for hz in (20, 99):
        for name, _ in modes:
            v = res[(hz, name)]
            print("%-6d %-14s %-26s %-28s %s" % (
                hz, name, med([x["ns"] for x in v], "%.0f"), med([x["cpu"] for x in v], "%.3f"),
                med([x["hwm"] for x in v], "%.1f")))
        p = statistics.median(x["ns"] for x in res[(hz, "python frames")])
        n = statistics.median(x["ns"] for x in res[(hz, "--native-only")])
        print("%-6d ratio python frames / --native-only: BPF ns %.2f" % (hz, p / n))
    print_stacks([("the last walk run with Python frames", steady),
                  ("%d deep.py started at once (99 Hz, %g s)" % (a.burst, a.seconds), burst)])
    (rb, (cb, sb)), (r0, (c0, s0)) = mem[a.codes], mem[10]
    per = 10000.0 / max(rb - r0, 1)
    print("memory: %d code objects copied (baseline %d): collector +%.1f MiB, symbolizer "
          "+%.1f MiB per 10,000 code objects" % (rb, r0, (cb - c0) * per / 1024.0,
                                                 (sb - s0) * per / 1024.0))


if __name__ == "__main__":
    main()
