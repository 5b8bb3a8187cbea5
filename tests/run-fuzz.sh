#!/usr/bin/env bash
# Builds (tests/fuzz/build.sh) and runs every libFuzzer target
# tests/fuzz/fuzz_*.c for SECONDS each. A target's corpus persists in
# BUILD_DIR/fuzz/corpus-NAME, seeded from tests/fuzz/seeds/NAME/, from
# the fixture files tests/fuzz/seeds.list names for it, and by
# tests/fuzz/seed_NAME.sh ROOT CORPUS when there is one; crashing inputs go
# to BUILD_DIR/fuzz/artifacts-NAME/. Full output goes to
# BUILD_DIR/fuzz/NAME.log; a failing target's log tail is printed. Ends
# with "N passed, N failed".
# usage: tests/run-fuzz.sh BUILD_DIR SECONDS
set -uo pipefail
build=${1:?usage: run-fuzz.sh BUILD_DIR SECONDS}
seconds=${2:?usage: run-fuzz.sh BUILD_DIR SECONDS}
here=$(cd "$(dirname "$0")" && pwd)
out=$build/fuzz
mkdir -p "$out"
passed=0 failed=0

if ! bash "$here/fuzz/build.sh" "$build" "$out" >"$out/build.log" 2>&1; then
	echo "FAIL fuzz build: see $out/build.log"
	tail -n 40 "$out/build.log"
	echo "0 passed, 1 failed"
	exit 1
fi

# seeds.list: "TARGET FIXTURE-GLOB" lines, globs relative to BUILD_DIR/fixtures.
seed() {
	local name=$1 corpus=$2 target glob f
	[ -d "$here/fuzz/seeds/$name" ] && cp -f "$here/fuzz/seeds/$name"/* "$corpus/"
	[ -f "$here/fuzz/seed_$name.sh" ] && bash "$here/fuzz/seed_$name.sh" "$here/.." "$corpus"
	while read -r target glob; do
		[ "$target" = "$name" ] || continue
		for f in $build/fixtures/$glob; do
			[ -f "$f" ] && cp -f "$f" "$corpus/"
		done
	done < <(grep -v '^#' "$here/fuzz/seeds.list")
}

for bin in "$out"/fuzz_*; do
	[ -x "$bin" ] || continue
	name=$(basename "$bin")
	name=${name#fuzz_}
	corpus=$out/corpus-$name
	mkdir -p "$corpus" "$out/artifacts-$name"
	seed "$name" "$corpus"
	log=$out/$name.log
	opts=()
	# the CFI builder's inputs are whole ELF files: let them grow that big
	[ "$name" = unwind_table ] && opts+=(-max_len=65536)
	if "$bin" "$corpus" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2048 \
		"${opts[@]}" -artifact_prefix="$out/artifacts-$name/" -print_final_stats=1 \
		>"$log" 2>&1; then
		echo "PASS fuzz $name ($(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$log" | tail -n 1))"
		passed=$((passed + 1))
	else
		echo "FAIL fuzz $name: see $log"
		tail -n 40 "$log"
		failed=$((failed + 1))
	fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
