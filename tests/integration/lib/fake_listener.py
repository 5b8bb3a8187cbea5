#!/usr/bin/env python3
"""A listener on a collector socket path that is not the symbolizer: binds
SOCK as root (so the test controls the folder), becomes USER, and only then
listens, so SO_PEERCRED names USER as the listener, as it would for a
listener that USER started. For SECONDS it accepts every connection and
counts what arrives: bytes and passed descriptors. Prints
"connections N bytes N fds N" at the end.
usage: fake_listener.py SOCK USER SECONDS"""
import array
import os
import pwd
import select
import socket
import sys
import time

path, user, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
pw = pwd.getpwnam(user)
if os.path.exists(path):
    os.unlink(path)
ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
ls.bind(path)
os.setgroups([])
os.setgid(pw.pw_gid)
os.setuid(pw.pw_uid)
ls.listen(8)
print("listening as", user, flush=True)
conns, n_bytes, n_fds, open_ = 0, 0, 0, []
end = time.time() + seconds
while time.time() < end:
    r, _, _ = select.select([ls] + open_, [], [], 0.1)
    for s in r:
        if s is ls:
            c, _ = ls.accept()
            conns += 1
            open_.append(c)
            continue
        fds = array.array("i")
        try:
            data, anc, _, _ = s.recvmsg(65536, socket.CMSG_SPACE(64 * fds.itemsize))
        except OSError:
            data, anc = b"", []
        for level, kind, d in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                got = array.array("i")
                got.frombytes(d[: len(d) - len(d) % got.itemsize])
                n_fds += len(got)
                for fd in got:
                    os.close(fd)
        n_bytes += len(data)
        if not data:
            open_.remove(s)
            s.close()
print("connections %d bytes %d fds %d" % (conns, n_bytes, n_fds), flush=True)
