"""Reading what a child process writes to a pseudo-terminal (the tests of terminal-only output)."""

from __future__ import annotations

import os
import re
import select
import time


def read_until(fd: int, pattern: bytes, got: bytearray, deadline: float = 60.0) -> bytes:
    """Read the pty `fd` into `got` until `pattern` (a regex) matches it; the match."""
    end = time.monotonic() + deadline
    while not (m := re.search(pattern, bytes(got))):
        left = end - time.monotonic()
        assert left > 0, f"no {pattern!r} on the terminal after {deadline:.0f}s: {bytes(got)!r}"
        ready, _, _ = select.select([fd], [], [], min(left, 1.0))
        if ready:
            got += os.read(fd, 65536)
    return m.group(0)


def read_to_end(fd: int, got: bytearray | None = None) -> bytes:
    """Read the pty `fd` (into `got`) until the child closes the terminal; all that was read."""
    got = bytearray() if got is None else got
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        got += chunk
    return bytes(got)
