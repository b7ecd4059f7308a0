"""Opening the bus: a URL (given, or the embedded server's), a connection, the streams.

`open_bus(settings)` is the one way every service and command gets at NATS.
It turns connection failures into `BusError`s that say which URL failed and
what to do, keeps nats.py's reconnect logging quiet unless asked, and makes
sure the streams and buckets exist before anyone reads or writes them.

Credentials and TLS (`settings.auth`) go through vcbus.bus.auth. No URL or
error text leaves this module unredacted: `Bus.url` and `describe()` mask the
password of a `user:pass@` URL, and so does every `BusError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from typing import AsyncIterator

from nats.js import JetStreamContext

from vcbus.bus.auth import connect_options, redact, service_auth, urls_of
from vcbus.bus.cluster import default_replicas
from vcbus.bus.errors import BusError
from vcbus.bus.natsclient import Client
from vcbus.bus.server import embedded
from vcbus.bus.streams import ensure_streams
from vcbus.settings import BusSettings, NatsAuth

log = logging.getLogger("vcbus.bus")
_TOKEN = re.compile(r"[A-Za-z0-9_-]+")  # a user name that can be a subject token


class Bus:
    """A connection to the bus: `nc` (core NATS), `js` (JetStream), where it is and how it is set up."""

    def __init__(self, nc: Client, js: JetStreamContext, *, url: str, settings: BusSettings, embedded: bool) -> None:
        self.nc = nc
        self.js = js
        self.url = redact(url)  # for messages: the password never leaves connecting
        self._url = url  # to dial (service_buses)
        self.settings = settings
        self.embedded = embedded

    def describe(self) -> str:
        if self.embedded:
            return f"{self.url} (embedded, store {self.settings.data_dir})"
        return self.url


async def _error_cb(err: Exception) -> None:
    log.debug("nats: %s", redact(str(err)))


def _reason(err: BaseException, seen: list[BaseException]) -> str:
    """Why a first connection failed: the last specific error nats.py reported to `error_cb` (an
    authorization violation, a TLS handshake failure), else its own error, else "no answer"."""
    import nats.errors

    import ssl

    for earlier in seen:  # the server said no, or TLS failed: that explains what follows (resets...)
        text = str(earlier)
        if isinstance(earlier, (nats.errors.AuthorizationError, ssl.SSLError)) or "authoriz" in text.lower():
            return text or type(earlier).__name__
    generic = (asyncio.TimeoutError, nats.errors.NoServersError)
    for earlier in reversed(seen):  # what went wrong with the server(s), not that none is left
        if not isinstance(earlier, generic) and str(earlier):
            return str(earlier)
    if not isinstance(err, asyncio.TimeoutError):
        return str(err) or type(err).__name__
    return "no answer"


async def connect(url: str, *, name: str = "vcbus", timeout: float = 5.0, auth: NatsAuth | None = None) -> Client:
    """A connection that retries forever once established, but fails fast (`timeout`) at first.

    `url` may list several servers separated by commas; `auth` holds credentials and TLS."""
    auth = auth or NatsAuth()
    servers = urls_of(url)
    options = connect_options(auth, servers)
    seen: list[BaseException] = []

    async def first_errors(err: Exception) -> None:
        seen.append(err)
        await _error_cb(err)

    nc = Client()  # nats-py's, parsing and publishing cheaper (vcbus.bus.natsclient)
    try:
        await asyncio.wait_for(
            nc.connect(
                servers,
                name=name,
                connect_timeout=min(2.0, timeout),
                allow_reconnect=True,
                max_reconnect_attempts=1,  # a refused first connection fails now, not after `timeout`
                reconnect_time_wait=0.2,
                error_cb=first_errors,
                # a named user gets its own inbox, so that NATS permissions can give each user only
                # its own replies (deploy/: subscribe `_INBOX.<user>.>`)
                inbox_prefix=f"_INBOX.{auth.user}" if auth.user and _TOKEN.fullmatch(auth.user) else "_INBOX",
                **options,
            ),
            timeout,
        )
    except Exception as err:  # nats.py raises several unrelated types here
        with contextlib.suppress(Exception):
            await nc.close()
        reason = redact(_reason(err, seen), auth.password)
        raise BusError(f"cannot connect to NATS at {redact(url)}: {reason}{_hint(reason, auth)}") from err
    # Once connected, never give up: a restarted server is reconnected to, and services go on.
    nc.options["max_reconnect_attempts"] = -1
    nc.options["reconnect_time_wait"] = 0.5
    nc._error_cb = _error_cb  # from now on only logged (nats.py reads this attribute)
    return nc


def _hint(reason: str, auth: NatsAuth) -> str:
    low = reason.lower()
    if "authorization" in low or "authentication" in low:
        return " (check --creds / --nkey / --user and --password)" if auth else " (the server wants credentials: --creds, --nkey or --user/--password)"
    if "certificate" in low or "ssl" in low or "tls" in low:
        return " (check --tlsca / --tlscert / --tlskey)"
    return ""


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
                    servers=settings.nats_servers,
                )
            )
            is_embedded = True
        if started:
            log.debug("started nats-server at %s over %s", url, settings.data_dir)
        nc = await connect(url, name=name, auth=settings.auth if not is_embedded else None)
        try:
            js = nc.jetstream(timeout=max(5.0, settings.publish_timeout))
            if ensure:
                try:
                    await ensure_streams(js, settings, replicas=default_replicas(nc, settings, url))
                except BusError:
                    raise
                except Exception as err:
                    raise BusError(
                        f"JetStream at {redact(url)} is not usable: {redact(str(err)) or type(err).__name__}"
                    ) from err
            yield Bus(nc, js, url=url, settings=settings, embedded=is_embedded)
        finally:
            with contextlib.suppress(Exception):
                await nc.flush(timeout=2)
            with contextlib.suppress(Exception):
                await nc.close()


@contextlib.asynccontextmanager
async def service_buses(bus: Bus, services: tuple[str, ...] | list[str]) -> AsyncIterator[dict[str, Bus]]:
    """A `Bus` per service: its own connection when `settings.service_credentials` names an identity
    for it (so it can do only what that NATS user may), else `bus` itself."""
    directory = bus.settings.service_credentials
    buses: dict[str, Bus] = {}
    opened: list[Client] = []
    try:
        for service in services:
            auth = service_auth(directory, service, bus.settings.auth) if directory and not bus.embedded else None
            if auth is None:
                buses[service] = bus
                continue
            nc = await connect(bus._url, name=f"vcbus-{service}", auth=auth)
            opened.append(nc)
            js = nc.jetstream(timeout=max(5.0, bus.settings.publish_timeout))
            buses[service] = Bus(nc, js, url=bus._url, settings=bus.settings, embedded=bus.embedded)
            log.debug("%s connects to NATS as its own user", service)
        yield buses
    finally:
        for nc in opened:
            with contextlib.suppress(Exception):
                await nc.flush(timeout=2)
            with contextlib.suppress(Exception):
                await nc.close()
