#!/usr/bin/env bash
# The on-disk unwind table cache on the real daemons (docs/unwinding.md,
# "The table cache"). Three collector runs share one --unwind-cache folder,
# each profiling the frame-pointer-less fixture tests/fixtures/nofp, whose
# stack to _start needs the unwind tables of nofp, libnofp.so and libc:
#   1. cold: libc's table is built and written as <libc's file ID>.tab;
#   2. warm: a new collector reads it back (log line, unwind_cache_hits),
#      builds it no more (no "built" line, its entry untouched), and the
#      stacks are still whole;
#   3. damaged: a byte of the entry's rules flipped; the collector refuses
#      it (warning, unwind_cache_errors), builds the table again, writes a
#      good entry, and the stacks are whole.
# usage: tests/integration/test_table_cache.sh BUILD_DIR   (as root)
# Prints PASS/FAIL per check and "N passed, N failed"; the temp folder is
# kept on failure (and with OPAL_IT_KEEP=1).
set -uo pipefail

. "$(dirname "$0")/lib/common.sh"

need_build "${1:?usage: test_table_cache.sh BUILD_DIR}"
fx=$build/fixtures/nofp
libc=/lib/x86_64-linux-gnu/libc.so.6
need_daemons
need_bins "$report"
need_fixtures "$fx/nofp" "$fx/libnofp.so"
need_tools python3 curl
[ -r "$libc" ] || need libc "$libc is not readable"
[ "$prereq_ok" -eq 1 ] || finish

make_tmp opal-table-cache
cache=$tmp/cache

# htlhash file ID (shared/fileid.h): SHA-256 of the first and last 4 KiB
# and the size, first 16 bytes.
libc_id=$(python3 - "$libc" <<'EOF'
import hashlib, os, sys
with open(sys.argv[1], 'rb') as f:
    size = os.fstat(f.fileno()).st_size
    n = min(4096, size)
    h = hashlib.sha256(f.read(n))
    f.seek(size - n)
    h.update(f.read(n))
    h.update(size.to_bytes(8, 'big'))
print(h.hexdigest()[:32])
EOF
)
entry=$cache/$libc_id.tab

root='__libc_start_call_main;__libc_start_main_impl;_start'
want="([^;]+;)*spin_leaf;work;walk_exe;lib_walk;walk_exe;main;$root"

# run NAME: symbolizer and collector (--unwind-cache $cache) in $tmp/NAME
# while nofp spins; leaves NAME/collector.log, NAME/metrics.txt and
# NAME/user.txt (COUNT <tab> user frames of nofp's samples, leaf first).
run() {
	local d=$tmp/$1 port pid
	make_dirs "$d"
	start_symbolizer "$d" "$d/symbolizer.log" --whole-run --http-listen 127.0.0.1:0 || return 1
	port=$(http_port "$d/symbolizer.log")
	start_collector "$d/collector.log" --socket "$d/run/opal.sock" --frequency 99 --interval 2 \
		--unwind-cache "$cache" --verbose || return 1
	"$fx/nofp" spin 5 1 >"$d/nofp.log" 2>&1 &
	pid=$!
	wait "$pid"
	sleep 0.5
	stop_daemon "$1: collector stops cleanly" "$coll_pid" 30 "$d/collector.log"
	wait_log "$d/symbolizer.log" 'interval [0-9]* \(final\): ' 10
	curl -s --max-time 10 "http://127.0.0.1:${port:-0}/metrics" >"$d/metrics.txt" 2>&1
	echo "$run_hex" >"$d/run.txt"
	kill -TERM "$sym_pid" 2>/dev/null
	wait_for_exit "$sym_pid" 60
	"$report" stacks "$d/out/profile.pb.gz" >"$d/stacks.txt" 2>"$d/stacks.err" || return 1
	awk -v pid="pid=$pid" '$1 == pid {
		c = $0; sub(/^.* count=/, "", c)
		s = $0; sub(/^[^:]*: /, "", s)
		printf "%d\t%s\n", c + 0, s
	}' "$d/stacks.txt" >"$d/user.txt"
}

metric() {   # NAME COUNTER: the collector's counter in that run's /metrics
	awk -v n="opal_collector_$2_total" -v r="run=\"$(cat "$tmp/$1/run.txt")\"" \
		'$1 ~ "^" n "[{]" && index($1, r) { v = $2 } END { print v + 0 }' "$tmp/$1/metrics.txt"
}

check_stacks() {   # NAME: at least 90% of nofp's (>= 50) samples reach _start
	local msg
	if msg=$(awk -F'\t' -v re="(^|;)$want\$" '
		{ total += $1; if ($2 ~ re) good += $1; else if ($1 > worst) { worst = $1; bad = $2 } }
		END {
			if (total < 50) { printf "only %d samples", total; exit 1 }
			if (good * 100 < total * 90) {
				printf "%d of %d whole; most frequent other: %s", good, total, substr(bad, 1, 400)
				exit 1
			}
			printf "%d of %d samples", good, total
		}' "$tmp/$1/user.txt"); then
		pass "$1: nofp's stacks reach _start through libc ($msg)"
	else
		fail "$1: nofp's stacks reach _start through libc" "$msg"
	fi
}

# A table read back logs "read from the cache" (collector --verbose).
cached_line() { grep -c "file $libc_id: unwind table in slot .* read from the cache" "$tmp/$1/collector.log"; }
built_line() { grep -c "file $libc_id: unwind table in slot .* built in" "$tmp/$1/collector.log"; }

# ---- 1: cold ---------------------------------------------------------------------------
run cold || finish
if [ -s "$entry" ] && [ "$(stat -c '%a %u' "$cache")" = "700 0" ]; then
	pass "cold: libc's table written to $libc_id.tab ($(stat -c %s "$entry") bytes; folder 0700 root)"
else
	fail "cold: libc's table written to the cache" "$(ls -la "$cache" 2>&1 | head -n 5)"
fi
[ "$(metric cold unwind_cache_writes)" -ge 1 ] && [ "$(cached_line cold)" -eq 0 ] &&
	pass "cold: unwind_cache_writes $(metric cold unwind_cache_writes), nothing read back" ||
	fail "cold: counters" "writes $(metric cold unwind_cache_writes), read back $(cached_line cold)"
check_stacks cold

# ---- 2: warm ---------------------------------------------------------------------------
# Other processes on the host may bring binaries the cold run never saw, so
# the warm run may write entries of its own: what must not happen is libc's
# table built again or its entry rewritten.
# (a hit refreshes the entry's mtime, its place in the eviction order)
stamp() { echo "$(stat -c '%i %s' "$entry" 2>&1) $(sha256sum <"$entry" 2>&1 | cut -c1-16)"; }
entry_stamp=$(stamp)
run warm || finish
if [ "$(cached_line warm)" -ge 1 ] && [ "$(metric warm unwind_cache_hits)" -ge 1 ] &&
	[ "$(built_line warm)" -eq 0 ] && [ "$(stamp)" = "$entry_stamp" ]; then
	pass "warm: libc's table read from the cache, not built again (hits $(metric warm unwind_cache_hits))"
else
	fail "warm: libc's table read from the cache" \
		"log lines $(cached_line warm), built $(built_line warm), hits $(metric warm unwind_cache_hits), entry $entry_stamp -> $(stamp)"
fi
check_stacks warm

# ---- 3: damaged ------------------------------------------------------------------------
# the header is a few hundred bytes: offset 4096 is inside the rules
printf '\x5a\xa5' | dd of="$entry" bs=1 seek=4096 conv=notrunc status=none
run damaged || finish
if grep -q "unwind table cache: entry $libc_id damaged" "$tmp/damaged/collector.log" &&
	[ "$(metric damaged unwind_cache_errors)" -ge 1 ] && [ "$(cached_line damaged)" -eq 0 ]; then
	pass "damaged: the entry is refused and counted (unwind_cache_errors $(metric damaged unwind_cache_errors))"
else
	fail "damaged: the entry is refused and counted" \
		"errors $(metric damaged unwind_cache_errors), read back $(cached_line damaged)"
fi
[ -s "$entry" ] && [ "$(metric damaged unwind_cache_writes)" -ge 1 ] &&
	pass "damaged: the table is built again and a new entry written" ||
	fail "damaged: a new entry written" "writes $(metric damaged unwind_cache_writes)"
check_stacks damaged

cleanup
finish
