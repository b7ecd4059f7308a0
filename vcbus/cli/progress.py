"""A progress line on standard error while a long replay reads and decides its input (a terminal only).

`vcbus replay` of a large log takes seconds before its report: on a terminal it shows, from one
second in and four times a second, the record it has reached, how much of its input files it has
read and for how long it has run, on one line redrawn in place and cleared before anything else is
printed (a warning in between clears it first). Not on a pipe or a file, and not while following a
live log (its rows are the progress there).
"""

from __future__ import annotations

import os
import stat
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

CLEAR = "\r\x1b[K"
AFTER = 1.0  # seconds before the first line: a short replay shows none
EVERY = 0.25  # seconds between redraws


def _regular_fd(stream: Any) -> int | None:
    """The descriptor of a stream that reads a regular file (a size to measure against), else None."""
    try:
        fd = stream.fileno()
        return fd if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except (AttributeError, OSError, ValueError):
        return None


class ReplayProgress:
    """The line for one replay: `on_record` is the replay's per-record hook, `stop` clears the line."""

    def __init__(self, streams: list[tuple[Any, str]], out: TextIO) -> None:
        self.out = out
        self.source = ", ".join(name for _, name in streams)
        fds = [fd for fd in (_regular_fd(s) for s, _ in streams) if fd is not None]
        self.files = [(fd, os.fstat(fd).st_size) for fd in fds]
        self.seq = 0
        self.started = time.monotonic()
        self.shown = False
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="replay-progress", daemon=True)

    def start(self) -> ReplayProgress:
        """Draw from `AFTER` seconds on, until `stop`."""
        self.started = time.monotonic()
        self.thread.start()
        return self

    @classmethod
    def on_terminal(cls, streams: list[tuple[Any, str]], out: TextIO | None = None) -> ReplayProgress | None:
        """A progress line when `out` (standard error) is a terminal, else None."""
        out = out or sys.stderr
        isatty = getattr(out, "isatty", None)
        return cls(streams, out).start() if isatty is not None and isatty() else None

    def on_record(self, seq: int, _outputs: list) -> None:
        self.seq = seq

    def line(self) -> str:
        parts = [f"record {self.seq:,}"]
        if self.files:
            read = total = 0
            for fd, size in self.files:
                try:
                    read += min(os.lseek(fd, 0, os.SEEK_CUR), size)
                except OSError:  # closed under us: the replay is over
                    read += size
                total += size
            share = f" ({100 * read // total}%)" if total else ""
            parts.append(f"{read / 1e6:.1f} of {total / 1e6:.1f} MB read{share}")
        parts.append(f"{time.monotonic() - self.started:.0f}s")
        return f"replaying {self.source}: " + ", ".join(parts)

    def _run(self) -> None:
        if self.done.wait(AFTER):
            return
        while True:
            with self.lock:
                if self.done.is_set():
                    return
                self.out.write(CLEAR + self.line())
                self.out.flush()
                self.shown = True
            if self.done.wait(EVERY):
                return

    def _clear(self) -> None:
        if self.shown:
            self.out.write(CLEAR)
            self.out.flush()
            self.shown = False

    def interjecting(self, say: Callable[[str], None]) -> Callable[[str], None]:
        """`say` with the line cleared first (it is drawn again at the next redraw)."""

        def said(message: str) -> None:
            with self.lock:
                self._clear()
                say(message)

        return said

    def stop(self) -> None:
        """No more redraws; the line cleared."""
        with self.lock:
            self.done.set()
            self._clear()
        if self.thread.is_alive():
            self.thread.join()
