#!/usr/bin/env bash
# `make run`: profiles this whole machine for a while and leaves symbolized
# profiles in the output folder, then prints the top functions.
set -euo pipefail

BUILD=build OUT=out DURATION=10 FREQUENCY=20 INTERVAL=5 STATE=var RUN_USER=nobody DEMO=1 OFFCPU=0
while [ $# -gt 0 ]; do
	case "$1" in
	--build) BUILD=$2; shift 2 ;;
	--out) OUT=$2; shift 2 ;;
	--duration) DURATION=$2; shift 2 ;;
	--frequency) FREQUENCY=$2; shift 2 ;;
	--interval) INTERVAL=$2; shift 2 ;;
	--state) STATE=$2; shift 2 ;;
	--user) RUN_USER=$2; shift 2 ;;
	--demo) DEMO=$2; shift 2 ;;
	--offcpu) OFFCPU=$2; shift 2 ;;
	*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
	esac
done

die() { echo "make run: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "the collector needs root (BPF and perf events): run 'sudo make run'"
[ -r /sys/kernel/btf/vmlinux ] || die "this kernel has no BTF (/sys/kernel/btf/vmlinux): BPF CO-RE programs cannot load"

mkdir -p "$STATE" "$OUT"
rm -f "$OUT/profile.pb.gz" "$OUT/profile.otlp.pb" "$OUT/flamegraph.html" "$OUT/offcpu.pb.gz" \
	"$OUT/offcpu-flamegraph.html"
SOCK="$STATE/collector.sock"
rm -f "$SOCK"

sym_pid= coll_pid= demo_pid=
stop_all() {
	if [ -n "$demo_pid" ]; then
		kill -TERM -- "-$demo_pid" 2>/dev/null || true
		wait "$demo_pid" 2>/dev/null || true
	fi
	demo_pid=
	if [ -n "$coll_pid" ] && kill -0 "$coll_pid" 2>/dev/null; then
		kill -TERM "$coll_pid" 2>/dev/null || true
		wait "$coll_pid" 2>/dev/null || true
	fi
	coll_pid=
	if [ -n "$sym_pid" ] && kill -0 "$sym_pid" 2>/dev/null; then
		kill -TERM "$sym_pid" 2>/dev/null || true
		wait "$sym_pid" 2>/dev/null || true
	fi
	sym_pid=
}
interrupted=0
trap 'interrupted=1' INT TERM
trap stop_all EXIT

# OTLP export when the caller's environment names an endpoint (make passes
# its environment on, and so do setsid and the symbolizer's own
# OTEL_EXPORTER_OTLP_* handling, docs/export.md).
sym_args=(--socket "$SOCK" --state-dir "$STATE" --out-dir "$OUT" --whole-run --user "$RUN_USER")
if [ -n "${OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT:-}" ] || [ -n "${OTEL_EXPORTER_OTLP_ENDPOINT:-}" ]; then
	sym_args+=(--export pprof,otlp)
	echo "make run: also exporting OTLP profiles to ${OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT:-${OTEL_EXPORTER_OTLP_ENDPOINT%/}/v1development/profiles}" >&2
fi

# Own sessions (setsid): Ctrl-C reaches only this script, which then stops
# the collector first (it flushes its last interval) and the symbolizer after.
setsid "$BUILD/opal-symbolizer" "${sym_args[@]}" &
sym_pid=$!
for _ in $(seq 50); do
	[ -S "$SOCK" ] && break
	kill -0 "$sym_pid" 2>/dev/null || die "opal-symbolizer exited at startup (see its messages above)"
	sleep 0.1
done
[ -S "$SOCK" ] || die "opal-symbolizer did not create $SOCK"
echo "make run: opal-symbolizer is pid $sym_pid (its own session)" >&2

offcpu_args=()
[ "$OFFCPU" = 1 ] && offcpu_args=(--off-cpu)
# The socket lies in the state folder, which the symbolizer owns as
# $RUN_USER: the collector must trust that user as its listener.
setsid "$BUILD/opal-collector" --socket "$SOCK" --frequency "$FREQUENCY" --interval "$INTERVAL" \
	--symbolizer-user "$RUN_USER" "${offcpu_args[@]}" &
coll_pid=$!
echo "make run: opal-collector is pid $coll_pid (its own session)" >&2

echo "make run: profiling this machine for ${DURATION}s at ${FREQUENCY} Hz (Ctrl-C stops early)" >&2
# A fresh machine may be idle, and idle CPUs are counted, not shipped: a
# niced demo load (scripts/demo_load.py on Debian's python3, built without
# frame pointers: zlib, json and a sort calling back into Python) makes
# sure the profile shows real stacks, into its Python functions. DEMO=0
# turns it off.
if [ "$DEMO" = 1 ]; then
	echo "make run: also running a demo load at nice 19 (scripts/demo_load.py on python3; DEMO=0 turns it off)" >&2
	setsid nice -n 19 /usr/bin/python3 "$(dirname "$0")/demo_load.py" </dev/null >/dev/null 2>&1 &
	demo_pid=$!
	echo "make run: the demo load is pid $demo_pid (its own session)" >&2
fi
end=$((SECONDS + DURATION))
while [ "$interrupted" -eq 0 ] && [ $SECONDS -lt $end ]; do
	kill -0 "$coll_pid" 2>/dev/null || { wait "$coll_pid" || true; coll_pid=; die "opal-collector exited early (see its messages above)"; }
	sleep 0.2 || true
done
stop_all
trap - INT TERM

[ -s "$OUT/profile.pb.gz" ] || die "$OUT/profile.pb.gz was not written"
[ -s "$OUT/profile.otlp.pb" ] || die "$OUT/profile.otlp.pb was not written"
"$BUILD/opal-report" flamegraph "$OUT/profile.pb.gz" -o "$OUT/flamegraph.html" \
	--title "opal: $(hostname), ${DURATION}s at ${FREQUENCY} Hz" || die "writing $OUT/flamegraph.html failed"
"$BUILD/opal-report" top -n 20 "$OUT/profile.pb.gz"
# the Python functions on their own (the demo's among them)
if "$BUILD/opal-report" top -n 10 --kind cpython "$OUT/profile.pb.gz" >"$OUT/.top-python" &&
	grep -q ' (' "$OUT/.top-python"; then
	echo
	echo "Python functions:"
	cat "$OUT/.top-python"
fi
rm -f "$OUT/.top-python"
"$BUILD/opal-report" check "$OUT/profile.pb.gz" || die "the profile is incomplete (see above)"
echo "make run: wrote $OUT/profile.pb.gz (pprof), $OUT/profile.otlp.pb (OTLP), $OUT/flamegraph.html and $OUT/intervals/" >&2
if [ "$OFFCPU" = 1 ]; then
	[ -s "$OUT/offcpu.pb.gz" ] || die "$OUT/offcpu.pb.gz was not written"
	"$BUILD/opal-report" flamegraph "$OUT/offcpu.pb.gz" -o "$OUT/offcpu-flamegraph.html" \
		--title "opal: $(hostname), ${DURATION}s off CPU" ||
		die "writing $OUT/offcpu-flamegraph.html failed"
	echo
	echo "Off CPU (where threads waited):"
	"$BUILD/opal-report" top -n 10 "$OUT/offcpu.pb.gz"
	echo "make run: wrote $OUT/offcpu.pb.gz (off-CPU pprof, also in the OTLP file) and $OUT/offcpu-flamegraph.html" >&2
fi
