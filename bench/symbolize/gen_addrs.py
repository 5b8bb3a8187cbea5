#!/usr/bin/env python3
"""Writes a fixed set of code addresses of an ELF file, one hexadecimal
ELF virtual address per line, for the symbolization benchmark.

usage: gen_addrs.py ELF COUNT SEED

Each address is drawn by picking a function uniformly among the file's
FUNC/IFUNC symbols of nonzero size (aliases, i.e. symbols at one address,
count once, with the largest size), then a byte offset uniformly inside
it; addresses are distinct. ELF should carry the full symbol table: for a
stripped library pass its separate debug file (same addresses). The output
depends only on the file and the arguments.
"""
import random
import subprocess
import sys


def functions(path):
    out = subprocess.run(["readelf", "-sW", path], capture_output=True, text=True,
                         check=True).stdout
    size_at = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) < 8 or not f[0].endswith(":") or f[3] not in ("FUNC", "IFUNC") or f[6] == "UND":
            continue
        try:
            addr = int(f[1], 16)
            size = int(f[2], 16) if f[2].startswith("0x") else int(f[2])
        except ValueError:
            continue
        if size > 0:
            size_at[addr] = max(size_at.get(addr, 0), size)
    return sorted(size_at.items())


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    path, count, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    funcs = functions(path)
    total = sum(s for _, s in funcs)
    if count > total:
        sys.exit("gen_addrs.py: %s has only %d bytes of functions" % (path, total))
    rng = random.Random(seed)
    seen = set()
    out = []
    while len(out) < count:
        start, size = funcs[rng.randrange(len(funcs))]
        a = start + rng.randrange(size)
        if a not in seen:
            seen.add(a)
            out.append(a)
    sys.stdout.write("".join("0x%x\n" % a for a in out))


if __name__ == "__main__":
    main()
