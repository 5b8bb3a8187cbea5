#!/usr/bin/env bash
# Scale benchmark (docs/performance.md, "Scale"). Runs as root.
#
# usage: bench/scale/run.sh [--build DIR] [--points 1000,5000,10000] [--busy N]
#                           [--hz HZ] [--startup S] [--steady S] [--cap S]
#                           [--repeat N] [--tools opal[,perf]]
#
# Per point: N processes (200 busy, the rest asleep) over N/5 distinct
# binaries, started before the tool; prints the collector's start-up CPU,
# the time until every busy process has a complete stack, steady CPU, RSS
# and its bound counters; bench/scale/scale.py describes each figure. The
# default run takes about 5 minutes. Per-run files are left in
# DIR/bench/scale/run.
set -euo pipefail

BUILD=build
args=()
while [ $# -gt 0 ]; do
	case "$1" in
	--build) BUILD=$2; shift 2 ;;
	--points|--busy|--hz|--startup|--steady|--cap|--interval|--repeat|--tools) args+=("$1" "$2"); shift 2 ;;
	*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
	esac
done

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
die() { echo "bench/scale: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (BPF, perf events, BPF run-time statistics)"
for t in perf bpftool gcc as readelf python3; do
	command -v "$t" >/dev/null || die "$t is missing (apt-get install linux-perf bpftool gcc binutils python3)"
done

make -s BUILD="$BUILD" all
mkdir -p "$BUILD/bench/scale"

echo "Scale, $(date -u +%Y-%m-%d), $(uname -r), $(nproc) CPUs," \
	"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //');" \
	"opal $(git describe --always --dirty 2>/dev/null || echo '?'), $(perf version)," \
	"pid_max $(cat /proc/sys/kernel/pid_max), load average $(cut -d' ' -f1-3 /proc/loadavg)"
ulimit -n 65536 2>/dev/null || true
exec /usr/bin/python3 "$here/scale.py" --build "$BUILD" --json "$BUILD/bench/scale/runs.json" "${args[@]}"
