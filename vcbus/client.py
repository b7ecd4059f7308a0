"""A small typed client for outside systems: vcbus's events for a job or a namespace.

    import asyncio
    from vcbus.client import subscribe
    from statemachines.outputs import PhaseChanged

    async def main():
        async with subscribe("billing", namespace="default", url="nats://127.0.0.1:4222") as events:
            async for ev in events:
                if isinstance(ev.data, PhaseChanged):
                    print(ev.subject, ev.data.from_phase, "->", ev.data.to_phase)

    asyncio.run(main())

Each subscriber name is a durable JetStream consumer on VCBUS_JOBS: it
remembers what was handled, so a restarted subscriber resumes where it
stopped. Delivery is in stream order, at least once: an event is acknowledged
when the loop asks for the next one (the body of the loop is done with it),
and when the `async with` block ends normally; if the block ends with an
exception, the last event stays unacknowledged and comes again next time.
`ev.id` (`<K8S seq>:<index>`) is unique and stable, for idempotent handlers.

One process per subscriber name at a time: opening a subscription resets the
consumer to its ack floor, so events the previous run received but did not
finish are redelivered at once, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from typing import AsyncIterator

import msgspec
import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext, api
from nats.js.errors import NotFoundError

from statemachines import outputs as o
from vcbus.bus import subjects as s
from vcbus.bus.cloudevents import CloudEvent, from_message
from vcbus.bus.connecting import connect
from vcbus.bus.errors import BusError
from vcbus.bus.streams import ensure_streams
from vcbus.settings import from_environment

__all__ = ["ActionResolved", "CloudEvent", "PhaseChanged", "StatusChanged", "Subscription", "subscribe"]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class Subscription:
    """An async iterator of `CloudEvent`s (`.data` is the typed event) on a durable consumer."""

    def __init__(
        self,
        name: str,
        *,
        url: str | None = None,
        job: str | None = None,
        namespace: str | None = None,
        types: tuple[str, ...] = (),
        commands: bool = False,
        start: str = "all",
        batch: int = 64,
        poll: float = 1.0,
    ) -> None:
        if not _NAME.match(name):
            raise ValueError(f"subscriber name {name!r}: use 1-64 letters, digits, '-' or '_'")
        if job is not None:
            namespace, job_name = s.split_job(job)
        else:
            job_name = None
        if start not in ("all", "new"):
            raise ValueError("start must be 'all' or 'new'")
        self.name = name
        self.url = url
        self.stream = s.CMDS_STREAM if commands else s.JOBS_STREAM
        if commands:
            if types:
                raise ValueError("types filter events; commands have one subject per job")
            self.filters = s.command_filter(namespace=namespace, name=job_name)
        else:
            self.filters = s.event_filter(namespace=namespace, name=job_name, types=tuple(types))
        self.start = start
        self.batch = batch
        self.poll = poll
        self.nc: Client | None = None
        self.js: JetStreamContext | None = None
        self._sub: JetStreamContext.PullSubscription | None = None
        self._buffer: list[Msg] = []
        self._last: Msg | None = None

    async def open(self) -> "Subscription":
        url = self.url or from_environment().nats_url
        if not url:
            raise BusError("no NATS URL: pass url=... or set VCBUS_NATS_URL")
        self.nc = await connect(url, name=f"vcbus-client-{self.name}", auth=from_environment().auth)
        self.js = self.nc.jetstream()
        cfg = api.ConsumerConfig(
            name=self.name,
            durable_name=self.name,
            description="vcbus.client subscriber",
            deliver_policy=api.DeliverPolicy.NEW if self.start == "new" else api.DeliverPolicy.ALL,
            ack_policy=api.AckPolicy.EXPLICIT,
            ack_wait=60,
            max_ack_pending=self.batch * 4,
            max_deliver=-1,
        )
        if len(self.filters) == 1:
            cfg.filter_subject = self.filters[0]
        else:
            cfg.filter_subjects = self.filters
        try:
            await ensure_streams(self.js, from_environment(), update=False)  # subscribing before vcbus runs is fine
            try:
                info = await self.js.consumer_info(self.stream, self.name)
                same = (info.config.filter_subjects or [info.config.filter_subject]) == self.filters
                if not same:
                    await self.js.add_consumer(self.stream, config=cfg)  # a filter change is an update
            except NotFoundError:
                await self.js.add_consumer(self.stream, config=cfg)
            with contextlib.suppress(Exception):  # servers before 2.14: redelivery after AckWait instead
                await self.js.reset_consumer(self.stream, self.name)
            self._sub = await self.js.pull_subscribe_bind(durable=self.name, stream=self.stream)
        except BusError:
            raise
        except Exception as err:
            await self.nc.close()
            raise BusError(f"cannot subscribe {self.name!r} to {self.stream}: {str(err) or type(err).__name__}") from err
        return self

    async def close(self, *, ack_last: bool = True) -> None:
        if self.nc is None:
            return
        try:
            if ack_last and self._last is not None:
                await self._last.ack_sync()
            self._last = None
            with contextlib.suppress(Exception):
                await self.nc.flush(timeout=2)
        finally:
            await self.nc.close()
            self.nc = None

    async def __aenter__(self) -> "Subscription":
        return await self.open()

    async def __aexit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        await self.close(ack_last=exc_type is None or issubclass(exc_type, (GeneratorExit, StopAsyncIteration)))

    def __aiter__(self) -> AsyncIterator[CloudEvent]:
        return self

    async def __anext__(self) -> CloudEvent:
        if self._sub is None:
            raise RuntimeError("subscription not open: use `async with subscribe(...)`")
        if self._last is not None:
            await self._last.ack()
            self._last = None
        while True:
            while not self._buffer:
                try:
                    self._buffer = await self._sub.fetch(self.batch, timeout=self.poll)
                except (nats.errors.TimeoutError, asyncio.TimeoutError):
                    continue
            msg = self._buffer.pop(0)
            try:
                event = from_message(msg.data, msg.headers, msg.metadata.sequence.stream)
            except msgspec.DecodeError:
                await msg.term()  # not an event this client understands; never redeliver
                continue
            self._last = msg
            return event

    async def ack(self) -> None:
        """Acknowledge the current event now (it is also acked when the next is requested)."""
        if self._last is not None:
            await self._last.ack_sync()
            self._last = None

    async def pending(self) -> int:
        """Events stored but not yet delivered to this subscriber."""
        assert self._sub is not None
        info = await self._sub.consumer_info()
        return int(info.num_pending or 0) + len(self._buffer)


def subscribe(
    name: str,
    *,
    url: str | None = None,
    job: str | None = None,
    namespace: str | None = None,
    types: tuple[str, ...] | list[str] = (),
    commands: bool = False,
    start: str = "all",
) -> Subscription:
    """A durable subscription named `name` to the events of `job` ("ns/name") or `namespace` (or all).

    Args:
        name: the durable consumer's name; the same name resumes where it stopped.
        url: the NATS server (default: `VCBUS_NATS_URL`).
        job: only this job's events, `"<namespace>/<name>"`.
        namespace: only events of jobs in this namespace.
        types: only these event types (tags such as `job.phase.changed.v1`, CloudEvents
            types, or prefixes such as `phase.changed`, `timer`).
        commands: read the commands (VCBUS_CMDS) instead of the events.
        start: where a new subscriber starts: `"all"` (the first stored event) or `"new"`.

    Returns:
        A `Subscription`; use it as `async with subscribe(...) as events: async for ev in events: ...`.
    """
    return Subscription(
        name, url=url, job=job, namespace=namespace, types=tuple(types), commands=commands, start=start
    )


# Re-exported for type checks in consumers: `isinstance(ev.data, PhaseChanged)`.
PhaseChanged = o.PhaseChanged
StatusChanged = o.StatusChanged
ActionResolved = o.ActionResolved
