#!/usr/bin/env bash
# Profiler overhead benchmark (docs/performance.md, "Overhead"). Runs as root.
#
# usage: bench/overhead/run.sh [--build DIR] [--repeat N] [--measure S]
#                              [--warmup S] [--freqs 20,99] [--rounds N]
#                              [--slowdown-seconds S] [--tools opal,perf,bpftrace]
#   (--tools may also name opal-offcpu: opal with --off-cpu at its default threshold)
#        bench/overhead/run.sh --depths 5,30,50,200 [--build DIR] [--repeat N]
#                              [--hz HZ] [--tools opal,bpftrace] [--measure S] [--warmup S]
#   (BPF ns per sample by chain depth instead: bench/overhead/depths.py)
#
# With both CPUs kept busy (uw_work qsort 20 and Debian's python3.11 running
# bench/unwind/pyloop.py), runs opal-collector, `perf record -a -g` and
# `bpftrace -e 'profile:hz:F { @[kstack, ustack] = count(); }'` one at a time
# at each frequency, --repeat times (default 5) interleaved, and prints the
# medians [min–max] of: machine CPU share (process user+sys plus BPF run
# time), BPF ns per sample, peak RSS, startup times; then the wall-clock
# slowdown of a fixed workload at 99 Hz (--rounds rounds, default 5).
# bench/overhead/overhead.py describes every figure. At the defaults it takes
# about 10 minutes. Per-run files are left in DIR/bench/overhead/run.
set -euo pipefail

BUILD=build
script=overhead.py
args=()
while [ $# -gt 0 ]; do
	case "$1" in
	--build) BUILD=$2; shift 2 ;;
	--repeat|--measure|--warmup|--freqs|--rounds|--slowdown-seconds|--tools|--hz)
		args+=("$1" "$2"); shift 2 ;;
	--depths) script=depths.py; args+=("$1" "$2"); shift 2 ;;
	*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
	esac
done

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
die() { echo "bench/overhead: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (BPF, perf events, BPF run-time statistics)"
[ -x /usr/bin/python3.11 ] || die "/usr/bin/python3.11 is missing (apt-get install python3.11)"
for t in perf bpftrace bpftool gcc objdump readelf /usr/bin/python3; do
	command -v "$t" >/dev/null || die "$t is missing (apt-get install linux-perf bpftrace bpftool gcc binutils python3)"
done

make -s BUILD="$BUILD" all
bash bench/unwind/build.sh "$BUILD/bench/unwind/fixtures"
mkdir -p "$BUILD/bench/overhead"

echo "Overhead, $(date -u +%Y-%m-%d), $(uname -r), $(nproc) CPUs," \
	"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //');" \
	"opal $(git describe --always --dirty 2>/dev/null || echo '?'), $(perf version)," \
	"$(bpftrace --version), load average $(cut -d' ' -f1-3 /proc/loadavg)"
if [ "$script" = overhead.py ]; then
	args+=(--json "$BUILD/bench/overhead/runs.json")
fi
exec /usr/bin/python3 "$here/$script" --build "$BUILD" "${args[@]}"
