#!/usr/bin/python3
"""Profiler overhead benchmark (docs/performance.md, "Overhead").

Measures opal-collector (tool "opal"; "opal-offcpu" is the same with
--off-cpu at its default threshold) and its peers, `perf record -a -g` and
bpftrace's profile probe, one at a time on the same machine in the same run, while
two busy loops keep every CPU busy (run by bench/overhead/run.sh, which
builds things first; see there for the command line).

Per run of a tool at a frequency:
  * startup: wall time from exec until the tool samples (opal: the
    collector's "sampling ... CPUs" line; bpftrace: "Attaching"; perf: its
    first perf.data write), and for opal the wall time and collector CPU
    from exec to the end of the first interval in which every sample of
    both busy loops has a complete user stack (roots.py's definition),
    with --interval 1;
  * steady state over --measure seconds, starting --warmup seconds after
    the tool is sampling: the tool's CPU (user + sys: the sum of
    /proc/PID/task/*/schedstat run times, exact to the ns, which is what
    rusage reports in whole) plus the run time of its BPF programs
    (statistics on, see enable_bpf_stats; run_time_ns and run_cnt from
    `bpftool prog show --json` for the program ids the tool holds, found
    in /proc/PID/fdinfo), as a share of the machine (wall x CPUs), and BPF
    ns per program run (= per sample for the perf_event programs); for
    opal also the symbolizer's CPU over the same window, and the whole
    deployment (collector + BPF + symbolizer) per run. The symbolizer's
    first intervals symbolize every file of the busy loops from nothing:
    its steady state needs a --warmup past them (20 s does);
  * peak RSS: VmHWM just before the stop, and ru_maxrss from wait4;
  * the whole run's user + sys from wait4 (startup and shutdown included).
Runs are interleaved: repeat r runs every tool at every frequency, the
tools' order rotating from one repeat to the next. Figures are medians
over the repeats with [min, max].

Slowdown: a fixed workload (two `uw_work pow 20 N`, one per CPU, N
calibrated once to --slowdown-seconds) runs alone and under each tool at
99 Hz, --rounds rounds, the order rotating per round; the ratio is the
median wall time under the tool over the median alone (and the median of
the per-round ratios); the same for the workload's own user + sys time
(see Bench.workload).

Prints tables; never passes or fails on a figure.
"""
import argparse
import ctypes
import glob
import gzip
import json
import os
import signal
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True     # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(HERE, "..", "unwind"))
import roots  # noqa: E402

NCPU = os.cpu_count() or 1
PY311 = "/usr/bin/python3.11"
# opal's tools: the collector's extra arguments. opal-offcpu adds off-CPU
# profiles at the default threshold (docs/offcpu.md).
OPALS = {"opal": [], "opal-offcpu": ["--off-cpu"]}


# ---- process accounting ----------------------------------------------------
SYS_BPF = 321                 # x86-64
BPF_ENABLE_STATS = 32         # enum bpf_cmd
BPF_STATS_RUN_TIME = 0


def enable_bpf_stats():
    """Turns BPF run-time statistics on for as long as the returned
    descriptor is open (bpf(BPF_ENABLE_STATS), the counted equivalent of
    kernel.bpf_stats_enabled=1: another program resetting the sysctl to 0
    cannot switch them off under the benchmark). Raises OSError."""
    libc = ctypes.CDLL(None, use_errno=True)
    attr = (ctypes.c_uint64 * 1)(BPF_STATS_RUN_TIME)
    fd = libc.syscall(ctypes.c_long(SYS_BPF), ctypes.c_int(BPF_ENABLE_STATS), attr,
                      ctypes.c_uint(ctypes.sizeof(attr)))
    if fd < 0:
        e = ctypes.get_errno()
        raise OSError(e, "bpf(BPF_ENABLE_STATS): " + os.strerror(e))
    return fd

def cpu_ns(pid):
    """User + sys of every live thread of pid, in ns (schedstat run time)."""
    total = 0
    for path in glob.glob("/proc/%d/task/*/schedstat" % pid):
        try:
            with open(path) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def vm_kib(pid, field):
    """/proc/PID/status's `field` (VmHWM, VmRSS) in KiB, None when gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def vm_hwm_kib(pid):
    return vm_kib(pid, "VmHWM")


def bpf_prog_ids(pid):
    ids = set()
    for path in glob.glob("/proc/%d/fdinfo/*" % pid):
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith("prog_id:"):
                        ids.add(int(line.split()[1]))
        except (OSError, ValueError):
            pass
    return ids


def bpf_stats(pids):
    """{prog id: (type, run_time_ns, run_cnt)} of the programs pids hold."""
    ids = set()
    for p in pids:
        ids |= bpf_prog_ids(p)
    if not ids:
        return {}
    out = subprocess.run(["bpftool", "prog", "show", "--json"], capture_output=True,
                         text=True).stdout
    stats = {}
    for prog in json.loads(out or "[]"):
        if prog.get("id") in ids:
            stats[prog["id"]] = (prog.get("type"), prog.get("run_time_ns", 0),
                                 prog.get("run_cnt", 0))
    return stats


def forks():
    """Processes and threads created since boot (/proc/stat)."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("processes "):
                return int(line.split()[1])
    return 0


def snapshot(pids, bpf_pids):
    return {"t": time.monotonic_ns(), "cpu": {p: cpu_ns(p) for p in pids},
            "bpf": bpf_stats(bpf_pids), "forks": forks()}


def bpf_delta(a, b):
    """(run_time_ns, perf_event run_time_ns, perf_event run_cnt) between snapshots."""
    rt = pe_rt = pe_cnt = 0
    for pid, (typ, t1, c1) in b["bpf"].items():
        _, t0, c0 = a["bpf"].get(pid, (typ, 0, 0))
        rt += t1 - t0
        if typ == "perf_event":
            pe_rt += t1 - t0
            pe_cnt += c1 - c0
    return rt, pe_rt, pe_cnt


class Proc:
    """A child in its own session; stop() signals it by pid and reaps it
    with wait4 for its rusage."""

    def __init__(self, argv, stdout=None, stderr=None):
        self.argv = argv
        self.t_exec = time.monotonic_ns()
        self.p = subprocess.Popen(argv, stdout=stdout or subprocess.DEVNULL,
                                  stderr=stderr or subprocess.DEVNULL, start_new_session=True)
        self.pid = self.p.pid
        self.rusage = None

    def alive(self):
        return self.p.poll() is None if self.rusage is None else False

    def stop(self, sig=signal.SIGTERM, timeout=15):
        if self.rusage is not None:
            return
        try:
            os.kill(self.pid, sig)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + timeout
        while True:
            pid, status, ru = os.wait4(self.pid, os.WNOHANG)
            if pid == self.pid:
                self.rusage, self.p.returncode = ru, status
                return
            if time.monotonic() > deadline:
                os.kill(self.pid, signal.SIGKILL)
                deadline = time.monotonic() + 5
            time.sleep(0.02)

    def kill_group(self):
        """For shell loops: the whole session this script created."""
        try:
            os.killpg(self.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        self.stop()


def file_has(path, text):
    try:
        with open(path, errors="replace") as f:
            return text in f.read()
    except OSError:
        return False


# ---- pprof: interval times --------------------------------------------------
def _varint(buf, i):
    v = shift = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def pprof_end_unix_ns(path):
    """time_nanos + duration_nanos (fields 9, 10) of a gzip'd pprof Profile."""
    with gzip.open(path) as f:
        buf = f.read()
    i, t, d = 0, 0, 0
    while i < len(buf):
        key, i = _varint(buf, i)
        field, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(buf, i)
            if field == 9:
                t = v
            elif field == 10:
                d = v
        elif wt == 1:
            i += 8
        elif wt == 2:
            n, i = _varint(buf, i)
            i += n
        elif wt == 5:
            i += 4
        else:
            raise ValueError("%s: bad wire type %d" % (path, wt))
    return t + d


def busy_complete(report, path, busy, elfs):
    """True when every busy pid has samples in the interval file and all of
    them reach the root."""
    text = subprocess.run([report, "stacks", path], capture_output=True, text=True).stdout
    seen, bad = set(), False
    for line in text.splitlines():
        m = roots.OPAL_LINE.match(line)
        if not m or not m.group(1).isdigit() or int(m.group(1)) not in busy:
            continue
        seen.add(int(m.group(1)))
        frames = [(None, u.group(1), int(u.group(2), 16)) if (u := roots.OPAL_UNSYM.match(x))
                  and u.group(1) in elfs else (x, None, None) for x in m.group(5).split(";")]
        if not frames or not roots.is_root(frames[-1], elfs):
            bad = True
    return seen == busy and not bad


# ---- one run ------------------------------------------------------------------
class Bench:
    def __init__(self, a):
        self.a = a
        self.build = os.path.abspath(a.build)
        self.fix = os.path.join(self.build, "bench", "unwind", "fixtures")
        self.work = os.path.join(self.build, "bench", "overhead", "run")
        os.makedirs(self.work, exist_ok=True)
        self.elfs = {"uw_work": roots.Elf(os.path.join(self.fix, "uw_work")),
                     "python3.11": roots.Elf(PY311)}
        self.busy = []

    def start_busy(self):
        self.busy = [Proc([os.path.join(self.fix, "uw_work"), "qsort", "20"]),
                     Proc([PY311, os.path.join(HERE, "..", "unwind", "pyloop.py")])]

    def stop_busy(self):
        for p in self.busy:
            p.stop()
        self.busy = []

    def run_tool(self, tool, hz, tag, interval=5, startup_only=False):
        """One run; opal's startup figures come from runs with interval 1 and
        startup_only (stopped at the first complete interval), its steady
        state from runs at the default interval."""
        d = os.path.join(self.work, "%s-%d-%s" % (tool, hz, tag))
        subprocess.run(["rm", "-rf", d], check=True)
        os.makedirs(d)
        log = open(os.path.join(d, "tool.log"), "w")
        sym = None
        if tool in OPALS:
            for sub in ("state", "out"):
                os.makedirs(os.path.join(d, sub))
                os.chown(os.path.join(d, sub), 65534, 65534)
            # root's folder: the collector refuses a socket in one another user may write
            os.makedirs(os.path.join(d, "run"), exist_ok=True)
            sock = os.path.join(d, "run", "s.sock")
            sym = Proc([os.path.join(self.build, "opal-symbolizer"), "--socket", sock,
                        "--state-dir", os.path.join(d, "state"), "--out-dir",
                        os.path.join(d, "out"), "--user", "nobody", "--http-listen", "none"],
                       stderr=open(os.path.join(d, "symbolizer.log"), "w"))
            for _ in range(200):
                if os.path.exists(sock):
                    break
                time.sleep(0.05)
            argv = [os.path.join(self.build, "opal-collector"), "--socket", sock,
                    "--frequency", str(hz), "--interval", str(interval)] + OPALS[tool]
            ready = lambda: file_has(log.name, "sampling ")  # noqa: E731
            p = Proc(argv, stderr=log)
            stop_sig = signal.SIGTERM
        elif tool == "perf":
            data = os.path.join(d, "perf.data")
            p = Proc(["perf", "record", "-a", "-g", "-F", str(hz), "-o", data], stderr=log)
            ready = lambda: os.path.exists(data) and os.path.getsize(data) > 0  # noqa: E731
            stop_sig = signal.SIGINT
        else:
            out = os.path.join(d, "bpftrace.out")
            p = Proc(["bpftrace", "-e", "profile:hz:%d { @[kstack, ustack] = count(); }" % hz],
                     stdout=open(out, "w"), stderr=log)
            ready = lambda: file_has(out, "Attaching")  # noqa: E731
            stop_sig = signal.SIGINT

        r = {"tool": tool, "hz": hz}
        busy = {b.pid for b in self.busy}
        trace = []                 # (monotonic ns, collector cpu ns) for opal's startup
        seen_files = set()
        t_ready = None
        t_end = None
        try:
            while True:
                now = time.monotonic_ns()
                if not p.alive():
                    raise RuntimeError("%s exited early (see %s)" % (tool, log.name))
                if t_ready is None and ready():
                    t_ready = now
                    r["ready_s"] = (now - p.t_exec) / 1e9
                    r["ready_cpu_s"] = cpu_ns(p.pid) / 1e9
                    t0 = now + int(self.a.warmup * 1e9)
                    t_end = t0 + int(self.a.measure * 1e9)
                    a0 = None
                if startup_only:
                    trace.append((now, cpu_ns(p.pid)))
                    self.check_first(p, d, r, trace, busy, seen_files)
                    if "first_s" in r:
                        return r
                    if now - p.t_exec > 30e9:
                        raise RuntimeError("opal: no complete interval in 30 s (%s)" % d)
                elif t_ready is not None:
                    if a0 is None and now >= t0:
                        a0 = snapshot([p.pid] + ([sym.pid] if sym else []), [p.pid])
                    if now >= t_end:
                        a1 = snapshot([p.pid] + ([sym.pid] if sym else []), [p.pid])
                        break
                elif now - p.t_exec > 60e9:
                    raise RuntimeError("%s did not start sampling in 60 s" % tool)
                time.sleep(0.05)
            r["hwm_kib"] = vm_hwm_kib(p.pid)
            if sym:
                r["sym_hwm_kib"] = vm_hwm_kib(sym.pid)
        finally:
            p.stop(stop_sig)
            if sym:
                sym.stop()
            log.close()
        wall = a1["t"] - a0["t"]
        rt, pe_rt, pe_cnt = bpf_delta(a0, a1)
        proc = a1["cpu"][p.pid] - a0["cpu"][p.pid]
        r["cpu_pct"] = 100.0 * (proc + rt) / (wall * NCPU)
        r["proc_pct"] = 100.0 * proc / (wall * NCPU)
        r["bpf_pct"] = 100.0 * rt / (wall * NCPU)
        r["ns_per_sample"] = pe_rt / pe_cnt if pe_cnt else None
        r["samples_per_s"] = pe_cnt / (wall / 1e9) if pe_cnt else None
        r["forks_per_s"] = (a1["forks"] - a0["forks"]) / (wall / 1e9)
        if sym:
            r["sym_pct"] = 100.0 * (a1["cpu"][sym.pid] - a0["cpu"][sym.pid]) / (wall * NCPU)
        ru = p.rusage
        r["run_cpu_s"] = ru.ru_utime + ru.ru_stime
        r["maxrss_kib"] = ru.ru_maxrss
        return r

    def check_first(self, p, d, r, trace, busy, seen_files):
        files = sorted(glob.glob(os.path.join(d, "out", "intervals", "*.pb.gz")))
        for path in files:
            if path in seen_files:
                continue
            seen_files.add(path)
            if not busy_complete(os.path.join(self.build, "opal-report"), path, busy, self.elfs):
                continue
            # The interval's end in monotonic time: unix end - (unix now - mono now).
            offset = time.time_ns() - time.monotonic_ns()
            end = pprof_end_unix_ns(path) - offset
            r["first_s"] = (end - p.t_exec) / 1e9
            before = [c for t, c in trace if t <= end]
            r["first_cpu_s"] = (before[-1] if before else 0) / 1e9
            return

    # ---- slowdown -----------------------------------------------------------
    def workload(self, n):
        """Runs the fixed workload; returns (wall s, its user + sys s). With
        CONFIG_IRQ_TIME_ACCOUNTING off (Debian's default) the sampling
        interrupt, perf's callchain walk and BPF programs are charged to the
        task they interrupt, so the CPU time shows every profiler's
        in-kernel cost, and depends far less than the wall time on what
        else the machine runs."""
        t = time.monotonic_ns()
        ps = [subprocess.Popen([os.path.join(self.fix, "uw_work"), "pow", "20", str(n)],
                               stdout=subprocess.DEVNULL) for _ in range(NCPU)]
        cpu = 0.0
        for x in ps:
            _, _, ru = os.wait4(x.pid, 0)
            x.returncode = 0
            cpu += ru.ru_utime + ru.ru_stime
        return (time.monotonic_ns() - t) / 1e9, cpu

    def calibrate(self):
        n = 20000
        while True:
            s = self.workload(n)[0]
            if s >= 1.0:
                return max(1, int(n * self.a.slowdown_seconds / s))
            n *= 4

    def start_for_slowdown(self, tool, d):
        """Starts a tool at 99 Hz and waits until it samples; returns what to stop."""
        os.makedirs(d, exist_ok=True)
        hz = "99"
        if tool in OPALS:
            for sub in ("state", "out"):
                os.makedirs(os.path.join(d, sub), exist_ok=True)
                os.chown(os.path.join(d, sub), 65534, 65534)
            os.makedirs(os.path.join(d, "run"), exist_ok=True)
            sock = os.path.join(d, "run", "s.sock")
            if os.path.exists(sock):
                os.unlink(sock)
            sym = Proc([os.path.join(self.build, "opal-symbolizer"), "--socket", sock,
                        "--state-dir", os.path.join(d, "state"), "--out-dir",
                        os.path.join(d, "out"), "--user", "nobody", "--http-listen", "none"])
            for _ in range(200):
                if os.path.exists(sock):
                    break
                time.sleep(0.05)
            log = os.path.join(d, "collector.log")
            p = Proc([os.path.join(self.build, "opal-collector"), "--socket", sock,
                      "--frequency", hz] + OPALS[tool], stderr=open(log, "w"))
            ready = lambda: file_has(log, "sampling ")  # noqa: E731
            procs = [(p, signal.SIGTERM), (sym, signal.SIGTERM)]
        elif tool == "perf":
            data = os.path.join(d, "perf.data")
            p = Proc(["perf", "record", "-a", "-g", "-F", hz, "-o", data])
            ready = lambda: os.path.exists(data) and os.path.getsize(data) > 0  # noqa: E731
            procs = [(p, signal.SIGINT)]
        else:
            out = os.path.join(d, "bpftrace.out")
            p = Proc(["bpftrace", "-e", "profile:hz:99 { @[kstack, ustack] = count(); }"],
                     stdout=open(out, "w"))
            ready = lambda: file_has(out, "Attaching")  # noqa: E731
            procs = [(p, signal.SIGINT)]
        deadline = time.monotonic() + 60
        while not ready():
            if not p.alive() or time.monotonic() > deadline:
                for x, s in procs:
                    x.stop(s)
                raise RuntimeError("%s did not start (slowdown, %s)" % (tool, d))
            time.sleep(0.05)
        time.sleep(1.0)
        return procs

    def slowdown(self, tools):
        n = self.calibrate()
        modes = ["none"] + tools
        walls = {m: [] for m in modes}
        cpus = {m: [] for m in modes}
        for rnd in range(self.a.rounds):
            order = modes[rnd % len(modes):] + modes[:rnd % len(modes)]
            for m in order:
                procs = []
                if m != "none":
                    procs = self.start_for_slowdown(
                        m, os.path.join(self.work, "slowdown-%s-%d" % (m, rnd)))
                try:
                    w, c = self.workload(n)
                    walls[m].append(w)
                    cpus[m].append(c)
                finally:
                    for x, s in procs:
                        x.stop(s)
        return n, walls, cpus


# ---- output ---------------------------------------------------------------------
def med(vals, fmt):
    vals = [v for v in vals if v is not None]
    if not vals:
        return "n/a"
    return (fmt % statistics.median(vals)) + " [" + (fmt % min(vals)) + "–" + \
        (fmt % max(vals)) + "]"


def table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def report(results, tools, freqs):
    rows, ratio_rows = [], []
    for hz in freqs:
        for tool in tools:
            rs = [r for r in results if r["tool"] == tool and r["hz"] == hz]
            if not rs:
                continue
            mib = lambda k: [r[k] / 1024 if r.get(k) else None for r in rs]  # noqa: E731
            rows.append([
                "%s %d Hz" % (tool, hz),
                med([r["cpu_pct"] for r in rs], "%.3f%%"),
                med([r["bpf_pct"] for r in rs], "%.3f%%"),
                med([r["ns_per_sample"] for r in rs], "%.0f"),
                med([r["samples_per_s"] for r in rs], "%.0f"),
                med(mib("hwm_kib"), "%.1f"),
                med([r.get("ready_s") for r in rs], "%.2f"),
                med([r.get("ready_cpu_s") for r in rs], "%.3f"),
                med([r.get("first_s") for r in rs], "%.2f") if tool == "opal" else "n/a",
                med([r.get("first_cpu_s") for r in rs], "%.3f") if tool == "opal" else "n/a",
                med([r["run_cpu_s"] for r in rs], "%.2f"),
                med([r["forks_per_s"] for r in rs], "%.0f"),
            ])
        opal = [r["cpu_pct"] for r in results if r["tool"] == "opal" and r["hz"] == hz]
        for tool in tools:
            if tool == "opal" or not opal:
                continue
            peer = [r["cpu_pct"] for r in results if r["tool"] == tool and r["hz"] == hz]
            if peer and statistics.median(peer) > 0:
                ratio_rows.append(["%d Hz" % hz, "opal / %s" % tool, "%.2f" % (
                    statistics.median(opal) / statistics.median(peer))])
    head = ["tool", "machine CPU", "of which BPF", "BPF ns/sample", "samples/s", "VmHWM MiB",
            "start→sampling s", "CPU s to sampling", "start→complete stacks s",
            "CPU s to complete", "run user+sys s", "machine forks/s"]
    text = table(head, rows)
    sym = [r for r in results if r["tool"] == "opal" and r.get("sym_pct") is not None]
    if sym:
        srows = []
        for hz in freqs:
            rs = [r for r in sym if r["hz"] == hz]
            if rs:
                srows.append(["opal-symbolizer %d Hz" % hz, med([r["sym_pct"] for r in rs],
                              "%.3f%%"), med([r["sym_hwm_kib"] / 1024 for r in rs
                                              if r.get("sym_hwm_kib")], "%.1f"),
                              med([r["cpu_pct"] + r["sym_pct"] for r in rs], "%.3f%%")])
        text += "\n" + table(["process", "machine CPU", "VmHWM MiB",
                               "whole deployment (collector + BPF + symbolizer)"], srows)
    if ratio_rows:
        text += "\n" + table(["frequency", "CPU ratio", "median / median"], ratio_rows)
    return text


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--warmup", type=float, default=1.5)
    ap.add_argument("--measure", type=float, default=5.0)
    ap.add_argument("--freqs", default="20,99")
    ap.add_argument("--tools", default="opal,perf,bpftrace")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--slowdown-seconds", type=float, default=10.0)
    ap.add_argument("--json", help="write every run's figures here")
    a = ap.parse_args()
    tools = a.tools.split(",")
    freqs = [int(x) for x in a.freqs.split(",")]

    stats_fd = enable_bpf_stats()
    b = Bench(a)
    results = []
    try:
        b.start_busy()
        time.sleep(1)
        for rep in range(a.repeat):
            for hz in freqs:
                order = tools[rep % len(tools):] + tools[:rep % len(tools)]
                for tool in order:
                    r = b.run_tool(tool, hz, str(rep))
                    r["repeat"] = rep
                    if tool == "opal":
                        st = b.run_tool(tool, hz, "%d-startup" % rep, interval=1,
                                        startup_only=True)
                        r["first_s"], r["first_cpu_s"] = st["first_s"], st["first_cpu_s"]
                    results.append(r)
                    print("  %s %d Hz #%d: CPU %.3f%% (BPF %.3f%%), VmHWM %s KiB, first complete %s"
                          % (tool, hz, rep, r["cpu_pct"], r["bpf_pct"], r["hwm_kib"],
                             "%.2f s" % r["first_s"] if "first_s" in r else "-"),
                          file=sys.stderr, flush=True)
        b.stop_busy()
        slow = b.slowdown(tools) if a.rounds > 0 else None
    finally:
        b.stop_busy()
        os.close(stats_fd)

    print(report(results, tools, freqs))
    if slow:
        n, walls, cpus = slow
        base, cbase = statistics.median(walls["none"]), statistics.median(cpus["none"])
        rows = [["none", med(walls["none"], "%.2f"), "1.000", "-", med(cpus["none"], "%.2f"),
                 "1.000", "-"]]
        for t in tools:
            per_round = [w / x for w, x in zip(walls[t], walls["none"])]
            cpu_round = [w / x for w, x in zip(cpus[t], cpus["none"])]
            rows.append([t, med(walls[t], "%.2f"), "%.3f" % (statistics.median(walls[t]) / base),
                         med(per_round, "%.3f"), med(cpus[t], "%.2f"),
                         "%.3f" % (statistics.median(cpus[t]) / cbase), med(cpu_round, "%.3f")])
        print("Slowdown at 99 Hz: %d x `uw_work pow 20 %d` (one per CPU), %d rounds\n"
              % (NCPU, n, a.rounds))
        print(table(["profiler", "wall s", "wall ratio of medians", "wall per-round ratio",
                     "workload user+sys s", "CPU ratio of medians", "CPU per-round ratio"],
                    rows))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"runs": results, "slowdown": slow}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
