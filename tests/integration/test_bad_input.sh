#!/usr/bin/env bash
# Bad input on the collector socket: malformed frames are logged and
# dropped, the symbolizer keeps serving; a file that is not ELF leaves its
# frames as file+0xADDR. Nothing crashes, nothing already written is lost.
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
s.close()
PY
rc=$?
if [ $rc -eq 0 ] && grep -q "ack1 (77, 1)" "$tmp/client.log" && grep -q "ack2 (77, 2)" "$tmp/client.log"; then
	pass "symbolizer acknowledges after malformed frames, bad magic and oversized length"
else
	fail "still serving" "client rc=$rc: $(cat "$tmp/client.log")"
fi
grep -q "ack1-again (77, 1)" "$tmp/client.log" && pass "re-sent interval acknowledged" ||
	fail "re-sent interval" "no second ack"
kill -0 $sym 2>/dev/null && pass "symbolizer alive" || fail "symbolizer alive" "it exited: $(tail -5 "$tmp/sym.log")"
n=$(ls "$tmp/out/intervals/"*.pb.gz 2>/dev/null | wc -l)
[ "$n" -eq 2 ] && pass "each interval written once ($n files)" || fail "written once" "$n interval files"
grep -q "malformed message" "$tmp/sym.log" && pass "malformed frames logged" ||
	fail "malformed logged" "$(cat "$tmp/sym.log")"

kill -TERM $sym; wait $sym
stacks=$("$report" stacks "$tmp/out/profile.pb.gz" 2>&1)
echo "$stacks" | grep -q "notelf+0x1234" && pass "frame of a non-ELF file kept as notelf+0x1234" ||
	fail "non-ELF frame" "$stacks"
echo "$stacks" | grep -q "\[unknown: no mapping\]" && pass "bad mapping index kept as an error frame" ||
	fail "bad mapping index" "$stacks"
total=$(echo "$stacks" | sed -n 's/.*count=\([0-9]*\):.*/\1/p' | awk '{s+=$1} END {print s+0}')
[ "$total" = 3 ] && pass "mismatched stack dropped, the rest kept (3 samples)" ||
	fail "sample count" "expected 3 samples: $stacks"
finish
