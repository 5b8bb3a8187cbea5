#!/usr/bin/env python3
"""Checks the source tree against the layer map of docs/architecture.md.

The map is the fenced block tagged `layers` there: one line per daemon,
its folders from the top layer down ("." is the daemon's own folder):

    collector: . > send > stack > ...

A file may include files of its own folder and of any folder below its
own in its daemon's line, plus shared/, bpf/ and generated headers. The
script also checks that every folder of a daemon is in the map, that no
include path relative to collector/ names a file under symbolizer/ too
(tests and tools see both trees), and that no include cycle joins modules
(a .c file with its .h) of different folders. Prints each violation; exit status 1 if any.
usage: tests/lint/layout.py [REPO_ROOT]
"""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), '..', '..'))
DAEMONS = ('collector', 'symbolizer')
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_map():
    text = open(os.path.join(ROOT, 'docs', 'architecture.md')).read()
    m = re.search(r'```layers\n(.*?)```', text, re.S)
    if not m:
        sys.exit('layout: docs/architecture.md has no ```layers block')
    layers = {}
    for line in m.group(1).strip().splitlines():
        daemon, _, chain = line.partition(':')
        layers[daemon.strip()] = [f.strip() for f in chain.split('>')]
    return layers


def sources(top):
    for dp, _, fn in os.walk(os.path.join(ROOT, top)):
        for f in sorted(fn):
            if f.endswith(('.c', '.h')):
                yield os.path.relpath(os.path.join(dp, f), ROOT)


def resolve(inc, src):
    """Repository path of include `inc` written in `src`, or None (system,
    generated or bpf headers)."""
    here = os.path.normpath(os.path.join(os.path.dirname(src), inc))
    if os.path.exists(os.path.join(ROOT, here)):
        return here
    roots = ['']
    daemon = src.split('/')[0]
    roots += [daemon + '/'] if daemon in DAEMONS else [d + '/' for d in DAEMONS]
    for r in roots:
        if os.path.exists(os.path.join(ROOT, r + inc)):
            return os.path.normpath(r + inc)
    return None


def folder(path):
    return os.path.dirname(path)


def main():
    layers = layer_map()
    errors = []
    graph = {}
    for daemon in DAEMONS:
        order = layers.get(daemon)
        if order is None:
            errors.append(f'no layer line for {daemon}/')
            continue
        rank = {('' if f == '.' else f): i for i, f in enumerate(order)}
        for dp, _, fn in os.walk(os.path.join(ROOT, daemon)):
            rel = os.path.relpath(dp, os.path.join(ROOT, daemon))
            rel = '' if rel == '.' else rel
            if any(f.endswith(('.c', '.h')) for f in fn) and rel not in rank:
                errors.append(f'{daemon}/{rel}: folder not in the layer map')
        for src in sources(daemon):
            sf = os.path.relpath(folder(src), daemon)
            sf = '' if sf == '.' else sf
            for inc in INCLUDE.findall(open(os.path.join(ROOT, src)).read()):
                dst = resolve(inc, src)
                if dst is None:
                    continue
                # a module is a .c with its .h: a.c -> b.h and b.c -> a.h is a loop
                graph.setdefault(os.path.splitext(src)[0], set()).add(os.path.splitext(dst)[0])
                top = dst.split('/')[0]
                if top in ('shared', 'bpf'):
                    continue
                if top != daemon:
                    errors.append(f'{src}: includes {dst} of another program')
                    continue
                df = os.path.relpath(folder(dst), daemon)
                df = '' if df == '.' else df
                if sf in rank and df in rank and rank[df] < rank[sf]:
                    errors.append(f'{src}: includes {dst}, a layer above its own '
                                  f'({df or "."} is above {sf or "."})')
    for src in sources('shared'):
        for inc in INCLUDE.findall(open(os.path.join(ROOT, src)).read()):
            dst = resolve(inc, src)
            if dst and dst.split('/')[0] in DAEMONS:
                errors.append(f'{src}: shared/ includes daemon code {dst}')
    # one include name must not mean a file in both daemons
    rel = {d: {os.path.relpath(p, d) for p in sources(d)} for d in DAEMONS}
    for p in sorted(x for x in rel["collector"] & rel["symbolizer"] if x.endswith(".h")):
        errors.append(f'{p}: exists under both collector/ and symbolizer/')
    # include cycles that cross folders (Tarjan's strongly connected components)
    index, low, stack, on, sccs = {}, {}, [], set(), []
    def strong(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            sccs.append(comp)
    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            strong(v)
    for comp in sccs:
        if len({folder(p) for p in comp}) > 1:
            errors.append('include cycle across folders: ' + ' '.join(sorted(comp)))
    for e in errors:
        print('layout:', e)
    n = sum(1 for d in DAEMONS for _ in sources(d))
    print(f'layout: {n} files checked, {len(errors)} violation(s)')
    return 1 if errors else 0


if __name__ == '__main__':
    sys.exit(main())
