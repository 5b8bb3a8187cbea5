"""The demo load of `make run` (scripts/run.sh): a small Python program
spending its time in named functions, some in C (zlib, json, sort) called
from Python, so that a fresh, idle machine still shows mixed stacks from
the kernel through the interpreter into these functions. Runs until
killed."""
import json
import os
import zlib


def compress_round():
    data = os.urandom(1 << 16) * 64
    return len(zlib.decompress(zlib.compress(data, 6)))


def json_round():
    rows = [{str(i): i * i} for i in range(100000)]
    return len(json.loads(json.dumps(rows)))


def sort_key(i):
    return str(i * 7919 % 100003)


def sort_round():
    return sorted(range(200000), key=sort_key)[0]


def main():
    while True:
        compress_round()
        json_round()
        sort_round()


main()
