"""`--metrics-addr HOST:PORT`: `/metrics`, `/healthz` and `/readyz` over plain HTTP, and what they report.

- `/metrics`: the Prometheus text format of the process's default registry.
- `/healthz`: the process is alive: its event loop turned within `STALL`
  seconds (`Readiness.beat`). A wedged loop answers 503, so a liveness probe
  restarts it.
- `/readyz`: ready means connected to the bus, leader or standby (not
  starting, not deposed), and, when leading, every service caught up to
  within `max_lag` messages of its stream. The body lists what is not so.

`BusWatch` is the asyncio loop that feeds both: every `period` it asks
JetStream how far behind each service is (durable consumers: `num_pending`
plus unacknowledged; in-memory folds: the stream's last sequence minus their
position), sets the `vcbus_bus_*` gauges and the readiness state, and beats.

The HTTP server runs in a daemon thread (`ThreadingHTTPServer`) and only
reads that state, so a scrape never touches the bus connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from vcbus.errors import UserError
from vcbus.observability import metrics as m

log = logging.getLogger("vcbus.observability")

DEFAULT_ADDR = "127.0.0.1:9464"
STALL = 60.0  # seconds without a loop turn before /healthz fails
ROLES = ("starting", "leader", "standby", "deposed")


@dataclass
class Readiness:
    """The state `/readyz` and `/healthz` report; written by the services' loop, read by the HTTP thread."""

    max_lag: int = 1000
    role: str | None = "leader"  # without leader election a replica leads from the start; None: no role (webhook)
    connected: bool | None = None  # None: no bus in this process (the webhook)
    lag: dict[str, int] = field(default_factory=dict)  # -1: not measured yet
    checks: list[Callable[[], str | None]] = field(default_factory=list)  # extra: a problem, or None
    beat: float = field(default_factory=time.monotonic)
    asynchronous: bool = False  # True once a BusWatch beats: /healthz then watches the loop

    def problems(self) -> list[str]:
        out: list[str] = []
        if self.connected is False:
            out.append("not connected to the bus")
        if self.role is not None and self.role not in ("leader", "standby"):
            out.append(f"role {self.role} (neither leader nor standby)")
        if self.role == "leader":
            for name, n in sorted(self.lag.items()):
                if n < 0:
                    out.append(f"{name}: lag not known yet (its consumer or stream is not readable)")
                elif n > self.max_lag:
                    out.append(f"{name} is {n} messages behind (bound {self.max_lag})")
        for check in self.checks:
            try:
                problem = check()
            except Exception as err:  # a check that cannot run is a problem, not a crash
                problem = f"{getattr(check, '__name__', 'check')}: {err}"
            if problem:
                out.append(problem)
        return out

    def alive(self) -> str | None:
        if self.asynchronous and time.monotonic() - self.beat > STALL:
            return f"event loop stalled for {time.monotonic() - self.beat:.0f}s"
        return None


@dataclass
class Lag:
    """One service's distance to the end of a stream: a durable consumer's, or an in-memory position's."""

    name: str
    stream: str
    durable: str | None = None
    position: Callable[[], int] | None = None


class BusWatch:
    """Polls JetStream for lag and connection state; sets gauges and `Readiness`; beats."""

    def __init__(self, bus: Any, readiness: Readiness, lags: list[Lag], *, period: float = 2.0) -> None:
        self.bus = bus
        self.readiness = readiness
        self.lags = lags  # the services may add theirs later: not ready until each is measured
        self.period = period

    async def run(self, stop: asyncio.Event) -> None:
        self.readiness.asynchronous = True
        while not stop.is_set():
            await self.poll()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), self.period)

    async def poll(self) -> None:
        r = self.readiness
        r.beat = time.monotonic()
        connected = bool(self.bus.nc.is_connected)
        r.connected = connected
        m.BUS_CONNECTED.set(1 if connected else 0)
        if not connected:
            return
        for lag in self.lags:
            try:
                pending, unacked = await self._lag(lag)
            except Exception as err:  # the stream or consumer may not exist yet; the bus may blink
                log.debug("lag of %s: %s", lag.name, err)
                r.lag[lag.name] = -1
                continue
            m.BUS_PENDING.labels(lag.stream, lag.name).set(pending)
            m.BUS_ACK_PENDING.labels(lag.stream, lag.name).set(unacked)
            r.lag[lag.name] = pending + unacked

    async def _lag(self, lag: Lag) -> tuple[int, int]:
        js = self.bus.js
        if lag.durable is not None:
            info = await js.consumer_info(lag.stream, lag.durable)
            return int(info.num_pending or 0), int(info.num_ack_pending or 0)
        stream = await js.stream_info(lag.stream)
        position = lag.position() if lag.position is not None else 0
        return max(0, int(stream.state.last_seq or 0) - position), 0


class _Handler(BaseHTTPRequestHandler):
    server: "ProbeServer"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # stdlib signature
        log.debug("probe %s " + format, self.address_string(), *args)

    def _send(self, status: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # stdlib name
        path = self.path.split("?")[0]
        r = self.server.readiness
        if path == "/metrics":
            self._send(200, generate_latest(REGISTRY), CONTENT_TYPE_LATEST)
        elif path in ("/healthz", "/livez"):
            problem = r.alive()
            self._send(503 if problem else 200, (problem or "ok").encode() + b"\n")
        elif path == "/readyz":
            problems = r.problems()
            body = "\n".join(problems) if problems else f"ok ({r.role})" if r.role else "ok"
            self._send(503 if problems else 200, body.encode() + b"\n")
        else:
            self._send(404, b"not found: /metrics, /healthz, /readyz\n")


class ProbeServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], readiness: Readiness) -> None:
        super().__init__(address, _Handler)
        self.readiness = readiness
        self.thread = threading.Thread(target=self.serve_forever, name="vcbus-probes", daemon=True)

    @property
    def address(self) -> str:
        host, port = self.server_address[:2]
        return f"{host}:{port}"

    def start(self) -> "ProbeServer":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()


def parse_addr(text: str, option: str = "--metrics-addr") -> tuple[str, int] | None:
    """`HOST:PORT` (`:PORT` means all interfaces; `[::1]:PORT` for IPv6); '' means off (None)."""
    if not text:
        return None
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise UserError(f"{option} {text!r}: expected HOST:PORT (e.g. 127.0.0.1:9464, :9464), or '' for none")
    return host.strip("[]") or "0.0.0.0", int(port)


def serve(text: str, readiness: Readiness, *, default: bool = False, option: str = "--metrics-addr") -> ProbeServer | None:
    """Start the probe server on `text`, or return None when it is ''.

    A port taken on the *default* address is a warning (several vcbus on one
    machine); on an address the user chose it is an error.
    """
    addr = parse_addr(text, option)
    if addr is None:
        return None
    try:
        server = ProbeServer(addr, readiness)
    except OSError as err:
        if default:
            log.warning("metrics and probes off: cannot listen on %s (%s); set --metrics-addr", text,
                        err.strerror or err)
            return None
        raise UserError(f"{option} {text}: cannot listen ({err.strerror or err})") from None
    log.info("metrics and probes on http://%s (/metrics /healthz /readyz)", server.address)
    return server.start()
