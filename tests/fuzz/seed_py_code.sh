#!/usr/bin/env bash
# Seeds the CPython code-object fuzz target (fuzz_py_code.c): one input per
# code object of tests/fixtures/python/committed/code-*.txt, in the
# target's format (a version byte, then each blob as a 2-byte length and
# its bytes).
# usage: tests/fuzz/seed_py_code.sh REPO_ROOT CORPUS_DIR
set -euo pipefail
root=${1:?usage: seed_py_code.sh REPO_ROOT CORPUS_DIR}
corpus=${2:?usage: seed_py_code.sh REPO_ROOT CORPUS_DIR}
python3 - "$root/tests/fixtures/python/committed" "$corpus" <<'PY'
import glob, os, sys
src, dst = sys.argv[1], sys.argv[2]
for path in sorted(glob.glob(os.path.join(src, "code-*.txt"))):
    minor = int(os.path.basename(path).split("-")[1].split(".")[1])
    blobs, n = {}, 0
    for line in open(path):
        f = line.split()
        if f and f[0] == "blob":
            blobs[f[1]] = bytes.fromhex(f[3])
        elif f and f[0] == "end":
            seed = bytes([minor - 8])
            for k in ("code", "name", "qualname", "filename", "linetable"):
                b = blobs.get(k, b"")[:65535]
                seed += len(b).to_bytes(2, "little") + b
            name = "%s-%d" % (os.path.basename(path)[:-4], n)
            with open(os.path.join(dst, name), "wb") as o:
                o.write(seed)
            blobs, n = {}, n + 1
PY
