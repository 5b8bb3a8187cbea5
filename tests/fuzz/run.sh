#!/usr/bin/env bash
# Builds the unwind-table libFuzzer target with clang
# -fsanitize=fuzzer,address and runs it for SECONDS, seeded with the ELF
# files of tests/fixtures/unwind (built into BUILD_DIR/fixtures/unwind when
# missing). The corpus persists in BUILD_DIR/fuzz/unwind_table/corpus;
# crashing inputs go to BUILD_DIR/fuzz/unwind_table/artifacts/. Exit status
# is libFuzzer's: non-zero on a crash, leak, timeout or failed invariant.
# usage: tests/fuzz/run.sh BUILD_DIR SECONDS
set -euo pipefail
build=${1:?usage: run.sh BUILD_DIR SECONDS}
seconds=${2:?usage: run.sh BUILD_DIR SECONDS}
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$build/fuzz/unwind_table
mkdir -p "$out/corpus" "$out/artifacts"

fixtures=$build/fixtures/unwind
if [ ! -e "$fixtures/frames" ]; then
	mkdir -p "$fixtures"
	bash "$root/tests/fixtures/unwind/build.sh" "$(cd "$fixtures" && pwd)"
fi

# shellcheck disable=SC2046 # pkg-config output is a list of flags
clang -g -O1 -fsanitize=fuzzer,address -fno-omit-frame-pointer -std=gnu11 -D_GNU_SOURCE \
	-I"$root" -I"$root/shared" -I"$root/collector" \
	"$root/tests/fuzz/fuzz_unwind_table.c" \
	"$root"/collector/unwind_table.c "$root"/collector/unwind_image.c \
	"$root"/collector/unwind_fde.c "$root"/collector/unwind_prog.c \
	"$root"/collector/unwind_eval.c \
	"$root"/collector/unwind_build.c "$root"/collector/unwind_lookup.c \
	"$root"/collector/htab.c "$root"/shared/log.c \
	$(pkg-config --libs libdw libelf) -lpthread -o "$out/fuzz_unwind_table"

cp -f "$fixtures"/* "$out/corpus/"
exec "$out/fuzz_unwind_table" "$out/corpus" \
	-max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 -max_len=65536 \
	-artifact_prefix="$out/artifacts/" -print_final_stats=1
