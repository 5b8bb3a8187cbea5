#!/usr/bin/env bash
# Bad input on the collector socket: malformed frames are logged and
# dropped, the symbolizer keeps serving; a file that is not ELF leaves its
# frames as file+0xADDR. Nothing crashes, nothing already written is lost.
# Also: --socket never replaces a file that is not a socket nor a live
# socket; a peer that stalls mid-frame does not hold the others; an
# interval that cannot be written (full disk) is not acknowledged and
# arrives again once there is room.
# usage: tests/integration/test_bad_input.sh BUILD_DIR   (as root)
set -uo pipefail
. "$(dirname "$0")/lib/common.sh"
need_build "${1:?usage: test_bad_input.sh BUILD_DIR}"
need_root "the symbolizer is started as root with --user nobody"
need_tools python3
[ "$prereq_ok" -eq 1 ] || finish

make_tmp opal-bad
sock=$tmp/sym.sock
launch_symbolizer "$tmp/sym.log" --socket "$sock" --state-dir "$tmp/state" --out-dir "$tmp/out" \
	--whole-run --user nobody || finish
sym=$sym_pid

head -c 5000 /dev/urandom > "$tmp/notelf.bin"
printf 'garbage that is no ELF' >> "$tmp/notelf.bin"

PYTHONPATH=$lib_dir python3 - "$sock" "$tmp/notelf.bin" > "$tmp/client.log" 2>&1 <<'PY'
import os, socket, sys
from wire_client import *

sock_path, notelf = sys.argv[1], sys.argv[2]
fid = bytes(range(16))

s = connect(sock_path)
s.sendall(frame(b"\xff\xfe garbage payload"))              # does not unpack
s.sendall(frame(envelope(2, b"", version=99)))             # wrong version
s.sendall(frame(hello()))
fd = os.open(notelf, os.O_RDONLY)
socket.send_fds(s, [frame(file_info(fid, "/opal-test/notelf"))], [fd])
os.close(fd)
m = mapping(0x400000, 0x500000, 0, fid, "/opal-test/notelf")
good = stack([frame_msg(1, 0x1234, 0)], [1_700_000_000_500_000_000], [0])
bad_index = stack([frame_msg(1, 0x1234, 7)], [1_700_000_000_600_000_000], [1])
mismatch = stack([frame_msg(1, 0x1000, 0)], [1, 2, 3], [0])
s.sendall(frame(interval(77, 1, 4242, "badinput", [m], [good, bad_index, mismatch])))
print("ack1", read_ack(s))
s.sendall(frame(interval(77, 1, 4242, "badinput", [m], [good])))   # re-sent: not written twice
print("ack1-again", read_ack(s))
s.close()

s = connect(sock_path)                                     # bad magic: connection dropped
s.sendall(frame(hello(), magic=b"NOPE"))
try:
    s.recv(1)
except OSError:
    pass
s.close()

s = connect(sock_path)                                     # oversized length
s.sendall(b"OPAL" + (0xFFFFFFFF).to_bytes(4, "little"))
s.close()

s = connect(sock_path)                                     # still serving
s.sendall(frame(hello()))
s.sendall(frame(interval(77, 2, 4242, "badinput", [m], [good])))
print("ack2", read_ack(s))
long = stack([frame_msg(1, 0x1234, 0)] * 1500, [1_700_000_000_700_000_000], [0])
s.sendall(frame(interval(77, 3, 4242, "badinput", [m], [long])))   # over the stack bound
print("ack3", read_ack(s))
s.close()
PY
rc=$?
if [ $rc -eq 0 ] && grep -q "ack1 (77, 1)" "$tmp/client.log" && grep -q "ack2 (77, 2)" "$tmp/client.log" &&
	grep -q "ack3 (77, 3)" "$tmp/client.log"; then
	pass "symbolizer acknowledges after malformed frames, bad magic, oversized length and a 1500-frame stack"
else
	fail "still serving" "client rc=$rc: $(cat "$tmp/client.log")"
fi
grep -q "ack1-again (77, 1)" "$tmp/client.log" && pass "re-sent interval acknowledged" ||
	fail "re-sent interval" "no second ack"
kill -0 $sym 2>/dev/null && pass "symbolizer alive" || fail "symbolizer alive" "it exited: $(tail -5 "$tmp/sym.log")"
n=$(ls "$tmp/out/intervals/"*.pb.gz 2>/dev/null | wc -l)
[ "$n" -eq 3 ] && pass "each interval written once ($n files)" || fail "written once" "$n interval files"
grep -Eq "interval 3: .* 1 malformed stacks" "$tmp/sym.log" &&
	pass "a stack over 1024 frames dropped and counted as malformed" ||
	fail "stack over the bound" "$(grep 'interval 3' "$tmp/sym.log")"
grep -q "malformed message" "$tmp/sym.log" && pass "malformed frames logged" ||
	fail "malformed logged" "$(cat "$tmp/sym.log")"

# --socket: neither a file that is not a socket nor a socket in use is replaced
echo precious >"$tmp/notsock"
"$symbolizer" --socket "$tmp/notsock" --state-dir "$tmp/b-state" --out-dir "$tmp/b-out" \
	--user nobody --http-listen none >"$tmp/b1.log" 2>&1
rc=$?
[ $rc -ne 0 ] && [ "$(cat "$tmp/notsock")" = precious ] &&
	grep -q "is not a socket: not replacing it" "$tmp/b1.log" &&
	pass "--socket on a regular file: refused, the file kept" ||
	fail "--socket on a regular file" "rc=$rc, file: $(cat "$tmp/notsock" 2>&1); $(tail -2 "$tmp/b1.log")"
ino=$(stat -c %i "$sock")
"$symbolizer" --socket "$sock" --state-dir "$tmp/b-state" --out-dir "$tmp/b-out" \
	--user nobody --http-listen none >"$tmp/b2.log" 2>&1
rc=$?
[ $rc -ne 0 ] && [ "$(stat -c %i "$sock")" = "$ino" ] && grep -q "another process listens" "$tmp/b2.log" &&
	pass "a second symbolizer on a live socket refuses; the first keeps it" ||
	fail "second symbolizer on a live socket" "rc=$rc; $(tail -2 "$tmp/b2.log")"

# the socket's folder is created when missing (as /run/opal on a fresh machine)
if launch_symbolizer "$tmp/b3.log" --socket "$tmp/newdir/c.sock" --state-dir "$tmp/b-state" \
	--out-dir "$tmp/b-out" --user nobody --http-listen none; then
	[ -S "$tmp/newdir/c.sock" ] && pass "the socket's missing folder is created" ||
		fail "socket folder" "no socket in $tmp/newdir"
	kill -TERM "$sym_pid"
	wait "$sym_pid"
fi

# A peer stalled mid-frame is dropped after the frame deadline (5 s); a
# collector connected meanwhile is served then.
PYTHONPATH=$lib_dir python3 - "$sock" > "$tmp/stall.log" 2>&1 <<'PY'
import socket, sys, time
from wire_client import *
sock_path = sys.argv[1]
fid = bytes(range(16))
a = connect(sock_path)
a.sendall(frame(hello()))
a.sendall(b"OPAL" + (100).to_bytes(4, "little") + b"\x0a")   # 1 of 100 bytes
time.sleep(0.5)
b = connect(sock_path)
b.sendall(frame(hello()))
m = mapping(0x400000, 0x500000, 0, fid, "/opal-test/notelf")
b.sendall(frame(interval(78, 1, 4243, "stall", [m], [stack([frame_msg(1, 0x1234, 0)],
          [1_700_000_001_000_000_000], [0])])))
t = time.time()
b.settimeout(20)
print("ack", read_ack(b), "after %.1f s" % (time.time() - t))
a.settimeout(5)
try:
    print("stalled peer closed" if a.recv(1) == b"" else "stalled peer got data")
except OSError as e:
    print("stalled peer:", e)
PY
grep -q "ack (78, 1)" "$tmp/stall.log" && grep -q "stalled peer closed" "$tmp/stall.log" &&
	grep -q "a frame stalled or took over 5000 ms" "$tmp/sym.log" &&
	pass "a peer stalled mid-frame is dropped; the other collector is served" ||
	fail "stalled peer" "$(cat "$tmp/stall.log"; tail -3 "$tmp/sym.log")"

kill -TERM $sym; wait $sym

# Full disk: the interval is not acknowledged, the connection is closed (a
# collector re-sends what is unacknowledged when it reconnects), it is
# counted in /metrics (opal_intervals_unwritten_total{reason="disk_full"}),
# and it is written once there is room again.
mkdir -p "$tmp/full"
if mount -t tmpfs -o size=512k,mode=0755 tmpfs "$tmp/full"; then
	mkdir "$tmp/full/out"
	launch_symbolizer "$tmp/full.log" --socket "$tmp/full.sock" --state-dir "$tmp/full-state" \
		--out-dir "$tmp/full/out" --user nobody --http-listen 127.0.0.1:0 || finish
	full_sym=$sym_pid
	full_port=$(http_port "$tmp/full.log")
	dd if=/dev/zero of="$tmp/full/fill" bs=4k count=1000 2>/dev/null
	mkfifo "$tmp/full.go"
	PYTHONPATH=$lib_dir python3 -u -c "$(cat <<'PY'
import os, sys
from wire_client import *
sock_path, fill = sys.argv[1], sys.argv[2]
fid = bytes(range(16))
m = mapping(0x400000, 0x500000, 0, fid, "/opal-test/notelf")
iv = frame(interval(79, 1, 4244, "full", [m], [stack([frame_msg(1, 0x1234, 0)],
           [1_700_000_002_000_000_000], [0])]))
s = connect(sock_path)
s.sendall(frame(hello()))
s.sendall(iv)
try:
    print("unexpected ack", read_ack(s))
except (OSError, RuntimeError, EOFError) as e:
    print("no ack, connection closed:", type(e).__name__)
input()   # the test reads /metrics before there is room again
os.unlink(fill)
s = connect(sock_path)
s.sendall(frame(hello()))
s.sendall(iv)
print("ack after room", read_ack(s))
PY
)" "$tmp/full.sock" "$tmp/full/fill" <"$tmp/full.go" >"$tmp/full.client.log" 2>&1 &
	client=$!
	exec 7>"$tmp/full.go"
	for _ in $(seq 100); do
		grep -q "no ack" "$tmp/full.client.log" && break
		sleep 0.1
	done
	unwritten=$(curl -s --max-time 10 "http://127.0.0.1:$full_port/metrics" |
		sed -n 's/^opal_intervals_unwritten_total{reason="disk_full"} \([0-9]*\)$/\1/p')
	echo >&7
	exec 7>&-
	wait "$client"
	[ "${unwritten:-0}" -ge 1 ] &&
		pass "full disk: counted in /metrics (disk_full $unwritten)" ||
		fail "full disk: counted in /metrics" "opal_intervals_unwritten_total{reason=\"disk_full\"} is '${unwritten}'"
	grep -q "no ack, connection closed" "$tmp/full.client.log" &&
		grep -q "ack after room (79, 1)" "$tmp/full.client.log" &&
		[ "$(ls "$tmp/full/out/intervals/" | grep -c '\.pb\.gz$')" -eq 1 ] &&
		pass "full disk: no Ack, connection closed; re-sent interval written once" ||
		fail "full disk" "$(cat "$tmp/full.client.log"; tail -4 "$tmp/full.log")"
	kill -TERM "$full_sym"
	wait "$full_sym"
	umount "$tmp/full"
else
	fail "full disk" "cannot mount a tmpfs on $tmp/full"
fi

stacks=$("$report" stacks "$tmp/out/profile.pb.gz" 2>&1)
echo "$stacks" | grep -q "notelf+0x1234" && pass "frame of a non-ELF file kept as notelf+0x1234" ||
	fail "non-ELF frame" "$stacks"
echo "$stacks" | grep -q "\[unknown: no mapping\]" && pass "bad mapping index kept as an error frame" ||
	fail "bad mapping index" "$stacks"
total=$(echo "$stacks" | sed -n 's/.*count=\([0-9]*\):.*/\1/p' | awk '{s+=$1} END {print s+0}')
[ "$total" = 4 ] && pass "mismatched stack dropped, the rest kept (3 samples, 1 of the stall check)" ||
	fail "sample count" "expected 4 samples: $stacks"
finish
