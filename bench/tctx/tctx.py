#!/usr/bin/env python3
"""BPF ns per sample with and without an OTEP 4947 thread context
(docs/performance.md, "Thread context"). Runs as root.

usage: bench/tctx/tctx.py [--build DIR] [--seconds S] [--repeat N]

Starts opal-collector alone (99 Hz; its intervals wait in its buffer, no
symbolizer needed), then, --repeat times (default 3) in turn, keeps both
CPUs busy for --seconds (default 5) of measurement with two processes of
tests/fixtures/correlation: `pctx publish` (no thread context) or
`pctx-gnu2 phases` (a thread context in a TLSDESC library, valid in two of
its three phases, with two attributes). Per run: the run time / run count
of the collector's perf_event program over the measurement (BPF run-time
statistics on through bpf(BPF_ENABLE_STATS)), and the collector's
thread_ctx_samples share is reported by the record counts. Prints the
median [min-max] ns per sample of each workload."""
import argparse, os, statistics, subprocess, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "overhead"))
from overhead import Proc, bpf_delta, enable_bpf_stats, snapshot  # noqa: E402


def measure(collector, argv, seconds):
    work = [Proc(argv) for _ in range(2)]
    time.sleep(1.0)   # past the fixture's start and the collector's first look
    a = snapshot([], [collector.p.pid])
    time.sleep(seconds)
    b = snapshot([], [collector.p.pid])
    for w in work:
        w.stop()
    _, rt, cnt = bpf_delta(a, b)
    return rt / cnt if cnt else float("nan"), cnt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    fx = os.path.join(a.build, "fixtures", "correlation")
    stats_fd = enable_bpf_stats()
    sock = "/tmp/opal-bench-tctx.sock"
    collector = Proc([os.path.join(a.build, "opal-collector"), "--socket", sock,
                      "--frequency", "99", "--interval", "5"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(3)
    cases = {"no thread context": [os.path.join(fx, "pctx"), "publish", "60", "bench"],
             "thread context": [os.path.join(fx, "pctx-gnu2"), "phases", "60", "bench"]}
    res = {k: [] for k in cases}
    try:
        for _ in range(a.repeat):
            for name, argv in cases.items():
                ns, cnt = measure(collector, argv, a.seconds)
                res[name].append(ns)
                print("%-18s %7.0f ns/sample (%d samples)" % (name, ns, cnt), flush=True)
    finally:
        collector.stop()
        os.close(stats_fd)
    for name, v in res.items():
        print("median %-18s %7.0f ns/sample [%.0f-%.0f]" % (name, statistics.median(v),
                                                           min(v), max(v)))


if __name__ == "__main__":
    main()
