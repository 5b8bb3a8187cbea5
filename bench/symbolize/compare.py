#!/usr/bin/env python3
"""Compares opal's answers for a set of addresses with llvm-symbolizer's and
eu-addr2line's, after normalizing names and paths, and puts every
difference into an explanation category.

usage: compare.py --opal OPAL.tsv [--llvm LLVM.json] [--eu EU.txt]
                  --symbols ELF [--symbols ELF ...] [--binary ELF] --details OUT.txt

  OPAL.tsv   bench_symbolize --answers output (one line per frame)
  LLVM.json  llvm-symbolizer --inlines --output-style=JSON output
  EU.txt     eu-addr2line -a -i -f -C -A output
  --symbols  ELF files whose .symtab/.dynsym tell which names are aliases
             (the binary and its debug file)
  --binary   the binary alone: names only its debug file has are told apart

Prints, per tool, how many addresses agree and a table of the differing
ones by category with the category's explanation and how often the third
tool sides with opal there; writes every differing address with both
answers to --details. Exit status 0 unless the inputs cannot be read.

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

# Category -> explanation, in the order the table prints them. The first
# five are the same function under another spelling of its name.
CATEGORIES = collections.OrderedDict([
    ("alias",
     "same code, another of its names: llvm-symbolizer names the outermost "
     "frame after an ELF symbol at the address (e.g. register_printf_function), "
     "opal and eu-addr2line after the DWARF subprogram (e.g. "
     "__register_printf_function); both are symbols of one address (ELF "
     "aliases, or functions GCC's identical code folding merged)"),
    ("clone",
     "same function, one name carries GCC's clone suffix (.isra.0, "
     ".constprop.0, .cold), which only the symbol table has"),
    ("parameters",
     "same function and scope, one name carries the parameter list or "
     "template arguments and the other not (a function without linkage name "
     "in DWARF is named by DW_AT_name)"),
    ("qualification",
     "same function, one tool prints the enclosing namespaces/classes "
     "(ns::f) and the other only DW_AT_name (f): llvm-symbolizer and "
     "eu-addr2line do not qualify functions without a linkage name (inlined "
     "static helpers, internal linkage)"),
    ("symtab-name",
     "the outermost frame: the other tool's name is the ELF symbol holding "
     "the address, opal's the DWARF subprogram's; they differ where GCC's "
     "identical code folding (-fipa-icf, on at -O2) merged functions with "
     "equal bodies under one symbol"),
    ("debug-symtab-name",
     "no DWARF subprogram holds the address (assembly, libgcc soft-float "
     "code): opal names the symbol from the debug file's .symtab; "
     "llvm-symbolizer 14 looks only at the binary's own symbol table "
     "(.dynsym in a stripped library) and prints ?? or nothing"),
    ("shorter-chain",
     "the other tool lists fewer frames, the ones it lists agree with opal's "
     "innermost: eu-addr2line stops after an inlined frame and names its "
     "caller only in the 'inlined at ... in CALLER' text"),
    ("inline-depth",
     "inline chains of different lengths (the bracket tells whether the "
     "third tool sides with opal)"),
    ("line",
     "same functions, another source line for one frame"),
    ("file",
     "same functions and lines, another source file path"),
    ("unresolved-other",
     "opal names the address, the other tool finds nothing"),
    ("unresolved-opal",
     "the other tool names the address, opal does not"),
    ("name",
     "function names that none of the rules above relates"),
])

# Different spellings of one function: the third tool agreeing with opal
# on these still counts as agreeing.
SAME_FUNCTION = {None, "alias", "clone", "parameters", "qualification", "symtab-name"}

CLONE = re.compile(r"(\s*(\(\.[A-Za-z_]+(\.\d+)?\)|\[clone \.[^\]]+\]|\.(isra|constprop|part|cold|lto_priv)(\.\d+)?))+$")


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
    """Demangled name (and its base name) -> list of (value, size)."""
    syms = collections.defaultdict(list)
    for p in paths:
        out = subprocess.run(["readelf", "-sW", "-C", p], capture_output=True,
                             text=True).stdout
        for line in out.splitlines():
            f = line.split(None, 7)
            if len(f) < 8 or not f[0].endswith(":") or f[6] == "UND":
                continue
            if f[3] not in ("FUNC", "IFUNC", "NOTYPE"):
                continue
            try:
                value = int(f[1], 16)
                size = int(f[2], 16) if f[2].startswith("0x") else int(f[2])
            except ValueError:
                continue
            name = strip_clone(norm_name(f[7]))
            syms[name].append((value, size))
            b = base_name(name)
            if b != name:
                syms[b].append((value, size))
    return syms


def strip_clone(n):
    return CLONE.sub("", n) if n else n


def base_name(n):
    """Name without parameter list, cv-qualifiers and template arguments."""
    n = re.sub(r"\s*(const|volatile|&|&&)\s*$", "", strip_clone(n))
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


def symbol_values(name, syms):
    n = strip_clone(name)
    return syms.get(n) or syms.get(base_name(n)) or []


def covers(name, addr, syms):
    return any(v <= addr < v + max(sz, 1) for v, sz in symbol_values(name, syms))


def names_category(a, b, syms, addr, outermost):
    if a == b:
        return None
    if not a or not b:
        return "name"
    if strip_clone(a) == strip_clone(b):
        return "clone"
    ba, bb = base_name(a), base_name(b)
    if ba == bb:
        return "parameters"
    if ba.endswith("::" + bb) or bb.endswith("::" + ba):
        return "qualification"
    va = {v for v, _ in symbol_values(a, syms)}
    vb = {v for v, _ in symbol_values(b, syms)}
    if va & vb:
        return "alias"
    if outermost and covers(b, addr, syms) and not covers(a, addr, syms):
        return "symtab-name"
    return "name"


def classify(addr, ours, theirs, syms, binary_names):
    """Category of the first difference between two frame lists, or None."""
    if not ours and not theirs:
        return None
    if not ours:
        return "unresolved-opal"
    only_symbol = len(ours) == 1 and ours[0][0] and ours[0][0] not in binary_names
    if not theirs or (len(theirs) == 1 and theirs[0][0] is None):
        if only_symbol and (not theirs or theirs[0][1:3] == ours[0][1:3]):
            return "debug-symtab-name"
        return "unresolved-other"
    if len(ours) != len(theirs):
        n = min(len(ours), len(theirs))
        prefix = all(names_category(o[0], t[0], syms, addr, False) in SAME_FUNCTION and
                     o[1:3] == t[1:3] for o, t in zip(ours[:n], theirs[:n]))
        if prefix and len(theirs) < len(ours):
            return "shorter-chain"
        return "inline-depth"
    first = None
    for i, (o, t) in enumerate(zip(ours, theirs)):
        cat = names_category(o[0], t[0], syms, addr, i == len(ours) - 1)
        if cat is None and o[1:3] != t[1:3]:
            cat = "file" if o[2] == t[2] else "line"
        if cat and (not first or (first in SAME_FUNCTION and cat not in SAME_FUNCTION)):
            first = cat   # the most serious difference of the chain
    return first


def fmt(frames):
    if not frames:
        return "(unresolved)"
    return " <- ".join("%s at %s:%d" % (f[0] or "??", f[1] or "??", f[2]) for f in frames)


def binary_symbol_names(path):
    """Demangled names of the binary's own .symtab/.dynsym."""
    if not path:
        return set()
    out = subprocess.run(["readelf", "-sW", "-C", path], capture_output=True, text=True).stdout
    names = set()
    for line in out.splitlines():
        f = line.split(None, 7)
        if len(f) == 8 and f[0].endswith(":") and f[6] != "UND":
            n = norm_name(f[7])
            names.add(n)
            names.add(strip_clone(n))
            names.add(base_name(n))
    return names


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--opal", required=True)
    ap.add_argument("--llvm")
    ap.add_argument("--eu")
    ap.add_argument("--symbols", action="append", default=[])
    ap.add_argument("--binary", help="the ELF itself (its own symbol table)")
    ap.add_argument("--details", required=True)
    args = ap.parse_args()

    opal = read_opal(args.opal)
    syms = read_symbols(args.symbols)
    binary_names = binary_symbol_names(args.binary)
    others = []
    if args.llvm:
        others.append(("llvm-symbolizer", read_llvm(args.llvm)))
    if args.eu:
        others.append(("eu-addr2line", read_eu(args.eu)))

    with open(args.details, "w") as det:
        for tool, ans in others:
            third = [(t, a) for t, a in others if t != tool]
            counts = collections.Counter()
            backed = collections.Counter()
            checked = collections.Counter()
            examples = {}
            compared = 0
            det.write("### opal vs %s\n" % tool)
            for addr, ours in opal.items():
                if addr not in ans:
                    continue
                compared += 1
                cat = classify(addr, ours, ans[addr], syms, binary_names)
                if cat is None:
                    continue
                counts[cat] += 1
                examples.setdefault(cat, addr)
                note = ""
                for t, a in third:
                    if addr in a:
                        checked[cat] += 1
                        agree = classify(addr, ours, a[addr], syms, binary_names) in SAME_FUNCTION
                        backed[cat] += agree
                        note = "\t(%s %s)" % (t, "gives opal's answer" if agree else "differs from opal too")
                det.write("0x%x\t%s%s\n\topal: %s\n\t%s: %s\n" %
                          (addr, cat, note, fmt(ours), tool, fmt(ans[addr])))
            n_diff = sum(counts.values())
            same = compared - n_diff
            spelled = sum(counts[c] for c in SAME_FUNCTION if c)
            print("opal vs %s: %d addresses compared: %d identical after normalization, "
                  "%d the same functions spelled differently, %d other differences" %
                  (tool, compared, same, spelled, n_diff - spelled))
            for cat, text in CATEGORIES.items():
                if not counts[cat]:
                    continue
                who = ""
                if checked[cat]:
                    who = " [%s gives opal's answer, up to spelling, on %d of %d]" % (
                        third[0][0], backed[cat], checked[cat])
                print("  %-17s %7d  e.g. 0x%x%s\n  %19s %s" %
                      (cat, counts[cat], examples[cat], who, "", text))
    return 0


if __name__ == "__main__":
    sys.exit(main())
