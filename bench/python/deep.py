#!/usr/bin/env python3
"""Workloads of bench/python/cost.py (docs/performance.md, "Python").

usage: deep.py deep SECONDS
         spins in `leaf` under 30 Python frames, of which two calls go
         through C (sorted(key=) and functools.reduce), so that with the
         interpreter's own native frames a sample has about 20 native ones
       deep.py codes N SECONDS
         N distinct code objects (one function per made-up file), called
         in turn, each for a few microseconds
Both print "ready PID" once they spin and exit after SECONDS.
"""
import functools
import os
import sys
import time


def leaf(x):
    s = 0
    for i in range(2000):
        s += i * x
    return s


# Python frames at the leaf: <module>, main, deep, level_a x7, via_sort,
# level_b x10, via_reduce, level_c x7, leaf = 30.
def level_c(n):
    return leaf(n) if n == 0 else level_c(n - 1)


def via_reduce(_acc, _x):
    return level_c(6)


def level_b(n):
    return functools.reduce(via_reduce, [1, 2], 0) if n == 0 else level_b(n - 1)


def via_sort(_x):
    return level_b(9)


def level_a(n):
    return sorted([1, 2], key=via_sort) if n == 0 else level_a(n - 1)


def deep(seconds):
    end = time.monotonic() + seconds
    print("ready %d" % os.getpid(), flush=True)
    while time.monotonic() < end:
        level_a(6)


CODE = "def f_%d(k):\n    s = 0\n    for i in range(k):\n        s += i\n    return s\n"


def codes(n, seconds):
    fns = []
    for i in range(n):
        ns = {}
        exec(compile(CODE % i, "/opal-bench/codes/f_%d.py" % i, "exec"), ns)
        fns.append(ns["f_%d" % i])
    end = time.monotonic() + seconds
    print("ready %d" % os.getpid(), flush=True)
    while time.monotonic() < end:
        for f in fns:
            f(100)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "deep":
        deep(float(sys.argv[2]))
    elif len(sys.argv) == 4 and sys.argv[1] == "codes":
        codes(int(sys.argv[2]), float(sys.argv[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
