#!/usr/bin/env bash
# Unwinding completeness benchmark (docs/performance.md, "Unwinding
# completeness"). Runs as root.
#
# usage: bench/unwind/run.sh [--build DIR] [--duration S] [--frequency HZ]
#                            [--depths "5 50 200"] [--dwarf-size BYTES]
#
# Starts the workloads, then, all at once on the same workloads for
# --duration seconds (default 30) at --frequency Hz (default 99):
#   opal       opal-symbolizer --whole-run + opal-collector
#   perf dwarf perf record -a -F HZ --call-graph dwarf[,BYTES]
#   perf fp    perf record -a -F HZ --call-graph fp
# and prints, per workload and tool, the share of samples whose user stack
# reaches the outermost frame (bench/unwind/roots.py defines it).
# Workloads (built by bench/unwind/build.sh, -O2 -fomit-frame-pointer):
#   uw_qsort_D  a chain of D frames alternating between uw_work and
#               libuwchain.so, then libc's qsort calling the library's
#               comparator, for each D of --depths
#   uw_pow_D    the same chain, then a loop of libm's pow()
#   python3.11  Debian's /usr/bin/python3.11 running bench/unwind/pyloop.py
#   gzip, xz    compressing a 16 MB text file, over and over (new processes
#               keep starting while the profilers run)
# --dwarf-size is perf's user stack copy per sample (default: perf's own,
# 8192 bytes; at most 65528). Everything is written to DIR/bench/unwind/run.
set -euo pipefail

BUILD=build DURATION=30 FREQUENCY=99 DEPTHS="5 50 200" DWARF_SIZE=
while [ $# -gt 0 ]; do
	case "$1" in
	--build) BUILD=$2; shift 2 ;;
	--duration) DURATION=$2; shift 2 ;;
	--frequency) FREQUENCY=$2; shift 2 ;;
	--depths) DEPTHS=$2; shift 2 ;;
	--dwarf-size) DWARF_SIZE=$2; shift 2 ;;
	*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
	esac
done

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
die() { echo "bench/unwind: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (BPF, perf events)"
PY=/usr/bin/python3.11
[ -x "$PY" ] || die "$PY is missing (apt-get install python3.11)"
for t in perf gzip xz readelf objdump gcc /usr/bin/python3; do
	command -v "$t" >/dev/null || die "$t is missing (apt-get install linux-perf gzip xz-utils binutils gcc python3)"
done

make -s BUILD="$BUILD" all
fix=$BUILD/bench/unwind/fixtures
bash "$here/build.sh" "$fix"
fix=$(cd "$fix" && pwd)
run=$BUILD/bench/unwind/run
rm -rf "$run"
mkdir -p "$run/state" "$run/out"
run=$(cd "$run" && pwd)
chown nobody "$run/state" "$run/out"

pids=()      # process groups started here (setsid), ended by id on exit
sym_pid= coll_pid= pd_pid= pf_pid=
cleanup() {
	for p in "$pd_pid" "$pf_pid"; do
		[ -n "$p" ] && kill -INT "$p" 2>/dev/null || true
	done
	for p in "$coll_pid" "$sym_pid"; do
		[ -n "$p" ] && kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		kill -TERM -- "-$p" 2>/dev/null || true
	done
	wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start() {    # start CMD...: in its own session, its pid appended to pids
	setsid "$@" >/dev/null 2>&1 &
	pids+=($!)
}

workloads=()
for d in $DEPTHS; do
	start "$fix/uw_work" qsort "$d"
	start "$fix/uw_work" pow "$d"
	workloads+=(--workload "uw_qsort_$d=$fix/uw_work:$d" --workload "uw_pow_$d=$fix/uw_work:$d")
done
start "$PY" "$here/pyloop.py"
start bash -c "while :; do gzip -6 -c '$fix/data.txt' >/dev/null; done"
start bash -c "while :; do xz -3 -T1 -c '$fix/data.txt' >/dev/null; done"
workloads+=(--workload "python3.11=$PY" --workload "gzip=$(command -v gzip)" \
	--workload "xz=$(command -v xz)")
sleep 2

sock=$run/state/collector.sock
setsid "$BUILD/opal-symbolizer" --socket "$sock" --state-dir "$run/state" --out-dir "$run/out" \
	--whole-run --user nobody --http-listen none 2>"$run/symbolizer.log" &
sym_pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
[ -S "$sock" ] || die "opal-symbolizer did not start (see $run/symbolizer.log)"

dwarf=dwarf${DWARF_SIZE:+,$DWARF_SIZE}
perf_common=(-a -F "$FREQUENCY" -m 16M)
setsid perf record "${perf_common[@]}" --call-graph "$dwarf" -o "$run/perf-dwarf.data" \
	2>"$run/perf-dwarf.log" &
pd_pid=$!
setsid perf record "${perf_common[@]}" --call-graph fp -o "$run/perf-fp.data" \
	2>"$run/perf-fp.log" &
pf_pid=$!
setsid "$BUILD/opal-collector" --socket "$sock" --frequency "$FREQUENCY" --interval 5 \
	2>"$run/collector.log" &
coll_pid=$!
echo "bench/unwind: profiling for ${DURATION}s at ${FREQUENCY} Hz (opal, perf $dwarf, perf fp)" >&2
sleep "$DURATION"
kill -INT "$pd_pid" "$pf_pid"
kill -TERM "$coll_pid"
wait "$pd_pid" "$pf_pid" || true
wait "$coll_pid" || die "opal-collector failed (see $run/collector.log)"
kill -TERM "$sym_pid"
wait "$sym_pid" || true
pd_pid= pf_pid= coll_pid= sym_pid=
for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null || true; done
pids=()

"$BUILD/opal-report" stacks "$run/out/profile.pb.gz" >"$run/opal.stacks"
for m in dwarf fp; do
	perf script -i "$run/perf-$m.data" -F comm,pid,tid,ip,sym,dso --max-stack 1024 \
		>"$run/perf-$m.stacks" 2>"$run/perf-$m.script.log"
done

echo
echo "Unwinding completeness, $(date -u +%Y-%m-%d), $(uname -r), $(nproc) CPUs," \
	"$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), ${DURATION}s at ${FREQUENCY} Hz;" \
	"opal $(git describe --always --dirty 2>/dev/null || echo '?'), $(perf version)," \
	"perf_event_max_stack=$(sysctl -n kernel.perf_event_max_stack), load average $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 "$here/roots.py" "${workloads[@]}" --opal "$run/opal.stacks" \
	--perf "perf $dwarf=$run/perf-dwarf.stacks" --perf "perf fp=$run/perf-fp.stacks" \
	--details "$run/incomplete.txt" --markdown "$run/completeness.md"
for m in dwarf fp; do
	grep -hiE 'lost|Processed' "$run/perf-$m.log" "$run/perf-$m.script.log" | sed "s/^/perf $m: /" || true
done
grep -h 'interval.*samples' "$run/symbolizer.log" | tail -n 1 | sed 's/^/opal: /' || true
echo "(roots of incomplete stacks: $run/incomplete.txt)"
