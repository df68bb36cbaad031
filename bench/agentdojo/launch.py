"""Starts `upstream.py` as a fork of a warm zygote (`upstream.py --zygote SOCKET`, which the
harness runs) instead of a fresh interpreter: the proxy runs this script as the upstream's
command, and it hands its stdin, stdout and stderr and its arguments to the zygote, whose
child serves them. It waits for that child and exits as it did; a signal that would end this
process ends the child too. Standard library only, so it starts in milliseconds.

    python -I -S launch.py SOCKET --suite banking --pair PAIR.json --dump ENV.json
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: launch.py SOCKET UPSTREAM-ARGUMENTS...", file=sys.stderr)
        return 2
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(sys.argv[1])
        socket.send_fds(connection, [json.dumps(sys.argv[2:]).encode()], [0, 1, 2])
    except OSError as error:
        print(f"launch.py: cannot reach the upstream zygote at {sys.argv[1]}: {error}", file=sys.stderr)
        return 1
    # The child holds the pipes now; keeping them open here would hide its end from the proxy.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)

    child = None

    def forward(signum, _frame):
        if child is not None:
            try:
                os.kill(child, signum)
            except ProcessLookupError:
                pass
        os._exit(128 + signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)

    reader = connection.makefile("r", encoding="ascii")
    for line in reader:
        word, _, value = line.strip().partition(" ")
        if word == "pid" and value.isdigit():
            child = int(value)
        elif word == "exit":
            try:
                return int(value)
            except ValueError:
                return 1
    # The child died without saying how (killed by a signal).
    return 1


if __name__ == "__main__":
    sys.exit(main())
