#!/usr/bin/env python3
"""Stands in for a systemd socket unit and its service where systemd is not
PID 1: binds a listening Unix socket (ListenStream=, SocketMode=,
DirectoryMode=, Backlog=), keeps it across service restarts and passes it to
each start of the service by the sd_listen_fds protocol (fd 3, LISTEN_FDS=1,
LISTEN_PID set in the child before it execs, so the exec chain
chroot -> setpriv -> daemon keeps the pid it names).

Commands, one a line, from the FIFO CONTROL; each answer is one line on
stdout:
    start  -> "started PID"          the service started with this
                                     process's environment plus LISTEN_*
    stop   -> "stopped STATUS"       SIGTERM, then its exit status (or
                                     "stopped timeout" after 30 s, killed)
    quit   -> "quit"                 stops the service if running, removes
                                     the socket (RemoveOnStop=yes), exits
usage: socket_unit.py SOCKET MODE DIR_MODE BACKLOG CONTROL -- COMMAND...
"""
import os
import signal
import socket
import sys
import time


def say(text):
    print(text, flush=True)


def start(lfd, argv):
    pid = os.fork()
    if pid == 0:
        try:
            if lfd != 3:
                os.dup2(lfd, 3)   # the copy is inheritable
            os.set_inheritable(3, True)
            os.setsid()
            env = dict(os.environ, LISTEN_FDS="1", LISTEN_PID=str(os.getpid()))
            env.pop("LISTEN_FDNAMES", None)
            os.execvpe(argv[0], argv, env)
        finally:
            os._exit(127)
    return pid


def stop(pid):
    if pid is None:
        return "stopped none"
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return "stopped %d" % os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return "stopped timeout"


def main():
    if len(sys.argv) < 8 or sys.argv[6] != "--":
        sys.exit(__doc__.strip().splitlines()[-1])
    path, mode, dir_mode, backlog, control = sys.argv[1:6]
    argv = sys.argv[7:]
    os.makedirs(os.path.dirname(path), mode=int(dir_mode, 8), exist_ok=True)
    if os.path.exists(path):
        os.unlink(path)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    os.chmod(path, int(mode, 8))
    s.listen(int(backlog))
    lfd = s.fileno()
    say("listening %s" % path)
    child = None
    while True:
        with open(control) as fifo:   # reopened after each writer closes
            for line in fifo:
                cmd = line.strip()
                if cmd == "start":
                    child = start(lfd, argv)
                    say("started %d" % child)
                elif cmd == "stop":
                    say(stop(child))
                    child = None
                elif cmd == "quit":
                    if child is not None:
                        stop(child)
                    s.close()
                    os.unlink(path)
                    say("quit")
                    return
                elif cmd:
                    say("unknown %s" % cmd)


if __name__ == "__main__":
    main()
