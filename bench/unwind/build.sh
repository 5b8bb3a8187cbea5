#!/usr/bin/env bash
# Builds the unwinding benchmark's workloads into OUTDIR (bench/unwind/run.sh
# and bench/overhead/run.sh call it; a rebuild happens only when a source
# is newer than its output):
#   libuwchain.so, uw_work   fixtures/*.c, gcc -O2 -fomit-frame-pointer,
#                            the executable linked against the library and libm
#   data.txt                 16 MB of deterministic word text for gzip and xz
# usage: bench/unwind/build.sh OUTDIR
set -euo pipefail
out=${1:?usage: build.sh OUTDIR}
here=$(cd "$(dirname "$0")" && pwd)
src=$here/fixtures
CC=${CC:-gcc}
FLAGS=(-O2 -fomit-frame-pointer -Wall -Wextra -Wno-unused-parameter)
mkdir -p "$out"

stale() {   # stale OUTPUT INPUT...: OUTPUT is missing or older than an input
	local o=$1; shift
	[ -e "$o" ] || return 0
	for i in "$@"; do [ "$i" -nt "$o" ] && return 0; done
	return 1
}

if stale "$out/libuwchain.so" "$src/uw_chain.c" "$src/uw_chain.h" "$0"; then
	"$CC" "${FLAGS[@]}" -fPIC -shared -Wl,-soname,libuwchain.so \
		"$src/uw_chain.c" -o "$out/libuwchain.so"
fi
if stale "$out/uw_work" "$src/uw_work.c" "$src/uw_chain.h" "$out/libuwchain.so" "$0"; then
	"$CC" "${FLAGS[@]}" "$src/uw_work.c" -L"$out" -luwchain -lm \
		-Wl,-rpath,'$ORIGIN' -o "$out/uw_work"
fi

# The chain must really be DEPTH frames deep: every chain function must be
# there (not inlined) and none may leave by a jump (a sibling call).
check_calls() {   # check_calls FILE FUNCTION...
	local file=$1 f; shift
	for f in "$@"; do
		objdump -d --disassemble="$f" "$file" | grep -q "<$f>:" ||
			{ echo "build.sh: $f missing from $file" >&2; exit 1; }
		if objdump -d --disassemble="$f" "$file" | grep -E '\sjmp' | grep -vq "<$f+"; then
			echo "build.sh: $f in $file leaves by a jump (sibling call)" >&2
			exit 1
		fi
	done
}
check_calls "$out/uw_work" uw_exe_first uw_exe_step uw_exe_step_vla uw_leaf_qsort uw_leaf_pow
check_calls "$out/libuwchain.so" uw_lib_step

if stale "$out/data.txt" "$0"; then
	/usr/bin/python3 - "$out/data.txt" <<'PY'
import random, sys
rng = random.Random(1)
words = ["".join(rng.choice("etaoinshrdlucmfwypvbgkqjxz") for _ in range(rng.randint(2, 9)))
         for _ in range(5000)]
with open(sys.argv[1] + ".tmp", "w") as f:
    size = 0
    while size < 16 << 20:
        line = " ".join(rng.choice(words) for _ in range(12)) + "\n"
        f.write(line)
        size += len(line)
PY
	mv "$out/data.txt.tmp" "$out/data.txt"
fi
