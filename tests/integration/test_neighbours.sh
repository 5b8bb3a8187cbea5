#!/usr/bin/env bash
# Hostile neighbours (docs/deployment.md, "Threat model"): the collector
# gives nothing (no Hello, no kallsyms descriptor, no ELF descriptor) to a
# listener on its socket path that runs as another user, and refuses at
# start a socket whose folder another user could write; the HTTP API
# answers /healthz within 1 s throughout a slowloris run past its
# connection limits, and refuses a chunked body over its bound with 413;
# a manual start (umask 022) leaves out/ and state.db private, and
# --output-group makes the profiles readable by that group only.
# Ends with a summary line: hostile inputs tried, bounds crossed.
# usage: tests/integration/test_neighbours.sh BUILD_DIR   (as root)
set -uo pipefail
. "$(dirname "$0")/lib/common.sh"
need_build "${1:?usage: test_neighbours.sh BUILD_DIR}"
need_daemons
need_tools python3
[ "$prereq_ok" -eq 1 ] || finish

make_tmp opal-neighbours
hostile=0 crossed=0

# crossed CHECK WHY: a hostile input got past its bound.
crossed() {
	crossed=$((crossed + 1))
	fail "$1" "$2"
}

# ---- a listener run as nobody on the socket path ---------------------------------
mkdir -m 0755 "$tmp/run"
python3 "$lib_dir/fake_listener.py" "$tmp/run/s.sock" nobody 8 >"$tmp/fake.log" 2>&1 &
fake=$!
wait_log "$tmp/fake.log" 'listening as' 10 "$fake" || fail "fake listener starts" "$(cat "$tmp/fake.log")"
hostile=$((hostile + 1))
if start_collector "$tmp/coll-fake.log" --socket "$tmp/run/s.sock" --frequency 99 --interval 1; then
	wait_log "$tmp/coll-fake.log" 'refusing the listener on' 10 "$coll_pid"
	busy_load 3
	wait "$fake"
	got=$(tail -n 1 "$tmp/fake.log")
	if [[ $got =~ ^connections\ ([0-9]+)\ bytes\ 0\ fds\ 0$ ]] && [ "${BASH_REMATCH[1]}" -ge 1 ]; then
		pass "listener as nobody: $got (nothing sent: no Hello, no kallsyms, no ELF descriptor)"
	else
		crossed "listener as nobody gets nothing" "$got"
	fi
	grep -q "refusing the listener on $tmp/run/s.sock: it runs as uid $(id -u nobody)" \
		"$tmp/coll-fake.log" &&
		pass "the refusal is logged with the listener's uid" ||
		fail "refusal logged" "$(grep -v libbpf "$tmp/coll-fake.log" | tail -n 3)"
	[ "$(grep -c 'refusing the listener' "$tmp/coll-fake.log")" -eq 1 ] &&
		pass "logged once per outage, not per retry" ||
		fail "logged once" "$(grep -c 'refusing the listener' "$tmp/coll-fake.log") lines"
	# the real symbolizer on the same path afterwards: served, no restart needed
	launch_symbolizer "$tmp/sym.log" --socket "$tmp/run/s.sock" --state-dir "$tmp/state" \
		--out-dir "$tmp/out" --user nobody --http-listen 127.0.0.1:0 && sym=$sym_pid
	if [ -n "${sym:-}" ] && wait_log "$tmp/sym.log" 'interval 2: ' 20 "$sym"; then
		pass "then a root-started symbolizer on the same path gets the intervals"
		port=$(http_port "$tmp/sym.log")
		n=$(curl -s --max-time 5 "http://127.0.0.1:$port/metrics" |
			sed -n 's/^opal_collector_peers_refused_total{[^}]*} \([0-9]*\)$/\1/p; s/^opal_collector_peers_refused_total \([0-9]*\)$/\1/p' | head -n 1)
		[ "${n:-0}" -ge 1 ] && pass "refused listeners counted in /metrics ($n)" ||
			fail "peers_refused in /metrics" "$(curl -s "http://127.0.0.1:$port/metrics" | grep -i refused)"
	else
		fail "symbolizer after the fake one" "$(tail -n 3 "$tmp/sym.log")"
	fi
	stop_daemon "collector stops" "$coll_pid" 15 "$tmp/coll-fake.log"
	[ -n "${sym:-}" ] && stop_daemon "symbolizer stops" "$sym" 15 "$tmp/sym.log"
fi

# ---- a socket folder others may write ------------------------------------------------
for mode in 0777 1777 0775; do
	hostile=$((hostile + 1))
	d=$tmp/open$mode
	mkdir -p "$d"
	chmod "$mode" "$d"
	timeout 20 "$collector" --socket "$d/s.sock" --frequency 99 >"$tmp/coll-open.log" 2>&1
	rc=$?
	if [ $rc -eq 1 ] && grep -q "refusing --socket $d/s.sock: $d (mode $mode) is writable by users other than root" "$tmp/coll-open.log"; then
		pass "socket folder of mode $mode refused at start (exit 1, folder named)"
	else
		crossed "socket folder of mode $mode refused" "exit $rc: $(grep -v libbpf "$tmp/coll-open.log" | tail -n 2)"
	fi
done
hostile=$((hostile + 1))
mkdir -m 0755 "$tmp/nobodys"
chown nobody "$tmp/nobodys"
timeout 20 "$collector" --socket "$tmp/nobodys/s.sock" >"$tmp/coll-owner.log" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "belongs to uid $(id -u nobody), neither root nor the symbolizer's user" "$tmp/coll-owner.log" &&
	pass "socket folder owned by nobody refused at start" ||
	crossed "folder owned by nobody refused" "exit $rc: $(tail -n 2 "$tmp/coll-owner.log")"

# ---- collector socket frames and idle peers -------------------------------------------
mkdir -p "$tmp/frames"
if launch_symbolizer "$tmp/frames/sym.log" --socket "$tmp/frames/s.sock" \
	--state-dir "$tmp/frames/state" --out-dir "$tmp/frames/out" --user nobody \
	--http-listen 127.0.0.1:0; then
	fsym=$sym_pid
	port=$(http_port "$tmp/frames/sym.log")
	hostile=$((hostile + 2))
	PYTHONPATH=$lib_dir python3 - "$tmp/frames/s.sock" "$fsym" >"$tmp/frames/client.log" 2>&1 <<'PY'
import sys, time
from wire_client import *
sock_path, pid = sys.argv[1], int(sys.argv[2])
fid = bytes(range(16))
m = mapping(0x400000, 0x500000, 0, fid, "/opal-test/frames")
good = stack([frame_msg(1, 0x1234, 0)], [1_700_000_000_500_000_000], [0])
n = 31_000_000   # empty Process messages: 62 MB that would decode into GBs
body = f_varint(1, 1) + f_varint(2, 91) + b"\x2a\x00" * n
bomb = frame(f_varint(1, 1) + varint(4 << 3 | 2) + varint(len(body)) + body)
s = connect(sock_path)
s.settimeout(60)
s.sendall(frame(hello()))
s.sendall(bomb)
s.sendall(frame(interval(91, 2, 4242, "frames", [m], [good])))
print("ack after the bomb", read_ack(s))
hwm = [l for l in open("/proc/%d/status" % pid) if l.startswith("VmHWM")][0].split()[1]
print("VmHWM kB", hwm)
# four idle collectors hold every slot; a fifth is served once they are idle
s.close()
time.sleep(0.5)
idle = []
for i in range(4):
    c = connect(sock_path)
    c.sendall(frame(hello()))
    idle.append(c)
time.sleep(31)
f = connect(sock_path)
f.settimeout(20)
f.sendall(frame(hello()))
f.sendall(frame(interval(92, 1, 4242, "frames", [m], [good])))
print("fifth collector ack", read_ack(f))
PY
	hwm=$(sed -n 's/^VmHWM kB //p' "$tmp/frames/client.log")
	if grep -q '^ack after the bomb (91, 2)' "$tmp/frames/client.log" && [ -n "$hwm" ] &&
		[ "$hwm" -lt $((1024 * 1024)) ] && grep -q 'decoding it would take over' "$tmp/frames/sym.log"; then
		pass "62 MB frame of 31 million empty messages dropped within the decode budget (VmHWM $((hwm / 1024)) MiB); the next interval acknowledged"
	else
		crossed "frame of empty messages" "VmHWM ${hwm:-?} kB; $(tail -n 3 "$tmp/frames/client.log" | tr '\n' ' ')"
	fi
	if grep -q '^fifth collector ack (92, 1)' "$tmp/frames/client.log" &&
		grep -q 'every collector slot taken: closing the connection' "$tmp/frames/sym.log"; then
		pass "four idle collectors do not lock out a fifth (the idlest gives up its slot)"
	else
		crossed "idle collectors lock out a fifth" "$(tail -n 2 "$tmp/frames/client.log" | tr '\n' ' ')"
	fi
	metrics=$(curl -s --max-time 5 "http://127.0.0.1:$port/metrics")
	echo "$metrics" | grep -q '^opal_collector_frames_rejected_total{reason="over_budget"} 1$' &&
		echo "$metrics" | grep -q '^opal_collector_connections_closed_total{reason="idle_evicted"} 1$' &&
		pass "counted: frames_rejected over_budget 1, connections_closed idle_evicted 1" ||
		fail "frame and connection counters" "$(echo "$metrics" | grep -E 'frames_rejected|connections_closed')"
	stop_daemon "symbolizer stops after the frame runs" "$fsym" 10 "$tmp/frames/sym.log"
fi

# ---- the HTTP API: slow and many clients ----------------------------------------------
mkdir -p "$tmp/http"
if launch_symbolizer "$tmp/http/sym.log" --socket "$tmp/http/s.sock" --state-dir "$tmp/http/state" \
	--out-dir "$tmp/http/out" --user nobody --http-listen 127.0.0.1:0; then
	hsym=$sym_pid
	port=$(http_port "$tmp/http/sym.log")
	hostile=$((hostile + 1))
	timeout 120 python3 "$lib_dir/slowloris.py" "$port" 25 >"$tmp/http/slow.log" 2>&1
	metrics=$(curl -s --max-time 5 "http://127.0.0.1:$port/metrics")
	refused() { echo "$metrics" | sed -n "s/^opal_http_refusals_total{reason=\"$1\"} //p"; }
	if grep -qE '^probes [0-9]+ failed 0 slowest ([0-9]{1,3})$' "$tmp/http/slow.log" &&
		grep -qE '^metrics [0-9]+ failed 0$' "$tmp/http/slow.log"; then
		pass "slowloris past the limits: /healthz and /metrics answered within 1 s throughout ($(head -n 2 "$tmp/http/slow.log" | tr '\n' ' '))"
	else
		crossed "/healthz within 1 s during slowloris" "$(tr '\n' ' ' <"$tmp/http/slow.log")"
	fi
	[ "$(refused header_timeout)" -gt 0 ] && [ "$(refused connection_limit)" -gt 0 ] &&
		[ "$(refused address_limit)" -gt 0 ] &&
		pass "refusals counted: header_timeout $(refused header_timeout), connection_limit $(refused connection_limit), address_limit $(refused address_limit)" ||
		fail "refusals counted" "$(echo "$metrics" | grep refusals_total)"
	grep -q '^reserved-post 503$' "$tmp/http/slow.log" && [ "$(refused reserved_only)" -gt 0 ] &&
		pass "at the limit, a reserved slot serves only /healthz and /metrics (POST answered 503)" ||
		fail "reserved slot" "$(grep reserved-post "$tmp/http/slow.log"), reserved_only $(refused reserved_only)"
	# chunked: the same bound as a declared length, 413 and counted
	hostile=$((hostile + 1))
	before=$(refused body_too_large)
	code=$(head -c 100000000 /dev/zero | curl -s -m 60 -o "$tmp/http/413.body" -w '%{http_code}' \
		-H 'Transfer-Encoding: chunked' -H 'Content-Type: application/json' --data-binary @- \
		"http://127.0.0.1:$port/symbolize/v1")
	metrics=$(curl -s --max-time 5 "http://127.0.0.1:$port/metrics")
	if [ "$code" = 413 ] && [ "$(refused body_too_large)" -gt "$before" ]; then
		pass "chunked 100 MB body to /symbolize/v1: 413 ($(cat "$tmp/http/413.body")), counted"
	else
		crossed "chunked body over the bound" "HTTP $code, body_too_large $before -> $(refused body_too_large)"
	fi
	stop_daemon "symbolizer stops after the HTTP runs" "$hsym" 10 "$tmp/http/sym.log"
fi

# ---- files private by default ------------------------------------------------------------
for mode in private group; do
	d=$tmp/umask-$mode
	mkdir -p "$d"
	args=()
	[ $mode = group ] && args=(--output-group adm)
	(umask 022 && launch_symbolizer "$d/sym.log" --socket "$d/s.sock" --state-dir "$d/state" \
		--out-dir "$d/out" --user nobody --http-listen none "${args[@]}" &&
		PYTHONPATH=$lib_dir python3 - "$d/s.sock" <<'PY' && kill -TERM "$sym_pid" && wait "$sym_pid"
import sys
from wire_client import *
fid = bytes(range(16))
m = mapping(0x400000, 0x500000, 0, fid, "/opal-test/umask")
s = connect(sys.argv[1])
s.sendall(frame(hello()))
s.sendall(frame(interval(93, 1, 4242, "umask", [m], [stack([frame_msg(1, 0x1234, 0)],
          [1_700_000_000_500_000_000], [0])])))
read_ack(s)
PY
	) >"$d/run.log" 2>&1
	iv=$(find "$d/out/intervals" -name 'interval-*.pb.gz' | head -n 1)
	got=$(stat -c '%a %G' "$d/out" "$d/out/intervals" "$iv" "$d/state" "$d/state/state.db" 2>&1 | tr '\n' ' ')
	if [ $mode = private ]; then
		want="700 nogroup 700 nogroup 600 nogroup 700 nogroup 600 nogroup "
	else
		want="2750 adm 2750 adm 640 adm 700 nogroup 600 nogroup "
	fi
	hostile=$((hostile + 1))
	[ "$got" = "$want" ] &&
		pass "files after a manual start under umask 022 ($mode): out, intervals, an interval file, state, state.db: $got" ||
		crossed "file modes ($mode)" "got '$got', want '$want'; $(tail -n 3 "$d/run.log")"
done

echo "hostile inputs: $hostile tried, $crossed crossed a bound"
[ "$crossed" -eq 0 ] && pass "hostile-input summary: $hostile tried, none crossed a bound" ||
	fail "hostile-input summary" "$crossed of $hostile crossed a bound"
finish
