#!/usr/bin/python3
"""Scale benchmark (docs/performance.md, "Scale"; issue 16).

Per scale point P (--points, default 1000,5000,10000): P processes over
P/5 distinct binaries (copies of bench/scale/prog.c that differ in a salt,
so each has its own content hash, i.e. its own opal file ID), spread round
robin; --busy of them (default 200, at most P) spin in scale_l1..scale_l4,
the rest sleep in pause(). All are started before the tool (the start-up
case: the tool meets a host that already runs them). Then, per tool:
  * start-up CPU: the tool's user + sys (schedstat) plus the run time of
    the BPF programs it holds (overhead.py's snapshot) over the first
    --startup seconds (default 30) from exec;
  * time to complete: from exec until every busy process has at least one
    complete stack (roots.py's definition) in an interval profile (opal:
    polled from its interval files, --interval 2; perf: from `perf script`
    timestamps), capped at --cap s (default 120), else ">cap" with how
    many busy processes were complete;
  * steady CPU over the next --steady seconds, as a share of the machine;
  * the collector's VmHWM and VmRSS at the end, the symbolizer's VmHWM;
  * the collector's counters (symbolizer /metrics) that show bounds and
    drops.
Prints tables; never passes or fails on a figure.
"""
import argparse
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True     # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(HERE, "..", "unwind"))
sys.path.insert(0, os.path.join(HERE, "..", "overhead"))
sys.path.insert(0, os.path.join(HERE, "..", "churn"))
import churn  # noqa: E402
import overhead  # noqa: E402
import roots  # noqa: E402

SHOW = re.compile(r"drop|evict|lost|full|error|no_|proc|unwind|trunc|fallback|^samples$|bound")


def wait_others(me):
    """Waits until no opal-collector other than ours runs."""
    said = False
    while True:
        r = subprocess.run(["pgrep", "-f", "opal-collector"], capture_output=True, text=True)
        others = [int(p) for p in r.stdout.split() if int(p) not in me and int(p) != os.getpid()]
        if not others:
            return
        if not said:
            print("  waiting for other opal-collector (%s) to end" % others, file=sys.stderr,
                  flush=True)
            said = True
        time.sleep(2)


class Binaries:
    def __init__(self, build, n):
        self.dir = os.path.join(build, "bench", "scale", "bin")
        os.makedirs(self.dir, exist_ok=True)
        base = os.path.join(self.dir, "prog")
        subprocess.run(["gcc", "-O2", "-g", "-fno-omit-frame-pointer", "-o", base,
                        os.path.join(HERE, "prog.c")], check=True)
        with open(base, "rb") as f:
            img = f.read()
        at = img.index(b"SALT-00000000")
        self.paths = []
        for i in range(n):
            p = os.path.join(self.dir, "sc%05d" % i)
            if not os.path.exists(p) or os.path.getmtime(p) < os.path.getmtime(base):
                data = img[:at] + (b"SALT-%08d" % i) + img[at + 13:]
                with open(p + ".tmp", "wb") as f:
                    f.write(data)
                os.chmod(p + ".tmp", 0o755)
                os.rename(p + ".tmp", p)
            self.paths.append(p)
        self.elf = roots.Elf(self.paths[0])

    def elfs(self, n):
        return {os.path.basename(p): self.elf for p in self.paths[:n]}


class Herd:
    """The sleeping and busy processes, in one process group."""

    def __init__(self):
        self.pgid = None
        self.pids = []

    def spawn(self, path, mode):
        kw = {"setpgroup": self.pgid or 0}
        pid = os.posix_spawn(path, [path, mode], os.environ, **kw)
        if self.pgid is None:
            self.pgid = pid
        self.pids.append(pid)
        return pid

    def kill(self):
        if self.pgid is not None:
            try:
                os.killpg(self.pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p in self.pids:
            try:
                os.waitpid(p, 0)
            except ChildProcessError:
                pass
        self.pids, self.pgid = [], None


def complete_pids(text, busy, elfs, done, t_of_line=None):
    for comm, count, frames, pid in text:
        if pid in busy and pid not in done and frames and roots.is_root(frames[-1], elfs):
            done[pid] = t_of_line


def opal_lines(text, elfs):
    for line in text.splitlines():
        m = roots.OPAL_LINE.match(line)
        if not m or not m.group(1).isdigit():
            continue
        frames = []
        for x in m.group(5).split(";"):
            u = roots.OPAL_UNSYM.match(x)
            frames.append((None, u.group(1), int(u.group(2), 16)) if u and u.group(1) in elfs
                          else (x, None, None))
        yield m.group(3), int(m.group(4)), frames, int(m.group(1))


class Bench:
    def __init__(self, a):
        self.a = a
        self.build = os.path.abspath(a.build)
        self.work = os.path.join(self.build, "bench", "scale", "run")
        os.makedirs(self.work, exist_ok=True)
        self.bins = Binaries(self.build, max(self.nbins(p) for p in a.points))
        self.cb = churn.Bench(a, {})

    def nbins(self, p):
        return max(1, p // 5)

    def run(self, tool, p, tag):
        a = self.a
        d = os.path.join(self.work, "%s-%d-%s" % (tool, p, tag))
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        nb = self.nbins(p)
        nbusy = min(a.busy, p)
        elfs = self.bins.elfs(nb)
        wait_others(set())
        herd = Herd()
        r = {"tool": tool, "procs": p, "bins": nb, "busy": nbusy}
        tool_p = sym = None
        try:
            t0 = time.monotonic()
            step = p / nbusy if nbusy else 0
            busy_at = {int(i * step) for i in range(nbusy)}
            for i in range(p):
                if i not in busy_at:
                    herd.spawn(self.bins.paths[i % nb], "sleep")
            busy = set()
            for i in sorted(busy_at):
                busy.add(herd.spawn(self.bins.paths[i % nb], "busy"))
            r["spawn_s"] = time.monotonic() - t0
            time.sleep(2)
            port = 0
            if tool == "opal":
                tool_p, sym, port = self.start_opal(d)
            else:
                data = os.path.join(d, "perf.data")
                tool_p = overhead.Proc(["perf", "record", "-a", "-g", "-F", str(a.hz), "-o",
                                        data], stderr=open(os.path.join(d, "tool.log"), "w"))
            t_exec = tool_p.t_exec
            s0 = overhead.snapshot([tool_p.pid], [tool_p.pid])
            s0["t"] = t_exec          # CPU before exec is 0
            s0["cpu"] = {tool_p.pid: 0}
            done, seen = {}, set()
            s_start = None
            deadline = t_exec / 1e9 + a.cap
            while True:
                now = time.monotonic()
                if s_start is None and now >= t_exec / 1e9 + a.startup:
                    s_start = overhead.snapshot([tool_p.pid], [tool_p.pid])
                if tool == "opal" and len(done) < len(busy):
                    for iv in sorted(glob.glob(os.path.join(d, "out", "intervals",
                                                            "*.pb.gz"))):
                        if iv in seen:
                            continue
                        seen.add(iv)
                        txt = subprocess.run([os.path.join(self.build, "opal-report"), "stacks",
                                              iv], capture_output=True, text=True).stdout
                        end = overhead.pprof_end_unix_ns(iv) / 1e9
                        since = end - (time.time() - (time.monotonic() - t_exec / 1e9))
                        complete_pids(opal_lines(txt, elfs), busy, elfs, done, since)
                if s_start is not None and (len(done) == len(busy) or now >= deadline
                                            or tool != "opal"):
                    break
                time.sleep(0.5)
            s1 = overhead.snapshot([tool_p.pid], [tool_p.pid])
            time.sleep(a.steady)
            s2 = overhead.snapshot([tool_p.pid], [tool_p.pid])
            r["hwm_kib"] = overhead.vm_kib(tool_p.pid, "VmHWM")
            r["rss_kib"] = overhead.vm_kib(tool_p.pid, "VmRSS")
            r["startup"] = self.cpu(s0, s_start, tool_p.pid)
            r["steady"] = self.cpu(s1, s2, tool_p.pid)
            if tool == "opal":
                time.sleep(3)
                r["counters"] = churn.metrics(port, None)
                r["sym_hwm_kib"] = overhead.vm_kib(sym.pid, "VmHWM")
                r["done"] = len(done)
                r["t_complete"] = max(done.values()) if len(done) == len(busy) and busy else None
        finally:
            if tool_p:
                tool_p.stop(signal.SIGTERM if tool == "opal" else signal.SIGINT, timeout=60)
            if sym:
                sym.stop(timeout=30)
            if tool == "perf" and tool_p:
                self.perf_complete(d, busy, elfs, r, t_exec)
            herd.kill()
        return r

    def perf_complete(self, d, busy, elfs, r, t_exec):
        path = os.path.join(d, "perf.txt")
        with open(path, "w") as f:
            subprocess.run(["perf", "script", "-i", os.path.join(d, "perf.data"), "-F",
                            "comm,pid,tid,time,ip,sym,dso"], stdout=f,
                           stderr=subprocess.DEVNULL)
        # first sample time of the file = tool start (approx.)
        done, first = {}, None
        head = re.compile(r"^(\S.*?)\s+(\d+)/(\d+)\s+([0-9.]+):\s*$")
        cur, frames = None, []

        def flush():
            if cur and cur[1] in busy and cur[1] not in done and frames and \
                    roots.is_root(frames[-1], elfs):
                done[cur[1]] = cur[2] - first
        with open(path, errors="replace") as f:
            for line in f:
                line = line.rstrip("\n")
                h = head.match(line)
                if h and not line[0].isspace():
                    flush()
                    t = float(h.group(4))
                    first = t if first is None else first
                    cur, frames = (h.group(1), int(h.group(2)), t), []
                    continue
                fm = roots.PERF_FRAME.match(line)
                if fm and cur:
                    addr, sy, dso = fm.groups()
                    if sy == "[unknown]":
                        frames.append((None, os.path.basename(dso), int(addr, 16)))
                    else:
                        frames.append((re.sub(r"\+0x[0-9a-f]+$", "", sy), None, None))
            flush()
        r["done"] = len(done)
        r["t_complete"] = max(done.values()) if busy and len(done) == len(busy) else None
        r["t_complete_note"] = "from perf's first sample"

    def cpu(self, a0, a1, pid):
        span = a1["t"] - a0["t"]
        rt, _, _ = overhead.bpf_delta(a0, a1)
        proc = a1["cpu"][pid] - a0["cpu"][pid]
        return {"cpu_s": (proc + rt) / 1e9, "bpf_s": rt / 1e9,
                "pct": 100.0 * (proc + rt) / (span * overhead.NCPU), "span_s": span / 1e9}

    def start_opal(self, d):
        # churn.py's start, with a shorter interval for the completeness poll
        cb = self.cb
        orig = overhead.Proc

        class P(orig):
            def __init__(s, argv, **kw):
                if argv and argv[0].endswith("opal-collector"):
                    argv = [x if x != "5" else str(self.a.interval) for x in argv]
                orig.__init__(s, argv, **kw)
        overhead.Proc = P
        try:
            return cb.start_opal(d)
        finally:
            overhead.Proc = orig


def fmt_complete(r, cap):
    if r.get("t_complete") is not None:
        return "%.1f s" % r["t_complete"]
    return ">%d s (%d/%d)" % (cap, r.get("done", 0), r["busy"])


def report(results, a):
    rows = []
    for r in results:
        rows.append(["%s %d Hz" % (r["tool"], a.hz), str(r["procs"]), str(r["bins"]),
                     str(r["busy"]), "%.1f" % r["spawn_s"],
                     "%.2f s (BPF %.2f)" % (r["startup"]["cpu_s"], r["startup"]["bpf_s"]),
                     fmt_complete(r, a.cap),
                     "%.2f%% (BPF %.2f%%)" % (r["steady"]["pct"],
                                              100 * r["steady"]["bpf_s"] /
                                              (r["steady"]["span_s"] * overhead.NCPU)),
                     "%.1f / %.1f" % ((r["hwm_kib"] or 0) / 1024, (r["rss_kib"] or 0) / 1024),
                     "%.1f" % (r["sym_hwm_kib"] / 1024) if r.get("sym_hwm_kib") else "-"])
    text = overhead.table(["tool", "procs", "binaries", "busy", "spawn s",
                           "start-up CPU (first %g s)" % a.startup, "busy complete after",
                           "steady CPU (%g s)" % a.steady, "VmHWM / VmRSS MiB",
                           "symbolizer VmHWM MiB"], rows)
    opal = [r for r in results if r.get("counters")]
    if opal:
        keys = sorted(k for k in {k for r in opal for k in r["counters"]} if SHOW.search(k))
        text += "\nopal's collector counters at the end of each run:\n\n" + overhead.table(
            ["counter"] + ["%d procs" % r["procs"] for r in opal],
            [[k] + ["%.0f" % r["counters"].get(k, 0) for r in opal] for k in keys])
    return text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--points", default="1000,5000,10000")
    ap.add_argument("--busy", type=int, default=200)
    ap.add_argument("--hz", type=int, default=99)
    ap.add_argument("--startup", type=float, default=30.0)
    ap.add_argument("--steady", type=float, default=30.0)
    ap.add_argument("--cap", type=float, default=120.0)
    ap.add_argument("--interval", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--tools", default="opal")
    ap.add_argument("--json")
    a = ap.parse_args()
    a.points = [int(x) for x in a.points.split(",")]
    a.startup = min(a.startup, a.cap)
    tools = a.tools.split(",")
    for t in tools:
        if t not in ("opal", "perf"):
            raise SystemExit("scale: unknown tool %s" % t)
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 65536)), hard))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    stats_fd = overhead.enable_bpf_stats()
    b = Bench(a)
    results = []
    try:
        for rep in range(a.repeat):
            for p in a.points:
                # perf only at the largest point: the peer
                for tool in [t for t in tools if t == "opal" or p == max(a.points)]:
                    r = b.run(tool, p, str(rep))
                    r["repeat"] = rep
                    results.append(r)
                    print("  %s %d procs #%d: start-up %.2f CPU s, complete %s, steady %.2f%%,"
                          " VmHWM %s KiB" % (tool, p, rep, r["startup"]["cpu_s"],
                                             fmt_complete(r, a.cap), r["steady"]["pct"],
                                             r["hwm_kib"]), file=sys.stderr, flush=True)
    finally:
        os.close(stats_fd)
    print(report(results, a))
    if "perf" not in tools:
        print("perf (the peer) was not run; --tools opal,perf runs it at the largest point.")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
