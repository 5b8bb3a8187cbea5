#!/usr/bin/python3
"""Where a stuck guest's vCPUs are: asks qemu's human monitor (a Unix socket)
for every vCPU's registers a few times and prints each RIP with the kernel
symbol it falls in (the guest's /proc/kallsyms, copied at boot by init.sh;
nokaslr keeps them valid across boots). A vCPU whose
RIP stays in one function across the reads is spinning there: with
interrupts off, that is a lock-up the guest's own detectors cannot report
under TCG (no NMI watchdog).

usage: vcpu_rips.py MONITOR_SOCKET KALLSYMS [READS]"""
import bisect
import re
import socket
import sys
import time


def load_map(path):
    addrs, names = [], []
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[1] in ("t", "T"):
                addrs.append(int(parts[0], 16))
                names.append(parts[2])
    order = sorted(range(len(addrs)), key=addrs.__getitem__)
    return [addrs[i] for i in order], [names[i] for i in order]


def ask(sock_path, command):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(3)
    s.connect(sock_path)
    s.sendall(command.encode() + b"\n")
    out = b""
    deadline = time.time() + 3
    while time.time() < deadline:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            break
        out += chunk
        if out.count(b"RIP=") and out.rstrip().endswith(b"(qemu)"):
            break
    s.close()
    return out.decode(errors="replace")


def symbolize(addrs, names, rip):
    i = bisect.bisect_right(addrs, rip) - 1
    if rip < 0xffff800000000000:
        return "user space"
    if i < 0:
        return "?"
    return "%s+0x%x" % (names[i], rip - addrs[i])


def main():
    if len(sys.argv) < 3:
        print(__doc__.split("\n\n")[-1], file=sys.stderr)
        return 2
    reads = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    addrs, names = load_map(sys.argv[2])
    for n in range(reads):
        try:
            text = ask(sys.argv[1], "info registers -a")
        except OSError as e:
            print("vcpu_rips: monitor: %s" % e)
            return 1
        rips = re.findall(r"RIP=([0-9a-f]{16})", text)
        flags = re.findall(r"RFL=([0-9a-f]{8})", text)
        for cpu, rip in enumerate(rips):
            value = int(rip, 16)
            irq = ""
            if cpu < len(flags):
                irq = " IF=%d" % ((int(flags[cpu], 16) >> 9) & 1)
            print("read %d vCPU %d: RIP %016x%s %s" % (n, cpu, value, irq,
                                                      symbolize(addrs, names, value)))
        time.sleep(0.5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
