#!/usr/bin/python3
"""Process churn benchmark (docs/performance.md, "Process churn").

Starts --rate processes a second for --seconds (default 100 for 60 s), a
mix taken in turn: `sh -c true`, `gcc -c` of a small C file (gcc runs cc1
and as: three new processes, one of them a 30 MB binary), `python3 -c
pass`. At most --max-inflight run at once; a start that would pass it is
skipped and counted, so the rate reached is printed beside the one asked.

Each tool runs alone with the same churn (--repeat times, the tools'
order rotating): opal (opal-collector at --hz with its symbolizer) and its
peer `perf record -a -g -F HZ`. Per run, over the churn window:
  * machine CPU: the tool's user + sys plus the run time of the BPF
    programs it holds, as a share of the machine (wall x CPUs), measured
    as bench/overhead does (overhead.py's snapshot); for opal also the
    symbolizer's share and the collector's BPF ns per sample;
  * peak RSS (VmHWM) of the collector (perf: of perf record) at the end;
  * stacks: of the samples whose thread is one of the churn's programs
    (comm sh, gcc, cc1, as, python3), the share that are complete: the
    user stack reaches the outermost frame (bench/unwind/roots.py's
    definition: _start by name, or the entry point's FDE in a stripped
    executable, or a thread's clone), read from opal's whole-run
    interval profiles and from `perf script`;
  * for opal, the collector's counters that say where samples went
    (from the symbolizer's /metrics), and what its unwind tables cost
    (unwind_build_cpu_nanoseconds; unwind_cache_hits/writes).
opal's unwind table cache (--unwind-cache) is DIR/bench/churn/unwind-cache,
kept across runs and invocations: the first run after it is emptied is
cold (every table built), later ones warm. --no-cache runs the collector
with --unwind-cache none.
Prints tables; never passes or fails on a figure.
"""
import argparse
import collections
import glob
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True     # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(HERE, "..", "unwind"))
sys.path.insert(0, os.path.join(HERE, "..", "overhead"))
import overhead  # noqa: E402
import roots  # noqa: E402

COUNTERS = ("samples", "samples_deferred", "samples_park_full", "proc_installs",
            "proc_install_errors", "unwind_tables_built", "unwind_tables_ahead",
            "unwind_table_errors", "unwind_tables_unloaded", "frames_no_mapping",
            "frames_no_unwind_info", "frames_truncated", "frames_fp_fallback", "lifecycle_lost",
            "samples_lost", "files_opened", "maps_reads", "unwind_cache_hits",
            "unwind_cache_writes", "unwind_builds_throttled", "unwind_build_cpu_nanoseconds")


def programs():
    """{comm: real path of its ELF} of the churn's programs."""
    cc1 = subprocess.run(["/usr/bin/gcc", "-print-prog-name=cc1"], capture_output=True, text=True,
                         check=True).stdout.strip()
    paths = {"sh": "/usr/bin/sh", "gcc": "/usr/bin/gcc", "cc1": cc1, "as": "/usr/bin/as",
             "python3": "/usr/bin/python3"}
    missing = [c for c, p in paths.items() if not p or not os.path.exists(p)]
    if missing:
        raise SystemExit("churn: not found: " + ", ".join(missing))
    return {c: os.path.realpath(p) for c, p in paths.items()}


class Churn:
    """Starts the mix at a fixed rate from the calling thread's loop."""

    def __init__(self, work, rate, max_inflight):
        self.rate, self.max_inflight = rate, max_inflight
        src = os.path.join(work, "small.c")
        with open(src, "w") as f:
            f.write("int churn_add(int a, int b) { return a + b; }\n"
                    "int churn_loop(int n) { int s = 0; for (int i = 0; i < n; i++)"
                    " s = churn_add(s, i); return s; }\n")
        self.argvs = [["/usr/bin/sh", "-c", "true"],
                      ["/usr/bin/gcc", "-O2", "-c", src, "-o", os.path.join(work, "small.o")],
                      ["/usr/bin/python3", "-c", "pass"]]
        self.running = []
        self.started = self.skipped = self.failed = 0

    def reap(self):
        alive = []
        for p in self.running:
            rc = p.poll()
            if rc is None:
                alive.append(p)
            elif rc != 0:
                self.failed += 1
        self.running = alive

    def run(self, seconds):
        """Runs for `seconds`; returns the wall time it took (s)."""
        t0 = time.monotonic()
        n = 0
        while True:
            now = time.monotonic()
            if now - t0 >= seconds:
                break
            due = int((now - t0) * self.rate) + 1
            while n < due:
                self.reap()
                if len(self.running) >= self.max_inflight:
                    self.skipped += 1
                else:
                    argv = self.argvs[n % len(self.argvs)]
                    self.running.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                                         stderr=subprocess.DEVNULL))
                    self.started += 1
                n += 1
            time.sleep(max(0.0, t0 + n / self.rate - time.monotonic()))
        return time.monotonic() - t0

    def drain(self):
        for p in self.running:
            p.wait()
        self.reap()


def tally_churn(samples, progs):
    """(samples, complete, {outermost frame: count} of the incomplete) of the churn's comms."""
    elfs = {os.path.basename(p): roots.Elf(p) for p in set(progs.values())}
    n = done = 0
    bad = collections.Counter()
    by_comm = collections.Counter()
    for comm, count, frames in samples(elfs):
        if comm not in progs:
            continue
        n += count
        by_comm[comm] += count
        if frames and roots.is_root(frames[-1], elfs):
            done += count
        else:
            bad["%s: %s" % (comm, roots.frame_text(frames[-1]) if frames else "(no frames)")] += count
    return n, done, bad, by_comm


def metrics(port, names=COUNTERS):
    """The collector's counters from the symbolizer's /metrics, summed over labels: those in
    `names`, or every one when None ({} when unreachable)."""
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as f:
            text = f.read().decode(errors="replace")
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        m = re.match(r"^opal_collector_([a-z0-9_]+?)(?:_total)?(?:\{[^}]*\})? ([0-9.e+-]+)$",
                     line)
        if m and (names is None or m.group(1) in names):
            out[m.group(1)] = out.get(m.group(1), 0) + float(m.group(2))
    return out


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise RuntimeError(what)
        time.sleep(0.05)


class Bench:
    def __init__(self, a, progs):
        self.a, self.progs = a, progs
        self.build = os.path.abspath(a.build)
        self.work = os.path.join(self.build, "bench", "churn", "run")
        self.cache = os.path.join(self.build, "bench", "churn", "unwind-cache")
        os.makedirs(self.work, exist_ok=True)

    def start_opal(self, d):
        for sub in ("state", "out"):
            os.makedirs(os.path.join(d, sub))
            os.chown(os.path.join(d, sub), 65534, 65534)
        os.makedirs(os.path.join(d, "run"))
        sock = os.path.join(d, "run", "s.sock")
        slog = os.path.join(d, "symbolizer.log")
        sym = overhead.Proc([os.path.join(self.build, "opal-symbolizer"), "--socket", sock,
                             "--state-dir", os.path.join(d, "state"), "--out-dir",
                             os.path.join(d, "out"), "--user", "nobody", "--http-listen",
                             "127.0.0.1:0"], stderr=open(slog, "w"))
        wait_for(lambda: os.path.exists(sock) and overhead.file_has(slog, "(port "), 10,
                 "the symbolizer did not start (%s)" % slog)
        with open(slog) as f:
            m = re.search(r"port (\d+)", f.read())
        port = int(m.group(1)) if m else 0
        log = os.path.join(d, "tool.log")
        p = overhead.Proc([os.path.join(self.build, "opal-collector"), "--socket", sock,
                           "--frequency", str(self.a.hz), "--interval", "5",
                           "--unwind-cache",
                           "none" if getattr(self.a, "no_cache", False) else self.cache],
                          stderr=open(log, "w"))
        wait_for(lambda: overhead.file_has(log, "sampling "), 60,
                 "the collector did not start sampling (%s)" % log)
        return p, sym, port

    def run(self, tool, tag):
        d = os.path.join(self.work, "%s-%s" % (tool, tag))
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        sym, port = None, 0
        if tool == "opal":
            p, sym, port = self.start_opal(d)
            stop_sig = signal.SIGTERM
        else:
            data = os.path.join(d, "perf.data")
            p = overhead.Proc(["perf", "record", "-a", "-g", "-F", str(self.a.hz), "-o", data],
                              stderr=open(os.path.join(d, "tool.log"), "w"))
            wait_for(lambda: os.path.exists(data) and os.path.getsize(data) > 0, 60,
                     "perf did not start")
            stop_sig = signal.SIGINT
        r = {"tool": tool, "hz": self.a.hz}
        try:
            time.sleep(2)
            churn = Churn(d, self.a.rate, self.a.max_inflight)
            pids = [p.pid] + ([sym.pid] if sym else [])
            a0 = overhead.snapshot(pids, [p.pid])
            wall = churn.run(self.a.seconds)
            a1 = overhead.snapshot(pids, [p.pid])
            r["hwm_kib"] = overhead.vm_hwm_kib(p.pid)
            churn.drain()
            r.update(started=churn.started, skipped=churn.skipped, failed=churn.failed,
                     rate=churn.started / wall)
            if tool == "opal":
                time.sleep(6)          # the last interval reaches the symbolizer
                r["counters"] = metrics(port)
                r["sym_hwm_kib"] = overhead.vm_hwm_kib(sym.pid)
        finally:
            p.stop(stop_sig, timeout=30)
            if sym:
                sym.stop(timeout=30)
        span = a1["t"] - a0["t"]
        rt, pe_rt, pe_cnt = overhead.bpf_delta(a0, a1)
        proc = a1["cpu"][p.pid] - a0["cpu"][p.pid]
        ncpu = overhead.NCPU
        r["cpu_pct"] = 100.0 * (proc + rt) / (span * ncpu)
        r["bpf_pct"] = 100.0 * rt / (span * ncpu)
        r["ns_per_sample"] = pe_rt / pe_cnt if pe_cnt else None
        r["forks_per_s"] = (a1["forks"] - a0["forks"]) / (span / 1e9)
        if sym:
            r["sym_pct"] = 100.0 * (a1["cpu"][sym.pid] - a0["cpu"][sym.pid]) / (span * ncpu)
        r.update(self.stacks(tool, d))
        return r

    def stacks(self, tool, d):
        if tool == "opal":
            path = os.path.join(d, "stacks.txt")
            with open(path, "w") as f:
                for iv in sorted(glob.glob(os.path.join(d, "out", "intervals", "*.pb.gz"))):
                    subprocess.run([os.path.join(self.build, "opal-report"), "stacks", iv],
                                   stdout=f, check=True)
            samples = lambda elfs: roots.opal_samples(path, elfs)  # noqa: E731
        else:
            path = os.path.join(d, "perf.txt")
            with open(path, "w") as f:
                subprocess.run(["perf", "script", "-i", os.path.join(d, "perf.data"), "-F",
                                "comm,pid,tid,ip,sym,dso"], stdout=f,
                               stderr=subprocess.DEVNULL, check=True)
            samples = lambda elfs: roots.perf_samples(path, elfs)  # noqa: E731
        n, done, bad, by_comm = tally_churn(samples, self.progs)
        with open(os.path.join(d, "incomplete.txt"), "w") as f:
            for root, c in bad.most_common(30):
                f.write("%6d  %s\n" % (c, root))
        return {"churn_samples": n, "complete": done, "by_comm": dict(by_comm),
                "bad_roots": bad.most_common(5)}


def med(vals, fmt):
    return overhead.med(vals, fmt)


def report(results, tools):
    rows = []
    for tool in tools:
        rs = [r for r in results if r["tool"] == tool]
        if not rs:
            continue
        pct = [100.0 * r["complete"] / r["churn_samples"] if r["churn_samples"] else None
               for r in rs]
        rows.append(["%s %d Hz" % (tool, rs[0]["hz"]),
                     med([r["cpu_pct"] for r in rs], "%.3f%%"),
                     med([r["bpf_pct"] for r in rs], "%.3f%%"),
                     med([r["ns_per_sample"] for r in rs], "%.0f"),
                     med([r["hwm_kib"] / 1024 for r in rs if r.get("hwm_kib")], "%.1f"),
                     med([r["churn_samples"] for r in rs], "%.0f"),
                     med(pct, "%.1f%%"),
                     med([r.get("sym_pct") for r in rs], "%.3f%%"),
                     med([r["rate"] for r in rs], "%.0f"),
                     med([r["forks_per_s"] for r in rs], "%.0f")])
    text = overhead.table(["tool", "machine CPU", "of which BPF", "BPF ns/sample",
                           "VmHWM MiB", "churn samples", "complete stacks",
                           "symbolizer CPU", "churn starts/s", "machine forks/s"], rows)
    opal = [r for r in results if r["tool"] == "opal" and r.get("counters")]
    if opal:
        keys = sorted({k for r in opal for k in r["counters"]})
        text += "\nopal's collector counters over the run (median):\n\n" + overhead.table(
            ["counter", "value"],
            [[k, "%.0f" % statistics.median([r["counters"].get(k, 0) for r in opal])]
             for k in keys])
    for tool in tools:
        rs = [r for r in results if r["tool"] == tool]
        if rs and rs[-1]["bad_roots"]:
            text += "\n%s, last run, outermost frames of incomplete churn stacks:\n" % tool
            text += "".join("  %6d  %s\n" % (c, root) for root, c in rs[-1]["bad_roots"])
    return text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--rate", type=float, default=100.0, help="processes started per second")
    ap.add_argument("--max-inflight", type=int, default=64)
    ap.add_argument("--hz", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--tools", default="opal,perf")
    ap.add_argument("--no-cache", action="store_true",
                    help="opal without its unwind table cache (--unwind-cache none)")
    ap.add_argument("--json", help="write every run's figures here")
    a = ap.parse_args()
    tools = a.tools.split(",")
    for t in tools:
        if t not in ("opal", "perf"):
            raise SystemExit("churn: unknown tool %s" % t)
    progs = programs()
    stats_fd = overhead.enable_bpf_stats()
    b = Bench(a, progs)
    results = []
    try:
        for rep in range(a.repeat):
            for tool in tools[rep % len(tools):] + tools[:rep % len(tools)]:
                r = b.run(tool, str(rep))
                r["repeat"] = rep
                results.append(r)
                c = r.get("counters", {})
                print("  %s #%d: CPU %.3f%%, VmHWM %s KiB, %d of %d churn samples complete, "
                      "%.0f starts/s%s" % (tool, rep, r["cpu_pct"], r["hwm_kib"], r["complete"],
                                           r["churn_samples"], r["rate"],
                                           "; tables: %.0f ms of CPU, %d from the cache" %
                                           (c.get("unwind_build_cpu_nanoseconds", 0) / 1e6,
                                            c.get("unwind_cache_hits", 0)) if c else ""),
                      file=sys.stderr, flush=True)
    finally:
        os.close(stats_fd)
    print(report(results, tools))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
