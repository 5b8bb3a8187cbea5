#!/usr/bin/python3
"""BPF time per sample by stack depth (docs/performance.md, "Overhead").

For each depth D of --depths, one `uw_work pow D` per CPU keeps the
machine busy in a chain of D frames alternating between an executable and
a library built without frame pointers (bench/unwind/fixtures), under
libm's pow; each tool of --tools (opal, opal-offcpu, bpftrace) then runs
alone at --hz as bench/overhead runs it (overhead.Bench.run_tool), --repeat
times, the tools' order rotating. Prints, per depth, the median [min–max]
BPF ns per sample of each tool's perf_event programs and the ratio of
opal's median to the peer's. bpftrace's profile probe walks frame pointers:
in these frame-pointer-less binaries it stops after a frame or two, so its
figure is what a fixed cost of sampling is, not a walk of D frames.

usage: depths.py [--build DIR] [--depths 5,30,50,200] [--hz 99] [--repeat 3]
                 [--tools opal,bpftrace] [--warmup S] [--measure S]
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True     # no __pycache__ in the source tree
sys.path.insert(0, HERE)
import overhead  # noqa: E402


class DepthBench(overhead.Bench):
    """overhead.Bench with one `uw_work pow DEPTH` per CPU as the busy load."""

    depth = 30

    def start_busy(self):
        self.busy = [overhead.Proc([os.path.join(self.fix, "uw_work"), "pow", str(self.depth)])
                     for _ in range(overhead.NCPU)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--depths", default="5,30,50,200")
    ap.add_argument("--hz", type=int, default=99)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tools", default="opal,bpftrace")
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--measure", type=float, default=5.0)
    a = ap.parse_args()
    tools = a.tools.split(",")
    depths = [int(x) for x in a.depths.split(",")]

    stats_fd = overhead.enable_bpf_stats()
    b = DepthBench(a)
    ns = {}                      # (depth, tool) -> [ns per sample]
    try:
        for depth in depths:
            b.depth = depth
            b.start_busy()
            time.sleep(1)
            for rep in range(a.repeat):
                for tool in tools[rep % len(tools):] + tools[:rep % len(tools)]:
                    r = b.run_tool(tool, a.hz, "depth%d-%d" % (depth, rep))
                    ns.setdefault((depth, tool), []).append(r["ns_per_sample"])
                    print("  depth %d, %s #%d: %s ns per sample" % (
                        depth, tool, rep, "%.0f" % r["ns_per_sample"]
                        if r["ns_per_sample"] else "-"), file=sys.stderr, flush=True)
            b.stop_busy()
    finally:
        b.stop_busy()
        os.close(stats_fd)

    head = ["chain depth"] + ["%s ns/sample" % t for t in tools]
    peers = [t for t in tools if not t.startswith("opal")]
    head += ["opal / %s" % p for p in peers] if "opal" in tools else []
    rows = []
    for depth in depths:
        row = [str(depth)] + [overhead.med(ns.get((depth, t), []), "%.0f") for t in tools]
        if "opal" in tools:
            mine = [v for v in ns.get((depth, "opal"), []) if v]
            for p in peers:
                theirs = [v for v in ns.get((depth, p), []) if v]
                row.append("%.2f" % (statistics.median(mine) / statistics.median(theirs))
                           if mine and theirs else "n/a")
        rows.append(row)
    print("BPF ns per sample at %d Hz, one `uw_work pow DEPTH` per CPU, %d repeats\n"
          % (a.hz, a.repeat))
    print(overhead.table(head, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
