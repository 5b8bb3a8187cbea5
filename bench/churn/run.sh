#!/usr/bin/env bash
# Process churn benchmark (docs/performance.md, "Process churn"). Runs as root.
#
# usage: bench/churn/run.sh [--build DIR] [--seconds S] [--rate N] [--hz HZ]
#                           [--repeat N] [--tools opal,perf] [--max-inflight N] [--no-cache]
#
# Starts N processes a second (default 100 for 60 s: sh -c true, gcc -c of a
# small file, python3 -c pass, in turn) under each tool alone, and prints the
# tool's machine CPU (BPF included), peak RSS and the share of the churn's
# samples whose user stack is complete; bench/churn/churn.py describes each
# figure. One repeat of both tools takes about 2.5 minutes. Per-run files are
# left in DIR/bench/churn/run.
set -euo pipefail

BUILD=build
args=()
while [ $# -gt 0 ]; do
	case "$1" in
	--build) BUILD=$2; shift 2 ;;
	--seconds|--rate|--hz|--repeat|--tools|--max-inflight) args+=("$1" "$2"); shift 2 ;;
	--no-cache) args+=("$1"); shift ;;
	*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
	esac
done

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
die() { echo "bench/churn: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (BPF, perf events, BPF run-time statistics)"
for t in perf bpftool gcc as readelf python3; do
	command -v "$t" >/dev/null || die "$t is missing (apt-get install linux-perf bpftool gcc binutils python3)"
done

make -s BUILD="$BUILD" all
mkdir -p "$BUILD/bench/churn"

echo "Process churn, $(date -u +%Y-%m-%d), $(uname -r), $(nproc) CPUs," \
	"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //');" \
	"opal $(git describe --always --dirty 2>/dev/null || echo '?'), $(perf version)," \
	"load average $(cut -d' ' -f1-3 /proc/loadavg)"
exec /usr/bin/python3 "$here/churn.py" --build "$BUILD" --json "$BUILD/bench/churn/runs.json" "${args[@]}"
