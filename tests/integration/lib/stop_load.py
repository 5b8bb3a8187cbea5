#!/usr/bin/env python3
"""Loads for the stop-time test (test_stop.sh).

hang PORTFILE: a TCP server on a loopback port (written to PORTFILE) that
  accepts every connection, reads what comes and never answers; prints
  "connection N" per connection. Plays a debuginfod server or an OTLP
  endpoint that hangs.
run MODE SOCK HTTP_PORT SYM_PID HANG_LOG: sets up MODE against a running
  symbolizer, plays a collector (Hello, interval 1, its Ack), then sends
  SIGTERM to SYM_PID and prints "term_at NS" (CLOCK_REALTIME), sends the
  final interval 2 on the same connection as a stopping collector does and
  prints "final ack (RUN, 2)" when it is acknowledged; then holds the load
  until the symbolizer is gone. MODE: idle, slow200 (200 connections
  sending headers a byte per 2 s, open during the stop), slow200-closed
  (the same, closed again before the stop), upload (a PUT of an announced
  100 MiB body trickling), debuginfod (a /symbolize/v1 request waiting for
  a debuginfod server that hangs), otlp (an export to an endpoint that
  hangs), stalled-peer (a second collector stalled mid-frame and a third
  one connected and silent)."""
import json
import os
import signal
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wire_client import *  # noqa: E402,F403

RUN = 4711


def hang(portfile):
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(ls.getsockname()[1]))
    os.rename(portfile + ".tmp", portfile)
    held, n = [], 0
    while True:
        c, _ = ls.accept()
        n += 1
        held.append(c)
        print("connection %d" % n, flush=True)


def slow_conns(n, port):
    conns = []
    for i in range(n):
        s = socket.socket()
        s.bind(("127.0.0.%d" % (1 + i % 13), 0))
        s.settimeout(2)
        try:
            s.connect(("127.0.0.1", port))
            conns.append(s)
        except OSError:
            s.close()
    stop = threading.Event()

    def trickle():
        req = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"
        k = 0
        while not stop.is_set():
            for s in list(conns):
                try:
                    s.send(req[k % len(req):k % len(req) + 1])
                except OSError:
                    conns.remove(s)
            k += 1
            stop.wait(2)
    threading.Thread(target=trickle, daemon=True).start()
    return conns, stop


def http(port, method, path, body):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    data = json.dumps(body).encode()
    s.sendall(b"%s %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\nConnection: close\r\n\r\n" % (method, path, len(data)) + data)
    out = b""
    while True:
        c = s.recv(65536)
        if not c:
            break
        out += c
    s.close()
    return json.loads(out.split(b"\r\n\r\n", 1)[1])


def wait_hang(hang_log, n=1, limit=20):
    end = time.time() + limit
    while time.time() < end:
        try:
            if open(hang_log).read().count("connection") >= n:
                return
        except OSError:
            pass
        time.sleep(0.1)
    sys.exit("the hanging server got no connection within %d s" % limit)


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def run(mode, sock_path, port, pid, hang_log):
    fid = bytes(range(16))
    m = mapping(0x400000, 0x500000, 0, fid, "/opal-test/stop")

    def iv(seq):
        return frame(interval(RUN, seq, 4242, "stop", [m],
                              [stack([frame_msg(1, 0x1234, 0)], [1_700_000_000_500_000_000], [0])]))

    held = []
    if mode in ("slow200", "slow200-closed"):
        conns, stop = slow_conns(200, port)
        print("slow connections open: %d" % len(conns), flush=True)
        time.sleep(6)
        if mode == "slow200-closed":
            stop.set()
            for s in conns:
                s.close()
            time.sleep(0.5)
        held = conns
    elif mode == "upload":
        bid = os.urandom(20).hex()
        a = http(port, b"POST", b"/debuginfo/v1/initiate-upload",
                 {"build_id": bid, "type": "debuginfo", "hash": "0" * 64, "size": 100 << 20})
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"PUT %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n"
                  % (a["upload_url"].encode(), 100 << 20))
        s.sendall(b"\0" * (1 << 20))
        held = [s]
        print("upload in progress: 1 MiB of 100 MiB sent", flush=True)
    elif mode == "debuginfod":
        body = {"requests": [{"build_id": os.urandom(20).hex(), "addresses": ["0x1000"]}]}
        threading.Thread(target=lambda: http(port, b"POST", b"/symbolize/v1", body),
                         daemon=True).start()
        wait_hang(hang_log)
        print("debuginfod download hanging", flush=True)
    elif mode == "stalled-peer":
        a = connect(sock_path)
        a.sendall(frame(hello()))
        a.sendall(b"OPAL" + (100).to_bytes(4, "little") + b"\x0a")
        b = connect(sock_path)
        b.sendall(frame(hello()))
        held = [a, b]
        print("a collector stalled mid-frame, another connected and silent", flush=True)

    s = connect(sock_path)
    s.sendall(frame(hello()))
    s.sendall(iv(1))
    print("ack", read_ack(s), flush=True)
    if mode == "otlp":
        wait_hang(hang_log)
        print("OTLP export hanging", flush=True)
    print("term_at %d" % time.time_ns(), flush=True)
    os.kill(pid, signal.SIGTERM)
    s.sendall(iv(2))
    print("final ack", read_ack(s), flush=True)
    s.close()
    end = time.time() + 60
    while alive(pid) and time.time() < end:
        time.sleep(0.05)
    for h in held:
        h.close()


if __name__ == "__main__":
    if sys.argv[1] == "hang":
        hang(sys.argv[2])
    else:
        run(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]),
            sys.argv[6] if len(sys.argv) > 6 else "")
