"""VCBUS_K8S to and from JSON lines: `vcbus log export`, `vcbus log import`, `vcbus replay --nats`.

A message body in VCBUS_K8S is one compact watch record, so an export is the
bodies, one per line, in stream order: exactly what `vcbus replay FILE` reads.
Importing such a file into an empty stream gives the same sequence numbers
back (the `seq` that events and commands refer to); `vcbus publish` is the
same path for logs that did not come from the bus.
"""

from __future__ import annotations

import datetime as dt
import pathlib
import tempfile
from typing import BinaryIO

from statemachines.model.timefmt import normalize, parse
from vcbus.bus import subjects as s
from vcbus.bus.connecting import Bus
from vcbus.bus.reading import read_stream
from vcbus.errors import UserError


class Since:
    """Where to start reading: a stream sequence (`42`) or a time (RFC 3339, or `10m`/`2h` ago)."""

    def __init__(self, text: str | None, *, option: str = "--since") -> None:
        self.seq = 1
        self.time: dt.datetime | None = None
        if text is None or text == "":
            return
        t = text.strip()
        if t.isdigit():
            self.seq = max(1, int(t))
            return
        if t[-1:] in ("s", "m", "h", "d") and t[:-1].isdigit():
            seconds = int(t[:-1]) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[t[-1]]
            self.time = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=seconds)
            return
        try:
            self.time = dt.datetime.fromtimestamp(parse(normalize(t)), dt.timezone.utc)
        except ValueError:
            raise UserError(
                f"{option} {text!r}: expected a stream sequence (e.g. 42), an RFC 3339 time "
                "(e.g. 2026-11-30T08:05:00Z) or a duration ago (e.g. 10m, 2h)"
            ) from None


def belongs(headers: dict[str, str] | None, job: str) -> bool:
    """Whether a VCBUS_K8S record is part of `job`'s log (its own records, and cluster-scoped ones)."""
    h = headers or {}
    owner = h.get("Vcbus-Job")
    if owner is not None:
        return owner == s.header_value(job)
    return h.get("Vcbus-Namespace", "") == ""  # queues: every job's log needs them


async def export(bus: Bus, out: BinaryIO, *, job: str | None = None, since: Since | None = None) -> int:
    """Write VCBUS_K8S bodies as JSON lines; return how many."""
    since = since or Since(None)
    n = 0
    async for batch in read_stream(bus.js, s.K8S_STREAM, start_seq=since.seq, start_time=since.time, batch=1024):
        lines = [m.data + b"\n" for m in batch if job is None or belongs(m.headers, job)]
        out.writelines(lines)
        n += len(lines)
    return n


async def spool(bus: Bus) -> BinaryIO:
    """The whole of VCBUS_K8S as a seekable JSON-lines file (in memory up to 64 MB, then on disk)."""
    fh = tempfile.SpooledTemporaryFile(max_size=64 * 1024 * 1024)  # returned open
    await export(bus, fh)  # type: ignore[arg-type]  # SpooledTemporaryFile is a binary file, but typeshed does not type it a BinaryIO
    fh.seek(0)
    return fh  # type: ignore[return-value]  # the same


def open_bus_log(url: str | None, data_dir: pathlib.Path | None = None) -> tuple[BinaryIO, str]:
    """VCBUS_K8S as a JSON-lines file for `vcbus replay --nats` (url None: environment/embedded, in
    `data_dir`'s store)."""
    import asyncio

    from vcbus.bus.connecting import open_bus
    from vcbus.settings import from_flags

    settings = from_flags(url or None, data_dir)  # with the credential flags of the command, if any

    async def _spool() -> tuple[BinaryIO, str]:
        async with open_bus(settings, name="vcbus-replay") as bus:
            return await spool(bus), f"{bus.url}/{s.K8S_STREAM}"

    return asyncio.run(_spool())
