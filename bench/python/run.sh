#!/usr/bin/env bash
# Python frames (docs/performance.md, "Python"), as root:
#   completeness: the samples of a pure-Python call chain and of Python ->
#     C -> Python (sorted(key=), functools.reduce) that have exactly the
#     Python frames the program reports of itself and reach the thread's
#     root, per CPython found (the harness and checks of
#     tests/integration/test_python.sh, here with CPU_S seconds of spinning
#     per worker and no pass mark);
#   cost.py: BPF ns per sample with 30 Python + about 20 native frames,
#     the collector's CPU and RSS at 20 and 99 Hz with and without Python
#     frames (--native-only), and memory per 10,000 code objects.
# usage: sudo bench/python/run.sh [--build DIR] [--cpu-seconds S] [--seconds S]
#        [--repeat N] [PYTHON...]   (PYTHONs: only those, for completeness)
# Prints figures; never passes or fails on them.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$repo/build cpu_s=3 seconds=10 repeat=3
while [ $# -gt 0 ]; do
	case $1 in
	--build) build=$(cd "$2" && pwd); shift 2 ;;
	--cpu-seconds) cpu_s=$2; shift 2 ;;
	--seconds) seconds=$2; shift 2 ;;
	--repeat) repeat=$2; shift 2 ;;
	*) break ;;
	esac
done
[ "$(id -u)" -eq 0 ] || { echo "run.sh: needs root (BPF)" >&2; exit 1; }

echo "== completeness: $cpu_s CPU seconds per worker, 99 Hz"
log=$(mktemp /tmp/opal-bench-python.XXXXXX)
trap 'rm -f "$log"' EXIT
PY_CPU_S=$cpu_s PY_MIN_PCT=0 bash "$repo/tests/integration/test_python.sh" "$build" \
	--scenarios chain,callback "$@" >"$log" 2>&1 || true
# "PASS 3.11.2 (Debian /usr/bin/python3.11): call chain: ... (N of M samples)"
# and for the callbacks a second line: the native frames between
sed -nE 's/^(PASS|FAIL) ([^:]+): ([^:]+): (.*) \(([0-9]+) of ([0-9]+) samples.*$/\2\t\3\t\4\t\5\t\6/p' "$log" |
	awk -F'\t' '{ what = $2 ($3 ~ /evaluation, then native/ ? ": native frames between" : "")
		printf "%-60s %-60s %6d of %6d  %7.2f%%\n", $1, what, $4, $5, $5 ? 100 * $4 / $5 : 0 }'
grep '^summary: ' "$log" || { echo "run.sh: the completeness run printed no summary:" >&2; tail -n 20 "$log" >&2; }

echo "== cost"
python3 "$here/cost.py" --build "$build" --seconds "$seconds" --repeat "$repeat"
