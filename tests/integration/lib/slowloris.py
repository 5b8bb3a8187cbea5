#!/usr/bin/env python3
"""Slow and many HTTP clients against the symbolizer's API (test_neighbours.sh).

usage: slowloris.py PORT SECONDS
For SECONDS: keeps 2200 connections open from 127.0.0.10-127.0.0.75 (the
ordinary connection limit is 2048) and 100 from 127.0.0.2 (the per-address
limit is 64), each sending its request headers one byte every 3 s and
reopened when the server closes it; meanwhile GET /healthz from 127.0.0.1
every 0.5 s and GET /metrics every 2 s, each with a 1 s limit, and once
the ordinary limit is reached a POST /symbolize/v1 from a fresh address
(127.0.0.200) until a reserved slot answers it 503. Prints one line per
finding: "probes N failed N slowest MS", "metrics N failed N",
"reserved-post STATUS", "open MAX" (most connections held at once)."""
import resource
import socket
import sys
import threading
import time

port, seconds = int(sys.argv[1]), float(sys.argv[2])
resource.setrlimit(resource.RLIMIT_NOFILE, (8192, 8192))
REQ = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200
end = time.time() + seconds
lock = threading.Lock()
conns = {}   # socket -> bytes sent
held = {}    # attacker thread -> connections it holds
max_open = 0


def open_one(src):
    s = socket.socket()
    s.setblocking(True)
    s.settimeout(1)
    try:
        s.bind((src, 0))
        s.connect(("127.0.0.1", port))
        s.setblocking(False)
    except OSError:
        s.close()
        return None
    return s


def attacker(sources, per_source):
    global max_open
    mine = []
    while time.time() < end:
        for src in sources:
            n = sum(1 for s, a in mine if a == src)
            for _ in range(per_source - n):
                s = open_one(src)
                if s:
                    mine.append((s, src))
        with lock:
            held[threading.get_ident()] = len(mine)
            max_open = max(max_open, sum(held.values()))
        for s, a in list(mine):
            try:
                k = conns.get(s, 0)
                s.send(REQ[k % len(REQ):k % len(REQ) + 1])
                conns[s] = k + 1
                if s.recv(1, socket.MSG_PEEK) == b"":
                    raise OSError("closed")
            except BlockingIOError:
                pass
            except OSError:
                mine.remove((s, a))
                conns.pop(s, None)
                s.close()
        time.sleep(3)
    for s, _ in mine:
        s.close()


def get(path, src, timeout=1.0):
    t = time.time()
    s = socket.socket()
    s.settimeout(timeout)
    try:
        s.bind((src, 0))
        s.connect(("127.0.0.1", port))
        s.sendall(b"GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" % path)
        data = s.recv(100)
        ok = data.startswith(b"HTTP/1.1 200")
    except OSError:
        ok = False
    finally:
        s.close()
    return ok, (time.time() - t) * 1000


def post_reserved():
    s = socket.socket()
    s.settimeout(2)
    try:
        s.bind(("127.0.0.200", 0))
        s.connect(("127.0.0.1", port))
        s.sendall(b"POST /symbolize/v1 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        return s.recv(100).split(b" ")[1].decode()
    except (OSError, IndexError):
        return "none"
    finally:
        s.close()


threads = [threading.Thread(target=attacker, args=(["127.0.0.%d" % i for i in range(10 + k, 76, 4)],
                                                   34), daemon=True) for k in range(4)]
threads.append(threading.Thread(target=attacker, args=(["127.0.0.2"], 100), daemon=True))
for t in threads:
    t.start()
probes = failed = m_n = m_failed = 0
slowest = 0.0
reserved = "not tried"
last_metrics = 0
while time.time() < end:
    ok, ms = get(b"/healthz", "127.0.0.1")
    probes += 1
    failed += not ok
    slowest = max(slowest, ms)
    if time.time() - last_metrics > 2:
        last_metrics = time.time()
        ok, _ = get(b"/metrics", "127.0.0.1")
        m_n += 1
        m_failed += not ok
    if reserved != "503" and max_open >= 2048:
        reserved = post_reserved()
    time.sleep(0.5)
for t in threads:
    t.join(10)
print("probes %d failed %d slowest %d" % (probes, failed, slowest))
print("metrics %d failed %d" % (m_n, m_failed))
print("reserved-post %s" % reserved)
print("open %d" % max_open)
