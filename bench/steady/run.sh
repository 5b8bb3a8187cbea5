#!/usr/bin/env bash
# The symbolizer's steady state (docs/performance.md, "Steady state"): CPU
# per warm interval, all encoders and outputs included, measured with a
# fake collector (bench_replay) that replays one interval over the socket
# so that the figure does not depend on what else the machine runs. Each
# repeat starts a fresh symbolizer as the README does (--user nobody), warms
# it up, then replays INTERVALS intervals (enough to fill the interval
# and recent-profile folders to their bounds) and prints the median.
# usage: bench/steady/run.sh [--build DIR] [--repeat N] [--intervals N]
#        [--samples N] [--stacks N] [--depth N] [--in DIR] [--pace MS]
# --in: the folder the symbolizer's state and output folders are made in
# (default /tmp), to compare file systems. --pace: MS between intervals
# (default 0: back to back), as a deployment's interval leaves the caches
# cold; paced, the measured intervals are at most 60 (--intervals).
# As root (the symbolizer drops to nobody; kallsyms is read for kernel frames).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$repo/build in=/tmp repeat=5 intervals=800 samples=1000 stacks=200 depth=30 pace=0
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$2; shift 2 ;;
	--repeat) repeat=$2; shift 2 ;;
	--intervals) intervals=$2; shift 2 ;;
	--samples) samples=$2; shift 2 ;;
	--stacks) stacks=$2; shift 2 ;;
	--depth) depth=$2; shift 2 ;;
	--in) in=$2; shift 2 ;;
	--pace) pace=$2; shift 2 ;;
	*) echo "usage: $0 [--build DIR] [--repeat N] [--intervals N] [--samples N] [--stacks N] [--depth N] [--in DIR] [--pace MS]" >&2; exit 2 ;;
	esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench/steady: run as root" >&2; exit 1; }
build=$(cd "$build" && pwd)
for b in opal-symbolizer bench/bench_replay; do
	[ -x "$build/$b" ] || { echo "bench/steady: $build/$b missing (make bench-steady)" >&2; exit 1; }
done
bash "$repo/bench/unwind/build.sh" "$build/bench/unwind" >/dev/null
files=(/usr/lib/x86_64-linux-gnu/libc.so.6 /usr/bin/python3.11 "$build/bench/unwind/libuwchain.so")
work=$(mktemp -d "$in/opal-bench-steady.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "bench/steady: $samples samples per interval in $stacks stacks of $depth native + 8 kernel frames"
echo "  files: ${files[*]}"
echo "  $repeat repeats of $intervals warm intervals; opal $(git -C "$repo" rev-parse --short HEAD)"
echo "  output in $work ($(findmnt -n -o FSTYPE -T "$work") on $(findmnt -n -o SOURCE -T "$work"))"
meds=() means=()
for r in $(seq 1 "$repeat"); do
	d=$work/r$r
	mkdir -p "$d/state" "$d/out"
	chown nobody: "$d/state" "$d/out"
	"$build/opal-symbolizer" --socket "$d/state/s.sock" --state-dir "$d/state" \
		--out-dir "$d/out" --user nobody --http-listen none 2>"$d/sym.log" &
	sym=$!
	for _ in $(seq 100); do [ -S "$d/state/s.sock" ] && break; sleep 0.05; done
	spid=$(pgrep -P "$sym" opal-symbolizer || echo "$sym")
	# Warm-up: every frame symbolized and cached, the folders started.
	"$build/bench/bench_replay" "$d/state/s.sock" "$spid" 1 3 "$samples" "$stacks" "$depth" \
		"${files[@]}" >/dev/null
	n=$intervals
	if [ "$pace" -gt 0 ]; then   # the folders filled to their bounds first
		"$build/bench/bench_replay" "$d/state/s.sock" "$spid" "$intervals" 3 "$samples" \
			"$stacks" "$depth" "${files[@]}" >/dev/null
		n=$((intervals < 60 ? intervals : 60))
	fi
	line=$(OPAL_REPLAY_PACE_MS=$pace "$build/bench/bench_replay" "$d/state/s.sock" "$spid" "$n" \
		3 "$samples" "$stacks" "$depth" "${files[@]}" | tail -n 1)
	kill "$sym"
	wait "$sym" || true
	meds+=("$(sed -nE 's/.*median ([0-9.]+) ms CPU.*/\1/p' <<<"$line")")
	means+=("$(sed -nE 's/.*mean ([0-9.]+) ms CPU.*/\1/p' <<<"$line")")
	echo "  repeat $r: $line"
done
# summary KIND VALUES...: the median of the repeats' figures, per 1,000 samples
summary() {
	local kind=$1 sorted mid per
	shift
	sorted=$(printf '%s\n' "$@" | sort -n)
	mid=$(sed -n "$(( (repeat + 1) / 2 ))p" <<<"$sorted")
	per=$(awk -v m="$mid" -v s="$samples" 'BEGIN { printf "%.2f", m * 1000 / s }')
	echo "warm interval ($kind), median of $repeat repeats: $mid ms CPU; $per ms per 1,000 samples" \
		"[$(head -n 1 <<<"$sorted")-$(tail -n 1 <<<"$sorted") ms] (target: <= 2 ms per 1,000 samples)"
}
[ "$pace" -gt 0 ] && echo "  paced: $n intervals $pace ms apart, after $intervals back to back"
summary "median" "${meds[@]}"
summary "mean" "${means[@]}"
