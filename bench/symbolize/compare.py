#!/usr/bin/env python3
"""Compares opal's answers for a set of addresses with llvm-symbolizer's and
eu-addr2line's, after normalizing names and paths, and puts every
difference into an explanation category.

usage: compare.py --opal OPAL.tsv [--llvm LLVM.json] [--eu EU.txt]
                  --symbols ELF [--symbols ELF ...] --details OUT.txt

  OPAL.tsv   bench_symbolize --answers output (one line per frame)
  LLVM.json  llvm-symbolizer --inlines --output-style=JSON output
  EU.txt     eu-addr2line -a -i -f -C -A output
  --symbols  ELF files whose .symtab/.dynsym tell which names are aliases
             (the binary and its debug file)

Prints, per tool, how many addresses agree and a table of the differing
ones by category with the category's explanation; writes every differing
address with both answers to --details. Exit status 0 unless the inputs
cannot be read.

Normalization: paths go through os.path.normpath; "??"/empty become
unknown; names lose surrounding blanks and symbol versions ("@GLIBC_2.2.5").
Two frames agree when function, file and line agree after that.
"""
import argparse
import collections
import json
import os
import re
import subprocess
import sys

# Category -> explanation, in the order the table prints them.
CATEGORIES = collections.OrderedDict([
    ("alias",
     "same function, another of its names: llvm-symbolizer names the outermost "
     "frame after an ELF symbol at the function's address (e.g. "
     "register_printf_function), opal and eu-addr2line after the DWARF "
     "subprogram (__register_printf_function); both names are symbols of one "
     "address"),
    ("qualification",
     "same function, one tool prints the enclosing namespaces/classes "
     "(ns::f) and the other only DW_AT_name (f): eu-addr2line does not qualify "
     "functions without a linkage name (internal linkage in C++)"),
    ("parameters",
     "same function and scope, one name carries the parameter list or "
     "template arguments and the other not"),
    ("symbol-only",
     "no DWARF function holds the address (assembly, or code without "
     "subprogram DIEs): opal and eu-addr2line name the ELF symbol, "
     "llvm-symbolizer too, but they differ in the source line they attach "
     "(opal keeps the line table row of the unit, llvm-symbolizer 14 gives "
     "none when no subprogram covers the address)"),
    ("unresolved-other",
     "opal names the address, the other tool finds nothing (e.g. "
     "eu-addr2line does not find units without .debug_aranges, or an address "
     "between functions named by the symbol table only)"),
    ("unresolved-opal",
     "the other tool names the address, opal does not (opal names a symbol "
     "only inside its st_size, never the gap after it)"),
    ("inline-depth",
     "the tools give inline chains of different lengths"),
    ("line",
     "same functions, another source line for one frame (line-table row "
     "choice at sequence ends or for call sites)"),
    ("file",
     "same functions and lines, another source file path"),
    ("name",
     "function names that none of the rules above relates"),
])


def norm_path(p):
    if p is None:
        return None
    p = p.strip()
    if not p or p.startswith("??"):
        return None
    return os.path.normpath(p)


def norm_name(n):
    if n is None:
        return None
    n = n.strip()
    if not n or n == "??":
        return None
    return re.sub(r"@+[A-Za-z0-9_.]+$", "", n)


def read_opal(path):
    res = collections.OrderedDict()
    with open(path) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 6:
                continue
            addr = int(parts[0], 16)
            frames = res.setdefault(addr, [])
            if parts[1] == "-":
                continue
            frames.append((norm_name(parts[2]), norm_path(parts[3]),
                           int(parts[4]), parts[5] == "1"))
    return res


def read_llvm(path):
    res = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            obj = json.loads(line)
            addr = int(obj["Address"], 16)
            frames = []
            for s in obj.get("Symbol", []):
                name = norm_name(s.get("FunctionName"))
                fil = norm_path(s.get("FileName"))
                frames.append((name, fil, int(s.get("Line") or 0), False))
            if all(fr[0] is None and fr[1] is None for fr in frames):
                frames = []
            res[addr] = frames
    return res


def read_eu(path):
    res = {}
    cur = None
    pending = None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if re.fullmatch(r"0x[0-9a-f]+", line):
                cur = int(line, 16)
                res[cur] = []
                pending = None
                continue
            if cur is None:
                continue
            if pending is None:
                pending = re.sub(r" inlined at .*$", "", line)
                continue
            m = re.fullmatch(r"(.*?):(\d+)(?::\d+)?", line)
            fil, ln = (m.group(1), int(m.group(2))) if m else (line, 0)
            res[cur].append((norm_name(pending), norm_path(fil), ln, False))
            pending = None
    for a, frames in res.items():
        if all(fr[0] is None and fr[1] is None for fr in frames):
            res[a] = []
    return res


def read_symbols(paths):
    """name -> set of addresses, from readelf -sW of every file."""
    syms = collections.defaultdict(set)
    for p in paths:
        out = subprocess.run(["readelf", "-sW", "--wide", p], capture_output=True,
                             text=True).stdout
        for line in out.splitlines():
            f = line.split()
            if len(f) < 8 or not f[0].endswith(":") or f[6] == "UND":
                continue
            if f[3] not in ("FUNC", "IFUNC", "NOTYPE"):
                continue
            try:
                value = int(f[1], 16)
            except ValueError:
                continue
            syms[norm_name(f[7])].add(value)
    return syms


def base_name(n):
    """Name without parameter list, cv-qualifiers and template arguments."""
    n = re.sub(r"\s*(const|volatile|&|&&)\s*$", "", n)
    depth = 0
    out = []
    for ch in n:
        if ch in "(<":
            depth += 1
        elif ch in ")>":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out).strip()


def names_category(a, b, syms):
    if a == b:
        return None
    if a and b:
        sa, sb = syms.get(a, set()), syms.get(b, set())
        if sa & sb:
            return "alias"
        ba, bb = base_name(a), base_name(b)
        if ba == bb:
            return "parameters"
        if ba.endswith("::" + bb) or bb.endswith("::" + ba):
            return "qualification"
    return "name"


def classify(ours, theirs, syms):
    """Category of the first difference between two frame lists, or None."""
    if not ours and not theirs:
        return None
    if not theirs:
        return "unresolved-other"
    if not ours:
        return "unresolved-opal"
    if len(ours) != len(theirs):
        # One frame each side with the same function: the symbol fallback.
        return "inline-depth"
    first = None
    for i, (o, t) in enumerate(zip(ours, theirs)):
        cat = names_category(o[0], t[0], syms)
        if cat is None:
            if o[1] != t[1] and o[2] == t[2]:
                cat = "file"
            elif o[2] != t[2] or o[1] != t[1]:
                cat = "line"
                if len(ours) == 1 and (o[2] == 0 or t[2] == 0):
                    cat = "symbol-only"
        if cat and not first:
            first = cat
    return first


def fmt(frames):
    if not frames:
        return "(unresolved)"
    return " <- ".join("%s at %s:%d" % (f[0] or "??", f[1] or "??", f[2]) for f in frames)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--opal", required=True)
    ap.add_argument("--llvm")
    ap.add_argument("--eu")
    ap.add_argument("--symbols", action="append", default=[])
    ap.add_argument("--details", required=True)
    args = ap.parse_args()

    opal = read_opal(args.opal)
    syms = read_symbols(args.symbols)
    others = []
    if args.llvm:
        others.append(("llvm-symbolizer", read_llvm(args.llvm)))
    if args.eu:
        others.append(("eu-addr2line", read_eu(args.eu)))

    with open(args.details, "w") as det:
        for tool, ans in others:
            counts = collections.Counter()
            examples = {}
            compared = 0
            det.write("### opal vs %s\n" % tool)
            for addr, ours in opal.items():
                if addr not in ans:
                    continue
                compared += 1
                cat = classify(ours, ans[addr], syms)
                if cat is None:
                    continue
                counts[cat] += 1
                examples.setdefault(cat, addr)
                det.write("0x%x\t%s\n\topal: %s\n\t%s: %s\n" %
                          (addr, cat, fmt(ours), tool, fmt(ans[addr])))
            same = compared - sum(counts.values())
            print("opal vs %s: %d addresses compared, %d identical after "
                  "normalization (%.2f%%), %d differ" %
                  (tool, compared, same, 100.0 * same / max(compared, 1),
                   sum(counts.values())))
            for cat, text in CATEGORIES.items():
                if counts[cat]:
                    print("  %-17s %7d  e.g. 0x%x: %s" % (cat, counts[cat], examples[cat], text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
