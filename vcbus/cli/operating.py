"""The operations flags of the long-running commands, and what they run beside the services.

`operations_options(leader=...)` adds to `vcbus up` / `vcbus scheduler`:

- `--metrics-addr HOST:PORT`: `/metrics`, `/healthz`, `/readyz`
  (vcbus.observability.probes); `vcbus up` defaults to 127.0.0.1:9464, the
  others to none; `''` turns it off.
- `--log-format text|json` (vcbus.observability.logging; the global
  `vcbus --log-format` sets the default).
- `--max-lag N`: how far behind its stream a service may be and still be ready.
- with `leader=True` (`vcbus up`): `--leader-elect`, `--lease-name`,
  `--lease-namespace`, `--lease-duration` (vcbus.k8s.leader).

Like the bus credentials (vcbus.settings), the flags are not passed to the
command's function: they land in the click context and `Operations.current()`
reads them, so adding them changes no signature.

`Operations.running(bus, api_client, stop)` is the async context the command
runs its services in: the probe server, the `BusWatch` loop, and with leader
election the wait as a standby, then the renewals; losing the Lease sets
`stop` and ends the command with an error (exit code 4), so the pod restarts
as a standby.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable

import click

from statemachines.model.timefmt import parse_duration
from vcbus import exitcodes
from vcbus.errors import UserError
from vcbus.observability import logging as vlog
from vcbus.observability import metrics as m
from vcbus.observability.probes import DEFAULT_ADDR, BusWatch, Lag, Readiness, parse_addr, serve

log = logging.getLogger("vcbus")
META = "vcbus.operations"


@dataclass
class Operations:
    metrics_addr: str | None = None  # None: the command's default
    default_addr: str = ""
    log_format: str | None = None
    max_lag: int = 1000
    leader_elect: bool = False
    lease_name: str = "vcbus-controller"
    lease_namespace: str | None = None
    lease_duration: float = 15.0
    readiness: Readiness = field(default_factory=Readiness)
    lags: list[Lag] = field(default_factory=list)
    elector: Any = None
    lost: bool = False

    @classmethod
    def current(cls, default_addr: str = "") -> "Operations":
        ctx = click.get_current_context(silent=True)
        values = dict(ctx.meta.get(META, {})) if ctx is not None else {}
        ops = cls(default_addr=default_addr, **values)
        ops.readiness.max_lag = ops.max_lag
        return ops

    def configure_logging(self, verbosity: int) -> None:
        vlog.configure(verbosity, self.log_format)

    # ------------------------------------------------------------------ leader election

    def elect(self, api_client: Any) -> None:
        """Set up leader election on `api_client`'s cluster (with --leader-elect)."""
        if not self.leader_elect:
            return
        from vcbus.k8s.leader import LeaderElector, lease_namespace

        try:
            self.elector = LeaderElector(
                api_client, namespace=lease_namespace(self.lease_namespace), name=self.lease_name,
                lease_duration=self.lease_duration,
            )
        except ValueError as err:
            raise UserError(f"--lease-duration {self.lease_duration:g}s: {err}") from None

    @property
    def fence(self) -> Callable[[], None] | None:
        return self.elector.check if self.elector is not None else None

    # ------------------------------------------------------------------ services

    def watch(self, *, decider: Any = None, projector: Any = None, scheduler: Any = None, actuator: Any = None,
              queues: Any = None) -> None:
        """Register the running services: their stats for /metrics, their lag for /readyz. `queues`: the
        decider that runs the queue controller (the queue role's with N > 1 partitions)."""
        from vcbus.bus import subjects as s

        m.SERVICES.watch(decider=decider, scheduler=scheduler, projector=projector, queues=queues)
        if decider is not None:
            from vcbus.bus.decider import DURABLE

            consumer = getattr(getattr(decider, "partition", None), "consumer", DURABLE)  # a partition's own
            self.lags.append(Lag("decider", s.K8S_STREAM, durable=consumer))
        if projector is not None:
            self.lags.append(Lag("projector", s.JOBS_STREAM, position=lambda: projector.views.position))
        if scheduler is not None:
            self.lags.append(Lag("scheduler", s.K8S_STREAM, position=lambda: scheduler.cache.position))
        if actuator is not None:
            from vcbus.k8s.actuating import DURABLE as ACTUATOR

            self.lags.append(Lag("actuator", s.CMDS_STREAM, durable=ACTUATOR))
        for lag in self.lags:
            self.readiness.lag.setdefault(lag.name, -1)  # not ready before the first measure

    @contextlib.asynccontextmanager
    async def running(self, bus: Any, stop: asyncio.Event, *, probes: bool = True,
                      reach: Callable[[], Awaitable[bool]] | None = None) -> AsyncIterator[bool]:
        """Probes and bus watch around the services; yields False if `stop` came while waiting as a standby,
        or while `reach` (the API server, vcbus.k8s.reach) was waited for: /readyz says so meanwhile."""
        r = self.readiness
        addr = self.default_addr if self.metrics_addr is None else self.metrics_addr
        server = serve(addr, r, default=self.metrics_addr is None) if probes else None
        watch = BusWatch(bus, r, self.lags)
        watcher = asyncio.create_task(watch.run(stop), name="bus-watch")
        keeper = None
        try:
            if reach is not None:
                waiting = lambda: "the API server is not reached yet"  # noqa: E731 - a /readyz check
                r.checks.append(waiting)
                try:
                    if not await reach():
                        yield False
                        return
                finally:
                    r.checks.remove(waiting)
            if self.elector is not None:
                r.role = "standby"
                m.LEADER.set(0)
                if not await self._acquire(stop):
                    yield False
                    return
                keeper = asyncio.create_task(self._keep(stop), name="leader-lease")
            r.role = "leader"
            m.LEADER.set(1)
            yield True
        finally:
            if keeper is not None:
                keeper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await keeper
            if self.elector is not None and not self.lost:
                await asyncio.to_thread(self.elector.release)
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            if server is not None:
                server.stop()
        if self.lost:
            raise UserError(
                f"lost the leader Lease {self.elector.namespace}/{self.elector.name}: stopped so that the new "
                "leader acts alone; restart to stand by", exit_code=exitcodes.CLUSTER,
            )

    async def _acquire(self, stop: asyncio.Event) -> bool:
        from vcbus.k8s.apierrors import admission_refusal, denied, permission_denied, refused_stop

        try:
            return await self.elector.acquire(stop)
        except Exception as err:
            if denied(err):
                raise permission_denied(err, component="leader election", doing="taking the Lease") from None
            if admission_refusal(err):  # a quota or policy on Leases: no leader without it
                raise refused_stop(err, component="leader election", doing="the Lease") from None
            raise

    async def _keep(self, stop: asyncio.Event) -> None:
        if not await self.elector.keep(stop):
            self.lost = True
            self.readiness.role = "deposed"
            stop.set()


def _store(name: str, convert: Callable[[Any], Any] = lambda v: v) -> Callable:
    """A click callback keeping a given value in the context (`Operations.current()` reads it)."""

    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
        if value is not None:
            ctx.meta.setdefault(META, {})[name] = convert(value)
        return value

    return callback


def _addr(value: str) -> str:
    parse_addr(value)  # a bad address is an error before anything starts
    return value


def _lease_duration(value: str) -> float:
    try:
        seconds = parse_duration(value)
    except ValueError:
        raise UserError(f"--lease-duration {value!r}: expected a duration such as 15s") from None
    if seconds < 1:
        raise UserError("--lease-duration must be at least 1s")
    return seconds


def operations_options(*, default_addr: str = "", leader: bool = False, bus: bool = True) -> Callable:
    def decorate(fn: Callable) -> Callable:
        opts = [
            click.option(
                "--metrics-addr", metavar="HOST:PORT", expose_value=False, callback=_store("metrics_addr", _addr),
                help=f"Serve /metrics, /healthz and /readyz here ('' for none) [default: {default_addr or 'none'}].",
            ),
            click.option(
                "--log-format", type=click.Choice(vlog.FORMATS), expose_value=False, callback=_store("log_format"),
                help="Log lines as text or JSON objects [default: text, or $VCBUS_LOG_FORMAT].",
            ),
        ]
        if bus:
            opts.append(click.option(
                "--max-lag", type=click.IntRange(0), expose_value=False, callback=_store("max_lag"),
                help="Messages a service may be behind its stream and still be ready (/readyz) [default: 1000].",
            ))
        if leader:
            opts += [
                click.option(
                    "--leader-elect", is_flag=True, default=False, expose_value=False, callback=_store("leader_elect"),
                    help="Run the services only while holding a coordination.k8s.io Lease (replicas > 1).",
                ),
                click.option(
                    "--lease-name", metavar="NAME", expose_value=False, callback=_store("lease_name"),
                    help="The Lease's name [default: vcbus-controller].",
                ),
                click.option(
                    "--lease-namespace", metavar="NS", expose_value=False, callback=_store("lease_namespace"),
                    help="The Lease's namespace [default: the pod's own, else default].",
                ),
                click.option(
                    "--lease-duration", metavar="DURATION", expose_value=False,
                    callback=_store("lease_duration", _lease_duration),
                    help="How long a standby waits for a silent leader before taking over [default: 15s].",
                ),
            ]
        for opt in reversed(opts):
            fn = opt(fn)
        return fn

    return decorate


__all__ = ["Operations", "operations_options", "DEFAULT_ADDR"]
