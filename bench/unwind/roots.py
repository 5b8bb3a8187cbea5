#!/usr/bin/python3
"""Unwinding completeness (docs/performance.md, "Unwinding completeness").

Reads the stacks of one benchmark run from opal (`opal-report stacks`) and
from perf (`perf script -F comm,pid,tid,ip,sym,dso`), picks the samples of
each workload by thread name (comm), and prints for every tool the share of
samples whose user stack reaches the outermost frame.

The outermost frame (the root) of a sample is its last frame. A stack is
complete when the root is
  * `_start`, the executable's entry point: by name, or, in a stripped
    executable, an unsymbolized frame whose address lies in the FDE that
    covers the ELF entry point (e_entry), ends included, or
  * `clone` / `__clone` / `clone3` / `__clone3`, where new threads start
    (their CFI marks the return address undefined, as _start's does).
A stack that ends anywhere else, in an error or truncation frame, or has
no user frame at all, is incomplete. For the chain fixtures a stack is also
checked for being exact: complete, and holding exactly DEPTH chain frames
(uw_exe_step, uw_exe_step_vla, uw_lib_step).

usage: roots.py --workload COMM=ELF[:DEPTH] ... --opal FILE
                [--perf NAME=FILE ...] [--details FILE] [--markdown FILE]
"""
import argparse
import collections
import os
import re
import subprocess
import sys

ROOT_NAMES = {"_start", "clone", "__clone", "clone3", "__clone3"}
CHAIN_NAMES = {"uw_exe_step", "uw_exe_step_vla", "uw_lib_step"}
MAX_FRAMES = 100000          # per sample; longer lines are malformed input


class Elf:
    """File offsets of the entry point's FDE, for unsymbolized roots."""

    def __init__(self, path):
        self.path = path
        self.loads = []      # (p_offset, p_vaddr, p_filesz)
        entry = None
        hdr = subprocess.run(["readelf", "-hlW", path], capture_output=True, text=True,
                             check=True).stdout
        for line in hdr.splitlines():
            m = re.match(r"\s*Entry point address:\s+0x([0-9a-f]+)", line)
            if m:
                entry = int(m.group(1), 16)
            m = re.match(r"\s*LOAD\s+0x([0-9a-f]+)\s+0x([0-9a-f]+)\s+0x[0-9a-f]+\s+"
                         r"0x([0-9a-f]+)", line)
            if m:
                self.loads.append(tuple(int(g, 16) for g in m.groups()))
        self.entry_off = None
        if entry is None:
            return
        lo, hi = entry, entry
        frames = subprocess.run(["readelf", "--debug-dump=frames", path], capture_output=True,
                                text=True).stdout
        for m in re.finditer(r"FDE cie=[0-9a-f]+ pc=([0-9a-f]+)\.\.([0-9a-f]+)", frames):
            a, b = int(m.group(1), 16), int(m.group(2), 16)
            if a <= entry < b:
                lo, hi = a, b
                break
        self.entry_off = (self.to_offset(lo), self.to_offset(hi))

    def to_offset(self, vaddr):
        for off, va, size in self.loads:
            if va <= vaddr <= va + size:
                return vaddr - va + off
        return None

    def is_entry(self, off):
        e = self.entry_off
        return e is not None and None not in e and e[0] <= off <= e[1]


class Workload:
    def __init__(self, spec):
        comm, _, rest = spec.partition("=")
        path, _, depth = rest.partition(":")
        self.comm, self.path = comm, path
        self.depth = int(depth) if depth else 0
        self.elf = Elf(path)


def is_root(frame, elfs):
    """frame: (name or None, dso basename or None, file offset or None)."""
    name, dso, off = frame
    if name is not None:
        return name in ROOT_NAMES
    elf = elfs.get(dso)
    return elf is not None and off is not None and elf.is_entry(off)


def frame_text(frame):
    name, dso, off = frame
    if name is not None:
        return name
    return "%s+0x%x" % (dso, off) if off is not None else "%s+?" % dso


# ---- opal: "pid=P tid=T comm=NAME count=N: leaf;caller;...;root" ------------
OPAL_LINE = re.compile(r"^pid=(\S+) tid=(\S+) comm=(.*) count=(\d+): (.*)$")
OPAL_UNSYM = re.compile(r"^(.+)\+0x([0-9a-f]+)$")


def opal_samples(path, elfs):
    with open(path, errors="replace") as f:
        for line in f:
            m = OPAL_LINE.match(line.rstrip("\n"))
            if not m:
                continue
            frames = []
            for text in m.group(5).split(";")[:MAX_FRAMES]:
                u = OPAL_UNSYM.match(text)
                if u and u.group(1) in elfs:
                    frames.append((None, u.group(1), int(u.group(2), 16)))
                else:
                    frames.append((text, None, None))
            yield m.group(3), int(m.group(4)), frames


# ---- perf script -F comm,pid,tid,ip,sym,dso ---------------------------------
PERF_HEAD = re.compile(r"^(\S.*?)\s+(\d+)/(\d+)\s*$")
PERF_FRAME = re.compile(r"^\s+([0-9a-f]+)\s+(.*?)\s+\((.*)\)\s*$")


def perf_samples(path, elfs):
    comm, frames = None, []
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                if comm is not None:
                    yield comm, 1, frames
                comm, frames = None, []
                continue
            h = PERF_HEAD.match(line)
            if h and not line[0].isspace():
                if comm is not None:
                    yield comm, 1, frames
                comm, frames = h.group(1), []
                continue
            fm = PERF_FRAME.match(line)
            if fm and comm is not None and len(frames) < MAX_FRAMES:
                addr, sym, dso = fm.groups()
                if dso == "inlined":
                    continue
                base = os.path.basename(dso)
                if sym == "[unknown]":
                    frames.append((None, base, int(addr, 16)))
                else:
                    frames.append((re.sub(r"\+0x[0-9a-f]+$", "", sym), None, None))
    if comm is not None:
        yield comm, 1, frames


class Tally:
    def __init__(self):
        self.samples = self.complete = self.exact = 0
        self.bad_roots = collections.Counter()


def tally(samples, workloads, elfs):
    by_comm = {w.comm: w for w in workloads}
    out = {w.comm: Tally() for w in workloads}
    for comm, count, frames in samples:
        w = by_comm.get(comm)
        if w is None:
            continue
        t = out[comm]
        t.samples += count
        if frames and is_root(frames[-1], elfs):
            t.complete += count
            chain = sum(1 for f in frames if f[0] in CHAIN_NAMES)
            if w.depth and chain == w.depth:
                t.exact += count
        else:
            t.bad_roots[frame_text(frames[-1]) if frames else "(no frames)"] += count
    return out


def pct(n, d):
    return "%.2f%%" % (100.0 * n / d) if d else "n/a"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", action="append", required=True,
                    help="COMM=ELF[:DEPTH]: thread name, its executable, chain depth")
    ap.add_argument("--opal", required=True, help="opal-report stacks output")
    ap.add_argument("--perf", action="append", default=[], help="NAME=perf script output")
    ap.add_argument("--details", help="write the roots of incomplete stacks here")
    ap.add_argument("--markdown", help="also write the table here")
    a = ap.parse_args()

    workloads = [Workload(s) for s in a.workload]
    elfs = {os.path.basename(w.path): w.elf for w in workloads}
    tools = [("opal", tally(opal_samples(a.opal, elfs), workloads, elfs))]
    for spec in a.perf:
        name, _, path = spec.partition("=")
        tools.append((name, tally(perf_samples(path, elfs), workloads, elfs)))

    head = ["workload"]
    for name, _ in tools:
        head += ["%s samples" % name, "%s complete" % name, "%s exact" % name]
    rows = []
    for w in workloads:
        row = ["%s (%s)" % (w.comm, "depth %d" % w.depth if w.depth else os.path.basename(w.path))]
        for _, res in tools:
            t = res[w.comm]
            row += [str(t.samples), pct(t.complete, t.samples),
                    pct(t.exact, t.samples) if w.depth else "-"]
        rows.append(row)
    total = ["all"]
    for _, res in tools:
        s = sum(t.samples for t in res.values())
        c = sum(t.complete for t in res.values())
        total += [str(s), pct(c, s), ""]
    rows.append(total)

    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text)
    if a.details:
        with open(a.details, "w") as f:
            for name, res in tools:
                for w in workloads:
                    t = res[w.comm]
                    if not t.bad_roots:
                        continue
                    f.write("%s %s: %d of %d samples incomplete; outermost frames:\n"
                            % (name, w.comm, t.samples - t.complete, t.samples))
                    for root, n in t.bad_roots.most_common(10):
                        f.write("  %6d  %s\n" % (n, root))
    return 0


if __name__ == "__main__":
    sys.exit(main())
