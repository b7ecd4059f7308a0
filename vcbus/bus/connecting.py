"""Opening the bus: a URL (given, or the embedded server's), a connection, the streams.

`open_bus(settings)` is the one way every service and command gets at NATS.
It turns connection failures into `BusError`s that say which URL failed and
what to do, keeps nats.py's reconnect logging quiet unless asked, and makes
sure the streams and buckets exist before anyone reads or writes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import AsyncIterator

from nats.aio.client import Client
from nats.js import JetStreamContext

from vcbus.bus.errors import BusError
from vcbus.bus.server import embedded
from vcbus.bus.streams import ensure_streams
from vcbus.settings import BusSettings

log = logging.getLogger("vcbus.bus")


class Bus:
    """A connection to the bus: `nc` (core NATS), `js` (JetStream), where it is and how it is set up."""

    def __init__(self, nc: Client, js: JetStreamContext, *, url: str, settings: BusSettings, embedded: bool) -> None:
        self.nc = nc
        self.js = js
        self.url = url
        self.settings = settings
        self.embedded = embedded

    def describe(self) -> str:
        if self.embedded:
            return f"{self.url} (embedded, store {self.settings.data_dir})"
        return self.url


async def _error_cb(err: Exception) -> None:
    log.debug("nats: %s", err)


async def connect(url: str, *, name: str = "vcbus", timeout: float = 5.0) -> Client:
    """A connection that retries forever once established, but fails fast (`timeout`) at first."""
    nc = Client()
    try:
        await asyncio.wait_for(
            nc.connect(
                url,
                name=name,
                connect_timeout=min(2.0, timeout),
                allow_reconnect=True,
                max_reconnect_attempts=1,  # a refused first connection fails now, not after `timeout`
                reconnect_time_wait=0.2,
                error_cb=_error_cb,
            ),
            timeout,
        )
    except Exception as err:  # nats.py raises several unrelated types here
        with contextlib.suppress(Exception):
            await nc.close()
        reason = "no answer" if isinstance(err, asyncio.TimeoutError) else (str(err) or type(err).__name__)
        raise BusError(f"cannot connect to NATS at {url}: {reason}") from err
    # Once connected, never give up: a restarted server is reconnected to, and services go on.
    nc.options["max_reconnect_attempts"] = -1
    nc.options["reconnect_time_wait"] = 0.5
    return nc


@contextlib.asynccontextmanager
async def open_bus(
    settings: BusSettings,
    *,
    own_server: bool = False,
    ensure: bool = True,
    name: str = "vcbus",
) -> AsyncIterator[Bus]:
    """Connect to `settings.nats_url`, or to vcbus's embedded server (started if needed)."""
    with contextlib.ExitStack() as stack:
        if settings.nats_url:
            url, started = settings.nats_url, False
            is_embedded = False
        else:
            url, started = stack.enter_context(
                embedded(
                    data_dir=settings.data_dir,
                    port=settings.port,
                    sync_interval=settings.sync_interval,
                    binary=settings.server_binary,
                    max_payload=settings.max_payload,
                    own=own_server,
                )
            )
            is_embedded = True
        if started:
            log.debug("started nats-server at %s over %s", url, settings.data_dir)
        nc = await connect(url, name=name)
        try:
            js = nc.jetstream(timeout=max(5.0, settings.publish_timeout))
            if ensure:
                try:
                    await ensure_streams(js, settings)
                except BusError:
                    raise
                except Exception as err:
                    raise BusError(f"JetStream at {url} is not usable: {err or type(err).__name__}") from err
            yield Bus(nc, js, url=url, settings=settings, embedded=is_embedded)
        finally:
            with contextlib.suppress(Exception):
                await nc.flush(timeout=2)
            with contextlib.suppress(Exception):
                await nc.close()
