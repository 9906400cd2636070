"""Drives a program on a pseudo-terminal as a person would: waits for each expected text in
its output (with a timeout), then types the step's line. Prints the whole transcript; exits 0
when every expectation was met and the program exited 0, 1 otherwise (2 on a timeout).

usage: python3 pty_driver.py STEPS_JSON PROGRAM ARGS...
STEPS_JSON: [{"expect": "text", "send": "line" | null, "eof": bool}, ...]
"""

import json
import os
import pty
import select
import sys
import time

TIMEOUT = 60.0


def main() -> int:
    steps = json.loads(sys.argv[1])
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(sys.argv[2], sys.argv[2:])
    seen = b""
    cursor = 0

    def read_some(deadline):
        nonlocal seen
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        ready, _, _ = select.select([fd], [], [], min(left, 0.5))
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                return False
            if not chunk:
                return False
            seen += chunk
        return True

    for step in steps:
        want = step["expect"].encode()
        deadline = time.monotonic() + TIMEOUT
        while seen.find(want, cursor) < 0:
            if not read_some(deadline):
                sys.stdout.write(seen.decode(errors="replace"))
                sys.stdout.write(f"\n[driver] timed out waiting for {step['expect']!r}\n")
                os.kill(pid, 9)
                return 2
        cursor = seen.find(want, cursor) + len(want)
        if step.get("send") is not None:
            os.write(fd, step["send"].encode() + b"\n")
        if step.get("eof"):
            os.write(fd, b"\x04")
    deadline = time.monotonic() + TIMEOUT
    while read_some(deadline):
        pass
    _, status = os.waitpid(pid, 0)
    sys.stdout.write(seen.decode(errors="replace"))
    return 0 if os.waitstatus_to_exitcode(status) == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
