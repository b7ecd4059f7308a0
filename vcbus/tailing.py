"""`tail -f` for a watch log that is still being written (`vcbus replay --follow FILE`).

`follow_lines` yields the file's complete lines from its start, then waits
for more: at the end of the file it polls (every `interval` seconds) for
appended bytes. A last line without its newline is held until the newline
arrives, so a record being written is never read half-way. If the file
shrinks (truncated, or replaced by a new recording), `on_reset` is told and
reading starts again from its new start. It ends only when the consumer stops
iterating (or on Ctrl-C).
"""

from __future__ import annotations

import os
import time
from typing import Callable, Iterator


def follow_lines(
    path: str, *, interval: float = 0.1, on_reset: Callable[[str], None] | None = None
) -> Iterator[bytes]:
    fh = open(path, "rb")  # closed when the generator is
    try:
        partial = b""
        position = 0
        while True:
            line = fh.readline()
            if line:
                position += len(line)
                if line.endswith(b"\n"):
                    if partial:
                        line, partial = partial + line, b""
                    yield line
                else:
                    partial += line
                continue
            try:
                size = os.stat(path).st_size
            except FileNotFoundError:
                size = position
            if size < position:
                if on_reset is not None:
                    on_reset(f"{path} got shorter (truncated or replaced): reading it again from its start")
                fh.close()
                fh = open(path, "rb")  # reopened: closed by the finally below, as the first
                partial, position = b"", 0
                continue
            time.sleep(interval)
    finally:
        fh.close()
