#!/usr/bin/env python3
"""Speaks opal's wire protocol (proto/opal/wire.proto) by hand, for bad-input
tests: it can send malformed frames a real collector never would.
Encodes the few protobuf fields it needs itself (varint and length-delimited)
so the tests need no protobuf package."""
import socket
import struct
import sys

MAGIC = b"OPAL"


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def f_varint(num, v):
    return varint(num << 3) + varint(v)


def f_bytes(num, b):
    if isinstance(b, str):
        b = b.encode()
    return varint(num << 3 | 2) + varint(len(b)) + b


def packed(num, values):
    return f_bytes(num, b"".join(varint(v) for v in values))


def envelope(field, msg, version=1):
    return f_varint(1, version) + f_bytes(field, msg)


def frame(payload, magic=MAGIC, length=None):
    return magic + struct.pack("<I", len(payload) if length is None else length) + payload


def hello():
    return envelope(2, f_varint(1, 1) + f_bytes(2, "badinput-host") + f_varint(6, 20)
                    + f_varint(7, 50_000_000))


def file_info(file_id, path):
    # kind ELF, file_id, path, has_fd
    return envelope(3, f_varint(1, 1) + f_bytes(2, file_id) + f_bytes(4, path) + f_varint(6, 1))


def frame_msg(kind, address, mapping_index=0, ret=False):
    return f_varint(1, kind) + f_varint(2, address) + f_varint(3, mapping_index) + f_varint(4, int(ret))


def stack(frames, timestamps, cpus):
    return (b"".join(f_bytes(1, f) for f in frames) + packed(2, timestamps) + packed(3, cpus))


def interval(run_id, seq, pid, comm, mappings, stacks):
    thread = f_varint(1, pid) + f_bytes(2, comm) + b"".join(f_bytes(3, s) for s in stacks)
    proc = (f_varint(1, pid) + f_bytes(2, comm) + f_bytes(3, "/opal-test/" + comm)
            + b"".join(f_bytes(6, m) for m in mappings) + f_bytes(7, thread))
    body = f_varint(1, seq) + f_varint(2, run_id) + f_varint(3, 1_700_000_000_000_000_000) \
        + f_varint(4, 1_700_000_001_000_000_000) + f_bytes(5, proc)
    return envelope(4, body)


def mapping(start, limit, offset, file_id, path):
    return (f_varint(1, start) + f_varint(2, limit) + f_varint(3, offset) + f_bytes(4, file_id)
            + f_varint(5, start - offset) + f_bytes(6, path))


def read_ack(sock):
    """Returns (run_id, seq) of the next Ack, skipping other messages."""
    while True:
        hdr = recv_exact(sock, 8)
        if hdr[:4] != MAGIC:
            raise RuntimeError("bad magic from symbolizer")
        payload = recv_exact(sock, struct.unpack("<I", hdr[4:])[0])
        fields = parse(payload)
        if 5 in fields:
            ack = parse(fields[5])
            return ack.get(1, 0), ack.get(2, 0)


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise EOFError("symbolizer closed the connection")
        buf += chunk
    return buf


def parse(b):
    """Top-level fields of a message: varints as ints, others as bytes."""
    out, i = {}, 0
    while i < len(b):
        key, i = read_varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            out[num], i = read_varint(b, i)
        elif wt == 2:
            n, i = read_varint(b, i)
            out[num] = b[i:i + n]
            i += n
        else:
            raise RuntimeError("unexpected wire type %d" % wt)
    return out


def read_varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def connect(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(path)
    return s


if __name__ == "__main__":
    sys.exit("library module: imported by the bad-input test")
