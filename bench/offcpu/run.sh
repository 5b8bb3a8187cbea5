#!/usr/bin/env bash
# Off-CPU overhead (docs/performance.md "Off-CPU"): the collector's CPU and
# the BPF time per context switch of its sched_switch program while
# pingpong.c makes the machine switch about RATE times a second, for each
# --off-cpu-threshold (and without --off-cpu).
# usage: sudo bench/offcpu/run.sh BUILD_DIR [SECONDS] [RATES] [THRESHOLDS]
#   RATES: blocking switches per second wanted (default "10000 100000"),
#   made by one pingpong per online CPU, pinned; THRESHOLDS: PPM values,
#   PPM/MAX (with --off-cpu-max-rate MAX; else the collector's default)
#   or "off" (default "off 10000 10000/0 100000 1000000 1000000/0").
# Prints one line per run: wanted rate, measured rate (voluntary switches
# of the pingpong threads), threshold, collector CPU (% of one CPU), BPF
# ns per sched_switch run (kernel.bpf_stats_enabled: every switch of the
# machine, blocking or not), BPF CPU (% of one CPU).
set -euo pipefail
build=$(cd "${1:?usage: run.sh BUILD_DIR [SECONDS] [RATES] [THRESHOLDS]}" && pwd)
secs=${2:-10}
rates=${3:-10000 100000}
thresholds=${4:-off 10000 10000/0 100000 1000000 1000000/0}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d /tmp/opal-bench-offcpu.XXXXXX)
pp=$tmp/pingpong
gcc -O2 -Wall -Wextra -pthread -o "$pp" "$here/pingpong.c"
ncpu=$(nproc)
hz=$(getconf CLK_TCK)
old_stats=$(sysctl -n kernel.bpf_stats_enabled)
sym_pid= coll_pid=
stop() {
	[ -n "$coll_pid" ] && kill -INT "$coll_pid" 2>/dev/null && wait "$coll_pid" 2>/dev/null
	[ -n "$sym_pid" ] && kill -INT "$sym_pid" 2>/dev/null && wait "$sym_pid" 2>/dev/null
	coll_pid= sym_pid=
}
trap 'stop; sysctl -qw kernel.bpf_stats_enabled="$old_stats"; rm -rf "$tmp"' EXIT
sysctl -qw kernel.bpf_stats_enabled=1

cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
bpf_stats() {   # run_time_ns run_cnt of opal_switch (0 0 when not loaded)
	bpftool -j prog show 2>/dev/null | python3 -c '
import json, sys
p = [x for x in json.load(sys.stdin) if x.get("name") == "opal_switch"]
print(p[0].get("run_time_ns", 0), p[0].get("run_cnt", 0)) if p else print(0, 0)'
}

printf '%-8s %-9s %-9s %-12s %-13s %s\n' want measured threshold collector% "bpf ns/switch" bpf%
for rate in $rates; do
	for th in $thresholds; do
		d=$tmp/run
		rm -rf "$d" && mkdir -p "$d/state" "$d/out" "$d/run" && chown nobody "$d/state" "$d/out"
		"$build/opal-symbolizer" --socket "$d/run/s.sock" --state-dir "$d/state" --out-dir "$d/out" \
			--user nobody --http-listen none >"$d/sym.log" 2>&1 &
		sym_pid=$!
		sleep 1
		args=(--socket "$d/run/s.sock" --interval 2)
		if [ "$th" = off ]; then
			args+=(--off-cpu=false)
		else
			args+=(--off-cpu --off-cpu-threshold "${th%/*}")
			[ "$th" != "${th%/*}" ] && args+=(--off-cpu-max-rate "${th#*/}")
		fi
		"$build/opal-collector" "${args[@]}" >"$d/coll.log" 2>&1 &
		coll_pid=$!
		sleep 4
		t0=$(cpu_ticks "$coll_pid")
		read -r b0 n0 < <(bpf_stats)
		for ((c = 0; c < ncpu; c++)); do
			taskset -c "$c" "$pp" $((rate / ncpu)) "$secs" >"$d/pp.$c" &
		done
		wait $(jobs -p | grep -vxE "$coll_pid|$sym_pid") 2>/dev/null || true
		t1=$(cpu_ticks "$coll_pid")
		read -r b1 n1 < <(bpf_stats)
		sw=$(cat "$d"/pp.* | awk '{ s += $2 } END { print s }')
		stop
		awk -v want="$rate" -v sw="$sw" -v secs="$secs" -v th="$th" -v dt=$((t1 - t0)) -v hz="$hz" \
			-v db=$((b1 - b0)) -v dn=$((n1 - n0)) 'BEGIN {
			printf "%-8d %-9d %-9s %-12.2f %-13s %-9.2f\n", want, sw / secs, th,
				dt * 100 / hz / secs, dn ? sprintf("%.0f", db / dn) : "-",
				db / 1e9 * 100 / secs
		}'
	done
done
