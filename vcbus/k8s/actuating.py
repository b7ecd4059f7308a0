"""The actuator service: VCBUS_CMDS in order, each command applied, then acked.

A durable pull consumer (`vcbus-actuator`, explicit acks) reads the commands
in stream order through an always-open pull request (vcbus.bus.pulling: no
poll interval, no fetch round trip before a command); each is applied by
`vcbus.k8s.actuator.Actuator` in a worker thread (the `kubernetes` client is
synchronous) and acknowledged only afterwards. A crash between apply and ack
redelivers the command, which the actuator applies idempotently.

Failures (vcbus.k8s.apierrors): an API server that is away or busy (connection
errors, 5xx, 429, conflicts that did not settle) is retried with jittered
exponential backoff (tenacity) before anything after it (RecordEvents aside,
below), since commands of one job must happen in order; each wait is logged with the time to the next try.
A 401/403 stops the actuator (and `vcbus up`) with `PermissionDenied` naming
the verb and resource to grant. A command refused for good (another 4xx: 400,
404, 422, a webhook's denial) is logged, counted as `refused`, recorded as a
Warning Event `CommandRefused` on the job, acked, and the next one goes on.
With leader election, `fence` runs before every attempt: a replica that lost
the Lease applies nothing more (vcbus.k8s.leader).

Events do not hold the reaction up. A RecordEvent is applied beside the
commands after it (at most `EVENT_WINDOW` at once) and acked when it is done,
the way Kubernetes' event recorder, which Volcano's controller uses, writes
events asynchronously: a pod failure's DeletePods do not wait for the Event
before them. An event starts once no command came for `EVENT_QUIET` seconds
(or after `EVENT_DEFER` seconds), so it does not share the CPU and the API
server with the reaction. Every other command still waits for the one before.
A crash redelivers whatever was not acked, events included (their names make
them idempotent).

In one process with the decider (`vcbus up` with a cluster), the actuator also
applies commands the moment they are decided, while they are being stored, and
acks their stored copies with the result (vcbus.k8s.ahead; `offer`, `take`);
`ahead=False` (`vcbus up --stored-commands-only`) turns that off.

Commands carry `Nats-Msg-Id` `<K8S seq>:<index>` (the scheduler's
`sched:<seq>:<session>:<index>`); it names Kubernetes Events deterministically,
so a redelivered RecordEvent creates nothing new.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from typing import Any, Awaitable, Callable

import msgspec
import tenacity
from nats.js import api

from statemachines import outputs as o
from vcbus.bus import subjects as s
from vcbus.bus.pulling import Puller
from vcbus.k8s.actuator import Actuator
from vcbus.k8s.ahead import Ahead, index_of
from vcbus.k8s.apierrors import denied, permission_denied, refused, status_of, unreachable_retry
from vcbus.k8s.leader import NotLeader
from vcbus.observability import metrics

log = logging.getLogger("vcbus.actuator")
DURABLE = "vcbus-actuator"
EVENT_WINDOW = 16  # RecordEvents applied in the background at once
MAX_ACK_PENDING = EVENT_WINDOW + 1  # the events in the background and the command in hand
EVENT_DEFER = 2.0  # seconds an event waits at most for the commands behind it (the ack wait is 5 s)
EVENT_QUIET = 0.02  # seconds without a command after which the waiting events go


def _msg_id(msg: Any) -> str:
    return (msg.headers or {}).get("Nats-Msg-Id", "")


class _Stopped(Exception):
    """`stop` was set while a command was being retried: leave it unacked for the next run."""


def _refusal(err: BaseException) -> str:
    body = getattr(err, "body", None) or ""
    try:
        import json

        return str(json.loads(body).get("message", ""))[:600]
    except (ValueError, TypeError, AttributeError):
        return str(getattr(err, "reason", "") or err)[:600]


def _index(msg: Any) -> int:
    return index_of(_msg_id(msg))


class ActuatorService:
    def __init__(
        self, bus: Any, api_client: Any, *, idle: float = 0.25, max_backoff: float = 10.0,
        fence: Callable[[], None] | None = None, ahead: bool = True,
    ) -> None:
        self.bus = bus
        self.actuator = Actuator(api_client)
        self.fence = fence  # raises NotLeader when this replica must not write (vcbus.k8s.leader)
        self.idle = idle
        self.max_backoff = max_backoff
        self.results: dict[str, int] = {"applied": 0, "done": 0, "dropped": 0, "refused": 0, "failed": 0}
        self.ready = asyncio.Event()
        self._events: list[asyncio.Task] = []  # RecordEvents being applied in the background
        self._calm = asyncio.Event()  # set: no command came for a moment (the waiting events may go)
        self._calm.set()
        # commands the decider of this process offers as it stores them (vcbus.k8s.ahead); None: off
        self.ahead: Ahead | None = Ahead(self._start_once, self._idle) if ahead else None
        self._running = False
        self._busy = False  # a command (not an event) in hand
        self._finished = 0  # the VCBUS_CMDS sequence of the last message taken in hand and dealt with

    def offer(self, commands: list, after_seq: int) -> asyncio.Future | None:
        """The decider's hook (`Decider.ahead`): `vcbus.k8s.ahead.Ahead.offer`."""
        return None if self.ahead is None else self.ahead.offer(commands, after_seq)

    def _idle(self, after_seq: int) -> bool:
        return self._running and not self._busy and self._finished >= after_seq

    def _start_once(self, cmd: Any, index: int, msg_id: str) -> Awaitable[str]:
        """One command applied ahead of its store: fenced, started in a worker thread now, no retries
        (the stream path has them)."""
        if self.fence is not None:
            self.fence()
        call = functools.partial(self.actuator.apply, cmd, index=index, msg_id=msg_id)
        return asyncio.get_running_loop().run_in_executor(None, call)

    async def _consumer(self) -> None:
        cfg = api.ConsumerConfig(
            durable_name=DURABLE,
            ack_policy=api.AckPolicy.EXPLICIT,
            deliver_policy=api.DeliverPolicy.ALL,
            max_ack_pending=MAX_ACK_PENDING,
            ack_wait=5.0,  # a command left unacked by a crash comes back after this; applies take far less
            max_deliver=-1,
        )
        try:
            info = await self.bus.js.consumer_info(s.CMDS_STREAM, DURABLE)
        except Exception:
            await self.bus.js.add_consumer(s.CMDS_STREAM, config=cfg)
            return
        if info.config.max_ack_pending != MAX_ACK_PENDING:  # made by an older vcbus (1): updated in place
            await self.bus.js.add_consumer(s.CMDS_STREAM, config=cfg)

    async def run(self, *, stop: asyncio.Event, until_idle: bool = False) -> None:
        await self._consumer()
        # A pull request is always open (vcbus.bus.pulling): the server delivers the next command the
        # moment the one before is acked (or, idle, the moment it is stored), with no fetch round trip
        # or long-poll in between.
        puller = Puller(self.bus.nc, s.CMDS_STREAM, DURABLE, batch=1, expires=5.0, heartbeat=1.0)
        await puller.start()
        self.ready.set()
        self._running = True
        try:
            while not stop.is_set():
                self._reap()
                calm = self._calm.is_set()
                msgs = await puller.take(1, timeout=self.idle if calm else EVENT_QUIET)
                if not msgs:
                    self._calm.set()  # nothing came for a moment: the events waiting go now
                    if not calm:
                        continue
                    if until_idle:
                        await self._drain()
                        return
                    continue
                for msg in msgs:
                    await self._handle(msg, stop)
            self._calm.set()  # stopping: the waiting events try now (and, stopped, stay unacked)
            await self._drain()
        finally:
            self._running = False
            if self.ahead is not None:
                await self.ahead.close()
                log.info("actuator: stopped; %d commands finished, %d of them applied ahead of their store",
                         sum(self.results.values()), self.ahead.taken)
            for task in self._events:
                task.cancel()  # unacked: redelivered to the next run
            await asyncio.gather(*self._events, return_exceptions=True)
            self._events.clear()
            await puller.close()

    def _reap(self) -> None:
        """Forget the background events that are done; raise what one of them could not handle."""
        done = [t for t in self._events if t.done()]
        self._events = [t for t in self._events if not t.done()]
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()

    async def _drain(self) -> None:
        if self._events:
            await asyncio.wait(self._events)
        self._reap()

    async def _handle(self, msg: Any, stop: asyncio.Event) -> None:
        try:
            cmd = o.command_decoder.decode(msg.data)
        except msgspec.DecodeError as err:
            log.warning("actuator: command seq %s is not readable, skipped: %s", msg.metadata.sequence.stream, err)
            await msg.ack()
            self._finished = max(self._finished, msg.metadata.sequence.stream)
            return
        self._calm.clear()
        if isinstance(cmd, o.RecordEvent):
            while len(self._events) >= EVENT_WINDOW:
                self._calm.set()  # a full window: the events go now, whatever waits behind them
                await asyncio.wait(self._events, return_when=asyncio.FIRST_COMPLETED)
                self._reap()
            self._events.append(asyncio.create_task(self._later(cmd, msg, stop)))
        else:
            self._busy = True
            try:
                await self._carry(cmd, msg, stop)
            finally:
                self._busy = False
        self._finished = max(self._finished, msg.metadata.sequence.stream)

    async def _later(self, cmd: Any, msg: Any, stop: asyncio.Event) -> None:
        """A RecordEvent: applied once no command came for EVENT_QUIET seconds (the commands right
        behind it are the reaction, e.g. a failure's DeletePods, and would share the CPU and the API
        server with it), or after EVENT_DEFER seconds at most (well within the ack wait)."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._calm.wait(), EVENT_DEFER)
        await self._carry(cmd, msg, stop)

    async def _carry(self, cmd: Any, msg: Any, stop: asyncio.Event) -> None:
        """Apply `cmd` (retried while the API server is away), then ack it."""
        index = _index(msg)
        began = time.perf_counter()
        done = await self.ahead.take(_msg_id(msg)) if self.ahead is not None else None
        try:
            if done is not None:  # applied ahead of its store (its audit line said so then)
                result = done[0]
            else:
                result = await self._apply(cmd, index, _msg_id(msg), msg, stop)
        except _Stopped:
            return  # not acked: redelivered to the next run
        except Exception as err:
            if denied(err):
                raise permission_denied(err, component="actuator", doing=f"applying {type(cmd).__name__} for {cmd.job}") from None
            if not (refused(err) or isinstance(err, ValueError)):  # ValueError: a command that can never apply
                raise
            result = "refused"
            await self._refused(cmd, index, _msg_id(msg), err)
        self.results[result] = self.results.get(result, 0) + 1
        metrics.command_result(cmd, result)
        if done is None and log.isEnabledFor(logging.DEBUG):  # the audit benchmarks/latency.py times the API call by
            log.debug("actuator: %s %s for %s: %s in %.1f ms", _msg_id(msg), type(cmd).__name__, cmd.job, result,
                      (time.perf_counter() - began) * 1e3)
        await msg.ack_sync()

    async def _apply(self, cmd: Any, index: int, msg_id: str, msg: Any, stop: asyncio.Event) -> str:
        """Apply one command; transient failures retried with jittered backoff (tenacity) until `stop`."""

        async def sleep(seconds: float) -> None:
            await msg.in_progress()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), seconds)

        def retried(err: BaseException) -> bool:  # anything but a final answer: the server is away or busy
            final = denied(err) or refused(err) or isinstance(err, (ValueError, NotLeader, _Stopped))
            if not final:
                self.results["failed"] += 1
                metrics.COMMAND_RETRIES.labels(type(cmd).__name__).inc()
            return not final

        retry = unreachable_retry("actuator", maximum=self.max_backoff, logger=log)
        retry["retry"] = tenacity.retry_if_exception(retried)
        result = "failed"
        async for attempt in tenacity.AsyncRetrying(sleep=sleep, **retry):
            with attempt:
                if stop.is_set():
                    raise _Stopped
                if self.fence is not None:
                    self.fence()  # NotLeader: a deposed leader writes nothing more
                result = await asyncio.to_thread(self.actuator.apply, cmd, index=index, msg_id=msg_id)
        return result

    async def _refused(self, cmd: Any, index: int, msg_id: str, err: BaseException) -> None:
        """A command refused for good: logged, and a Warning Event on the job says which and why."""
        reason = f"{status_of(err)} {_refusal(err)}".strip()
        log.error("actuator: %s for %s refused by the API server (%s); recorded as failed, going on",
                  type(cmd).__name__, cmd.job, reason)
        ns, _, _ = cmd.job.partition("/")
        if ns == s.CLUSTER_SCOPE or isinstance(cmd, o.RecordEvent):
            return
        event = o.RecordEvent(
            job=cmd.job, seq=cmd.seq, time=cmd.time, event_type="Warning", reason="CommandRefused",
            message=f"vcbus could not {type(cmd).__name__} (refused by the API server: {reason})"[:1024],
        )
        try:
            await asyncio.to_thread(self.actuator.apply, event, index=index, msg_id=f"{msg_id or cmd.seq}:refused")
        except Exception as event_err:  # the Event is a courtesy: never block on it
            log.warning("actuator: the CommandRefused event for %s failed too (%s)", cmd.job, event_err)
