"""The actuator service: VCBUS_CMDS applied concurrently, in each object's order, each acked once applied.

A durable pull consumer (`vcbus-actuator`, explicit acks) reads the commands
in stream order through always-open pull requests (vcbus.bus.pulling). Each
command is admitted into its job's lane (vcbus.k8s.lanes): commands of one
job on different pods are applied side by side, a job-wide command (a status
write, the PodGroup, a plugin hook) after everything before it in its lane,
and different jobs' commands independently; at most `concurrency` API
commands are in flight at once (`vcbus up --actuator-concurrency`), each in a
worker thread of the actuator's own (the `kubernetes` client is synchronous),
on a keep-alive connection of its thread (vcbus.k8s.rawcalls). Up to `window`
commands are in the actuator's hands (the consumer's max_ack_pending). A
command is acknowledged only after it is applied; those waiting their turn are
kept alive (`in_progress`) so the server does not deliver them again meanwhile.

Superseded writes. A status write (the vcjob's, a PodGroup's, a queue's) still
waiting when a later write of the same object arrives is not sent: it is acked
as `superseded` (counted in `vcbus_commands_total{result="superseded"}`). One
older than a write already applied to the same object (a redelivery after a
crash) is superseded too. The bus keeps every decision; only API calls shrink.

Crash safety is unchanged: a crash redelivers whatever was not acked, and every
command is idempotent (vcbus.k8s.actuator: uid preconditions, AlreadyExists and
NotFound as done, status versions), so a redelivered command that a later one
of its lane already overtook does nothing harmful.

Failures (vcbus.k8s.apierrors): an API server that is away or busy (connection
errors, 5xx, 429, conflicts that did not settle) is retried with jittered
exponential backoff (tenacity); the commands behind it in its lane wait, other
lanes go on. A 401, or a 403 of RBAC ("User ... cannot <verb>
resource ..."), stops the actuator (and `vcbus up`) with `PermissionDenied`
naming the verb and resource to grant. A command refused for good (another
4xx: 400, 404, 422, a webhook's denial, a 403 of admission: a ResourceQuota
exceeded, a PodSecurity violation) is logged, counted as `refused`, appended to
VCBUS_K8S as a REFUSED record (`vcbus.k8s.refusal.<ns>.<name>`, msg id
`refused:<the command's msg id>`; the decider folds it: a refused CreatePod is
created again at the job's next sync, with the `FailedCreate` Event on the job,
statemachines/intake/refusals.py), recorded as a Warning Event `CommandRefused`
on the job (any command but CreatePod), acked, and its lane goes on. The
command is acked only once its REFUSED record is stored: a bus that cannot
store it stops the run, and the command comes again to the next one. With leader election, `fence` runs before every attempt: a
replica that lost the Lease applies nothing more (vcbus.k8s.leader).

Events do not hold the reaction up. A RecordEvent is taken as Kubernetes'
event recorder, which Volcano's controller and scheduler use, takes an event
(client-go's `record.NewBroadcaster`): acked as soon as it is received, so
events never fill the consumer's window ahead of the commands behind them (a
gang's binds bring one `Scheduled` event each); written in the background, one
at a time for each source component (`component`: vc-scheduler,
vc-controller-manager...), as each of Volcano's components has one recorder
whose sink writes its events one after another, beside the command slots
rather than in them; at most `EVENT_QUEUE` (1,000, the broadcaster's queue)
waiting for each component, the rest dropped and counted (`result="dropped"`);
and, like the recorder's queue, lost when the process stops or dies before
writing them. The bus keeps every RecordEvent: a subscriber misses none. So a
burst of events (a gang's binds, a restart) trails the pods' own writes as
Volcano's does, rather than taking the API server's time from them.

In one process with the decider (`vcbus up` with a cluster), the actuator also
takes commands the moment they are decided, while they are being stored
(vcbus.k8s.ahead; `offer`): they enter their lanes at once and their stored
copies, when they arrive, are acked with the result. `ahead=False` (`vcbus up
--stored-commands-only`) turns that off.

Commands carry `Nats-Msg-Id` `<K8S seq>:<index>` (the scheduler's
`sched:<seq>:<session>:<index>`); it names Kubernetes Events deterministically,
so a redelivered RecordEvent creates nothing new, and it matches a stored copy
to a command offered ahead of its store.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import functools
import json
import logging
import time
from typing import Any

import msgspec
import tenacity
from nats.js import api

from statemachines import outputs as o
from vcbus import retries
from vcbus.bus import direct
from vcbus.bus import subjects as s
from vcbus.bus.publisher import Publisher, refusal_message
from vcbus.bus.pulling import Puller
from vcbus.bus.reading import stream_seq
from vcbus.k8s.actuator import Actuator
from vcbus.k8s.ahead import Ahead, index_of
from vcbus.k8s.apierrors import denied, permission_denied, refused, status_of, status_reason, unreachable_retry
from vcbus.k8s.bridge import observed_now
from vcbus.k8s.event_recording import COMPONENT as DEFAULT_SOURCE
from vcbus.k8s.lanes import DONE, RUNNING, Item, Lanes, status_object
from vcbus.k8s.leader import NotLeader
from vcbus.observability import metrics

log = logging.getLogger("vcbus.actuator")
DURABLE = "vcbus-actuator"
DEFAULT_CONCURRENCY = 32  # API commands in flight at once (`--actuator-concurrency`)
WINDOW_PER_SLOT = 32  # commands in hand per slot: the consumer's max_ack_pending is concurrency x this
RECORDERS = 4  # source components whose events are written at once, one event each (threads beside the commands')
EVENT_QUEUE = 1000  # RecordEvents waiting per component at most; more are dropped (client-go's maxQueuedEvents)
ACK_WAIT = 10.0  # seconds; a command left unacked by a crash comes back after this
KEEP_ALIVE = 4.0  # seconds between `in_progress` for the commands still waiting their turn
HELD = 4096  # commands applied ahead whose stored copy has not come yet (more: the oldest are forgotten)
RESULTS = ("applied", "done", "dropped", "refused", "superseded", "failed")


def window_for(concurrency: int) -> int:
    """The commands in the actuator's hands (max_ack_pending) for `concurrency` in flight."""
    return max(64, concurrency * WINDOW_PER_SLOT)


def _msg_id(msg: Any) -> str:
    return (msg.headers or {}).get("Nats-Msg-Id", "")


class _Stopped(Exception):
    """`stop` was set while a command was being retried: leave it unacked for the next run."""


def _refusal(err: BaseException) -> str:
    body = getattr(err, "body", None) or ""
    try:
        return str(json.loads(body).get("message", ""))[:600]
    except (ValueError, TypeError, AttributeError):
        return str(getattr(err, "reason", "") or err)[:600]


class ActuatorService:
    def __init__(
        self, bus: Any, api_client: Any, *, idle: float = 0.25, max_backoff: float = 10.0,
        fence: Any = None, ahead: bool = True, concurrency: int = DEFAULT_CONCURRENCY, cache: Any = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"actuator concurrency must be at least 1, not {concurrency}")
        self.bus = bus
        self.actuator = Actuator(api_client, cache)  # cache: the bridge's watches (vcbus.k8s.watchcache), or None
        self.fence = fence  # raises NotLeader when this replica must not write (vcbus.k8s.leader)
        self.idle = idle
        self.max_backoff = max_backoff
        self.concurrency = concurrency
        self.window = window_for(concurrency)
        self.results: dict[str, int] = dict.fromkeys(RESULTS, 0)
        self.ready = asyncio.Event()
        # commands the decider of this process offers as it stores them (vcbus.k8s.ahead); None: off
        self.ahead: Ahead | None = Ahead(self._admit_offered, self._caught_up, self.started) if ahead else None
        self.peak_waiting = 0  # the most commands in hand at once (admitted, not finished)
        self._lanes = Lanes()
        self._held: collections.OrderedDict[str, Item] = collections.OrderedDict()  # by msg id, not acked yet
        self._ready: collections.deque[Item] = collections.deque()  # ready commands, in the order they became so
        self._events: dict[str, collections.deque[Item]] = {}  # RecordEvents waiting, by source component
        self._tasks: set[asyncio.Task] = set()
        self._busy = 0  # commands being applied
        self._recording: set[str] = set()  # the components whose event is being written
        self._applied_at: dict[tuple, int] = {}  # a status object -> the VCBUS_CMDS seq of its last applied write
        self._failure: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self._puller: Puller | None = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._running = False
        self._halted = False  # the run is over (stopped, or failed): retries end, nothing new starts
        self._received = 0  # the highest VCBUS_CMDS sequence taken in hand (or acked before this run)
        self._refusals: Publisher | None = None  # REFUSED records to VCBUS_K8S

    # ------------------------------------------------------------------ the decider's side (vcbus.k8s.ahead)

    def offer(self, commands: list, after_seq: int) -> asyncio.Future | None:
        """The decider's hook (`Decider.ahead`): `vcbus.k8s.ahead.Ahead.offer`."""
        return None if self.ahead is None else self.ahead.offer(commands, after_seq)

    def _caught_up(self, after_seq: int) -> bool:
        """Whether every command stored up to `after_seq` is in hand (or done): an offer then goes after them."""
        return (self._running and not self._halted and self._stop is not None and not self._stop.is_set()
                and self._received >= after_seq)

    def _admit_offered(self, cmd: Any, index: int, msg_id: str) -> asyncio.Future:
        if self.fence is not None:
            self.fence()  # NotLeader: the offer is refused, the stream path says so
        item = Item(cmd, msg_id, index)
        self._admit(item)
        return item.done

    def started(self, fut: asyncio.Future) -> bool:
        """Whether the offered command behind `fut` is being applied already (not waiting its turn)."""
        return any(item.done is fut and item.state == RUNNING for item in reversed(self._held.values()))

    # ------------------------------------------------------------------ the loop

    async def _consumer(self) -> None:
        cfg = api.ConsumerConfig(
            durable_name=DURABLE,
            ack_policy=api.AckPolicy.EXPLICIT,
            deliver_policy=api.DeliverPolicy.ALL,
            max_ack_pending=self.window,
            ack_wait=ACK_WAIT,  # the commands waiting their turn are kept alive (KEEP_ALIVE)
            max_deliver=-1,
        )
        try:
            info = await self.bus.js.consumer_info(s.CMDS_STREAM, DURABLE)
        except Exception:
            await self.bus.js.add_consumer(s.CMDS_STREAM, config=cfg)
            return
        if info.config.max_ack_pending != self.window or (info.config.ack_wait or 0) != ACK_WAIT:
            await self.bus.js.add_consumer(s.CMDS_STREAM, config=cfg)  # another setting (or an older vcbus): updated
        if not info.num_ack_pending:
            self._received = info.ack_floor.stream_seq if info.ack_floor else 0  # everything before is done

    async def run(self, *, stop: asyncio.Event, until_idle: bool = False) -> None:
        self._stop = stop
        self._halted = False
        await self._consumer()
        batch = min(256, self.window)
        puller = self._puller = Puller(self.bus.nc, s.CMDS_STREAM, DURABLE, batch=batch, expires=5.0, heartbeat=1.0)
        await puller.start()
        self._pool = concurrent.futures.ThreadPoolExecutor(self.concurrency + RECORDERS, thread_name_prefix="actuator")
        self.ready.set()
        self._running = True
        kept = time.monotonic()
        try:
            while not stop.is_set():
                self._raise_failure()
                msgs = await puller.take(batch, timeout=self.idle)
                self._raise_failure()
                for msg in msgs:
                    self._receive(msg)
                if time.monotonic() - kept > KEEP_ALIVE:
                    kept = time.monotonic()
                    await self._keep_alive()
                if until_idle and not msgs and not self._in_hand():
                    return
        finally:
            self._running = False
            if self.ahead is not None:
                self.ahead.close()
            self._ready.clear()
            self._events.clear()
            self._halted = True  # the applies under way end (their retries stop); their threads cannot be cancelled
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
            for item in self._held.values():
                if item.done is not None and not item.done.done():
                    item.done.set_result(None)
            cache = self.actuator.cache
            log.info("actuator: stopped; %d commands finished (%s), %d applied ahead of their store, %d in hand at "
                     "most%s", sum(self.results[k] for k in RESULTS if k != "failed"),
                     ", ".join(f"{k} {v}" for k, v in self.results.items() if v), self.ahead.taken if self.ahead else 0,
                     self.peak_waiting, "" if cache is None else f"; watch cache {cache.hits} hits, {cache.misses} misses")
            self._pool.shutdown(wait=False)
            await puller.close()

    def _in_hand(self) -> bool:
        """Whether a command is still to be applied or acked (done offers waiting for their copies aside)."""
        return bool(self._tasks or any(self._events.values())) or any(item.state != DONE for item in self._held.values())

    def _raise_failure(self) -> None:
        if self._failure is not None:
            err, self._failure = self._failure, None
            raise err

    def _fail(self, err: BaseException) -> None:
        if self._failure is None:
            self._failure = err
        if self._puller is not None:
            self._puller.poke()

    async def _keep_alive(self) -> None:
        """`in_progress` for the stored copies still waiting or being applied that were received, or last
        kept alive, KEEP_ALIVE / 2 ago or more (else redelivered after ACK_WAIT); most commands are done
        before their first."""
        now = time.monotonic()
        for item in list(self._held.values()):
            if item.state != DONE and item.msgs and now - item.kept >= KEEP_ALIVE / 2:
                item.kept = now
                for msg in item.msgs:
                    with contextlib.suppress(Exception):
                        await msg.in_progress()

    # ------------------------------------------------------------------ admission

    def _receive(self, msg: Any) -> None:
        seq = stream_seq(msg)
        self._received = max(self._received, seq)
        try:
            cmd = o.command_decoder.decode(msg.data)
        except msgspec.DecodeError as err:
            log.warning("actuator: command seq %s is not readable, skipped: %s", seq, err)
            self._spawn(self._ack([msg]))
            return
        msg_id = _msg_id(msg) or f"seq:{seq}"
        if cmd.__class__ is o.RecordEvent:
            self._receive_event(cmd, msg, msg_id, seq)
            return
        item = self._held.get(msg_id)
        if item is not None:  # offered ahead of its store, or a redelivery of one in hand
            if item.stream_seq == 0 and self.ahead is not None:
                self.ahead.taken += 1
                metrics.COMMANDS_AHEAD.inc()
            item.stream_seq = item.stream_seq or seq
            if item.state == DONE:
                self._note_applied(item)
                del self._held[msg_id]
                self._spawn(self._ack([msg]))
            else:
                item.msgs.append(msg)
                item.kept = time.monotonic()
            return
        key = status_object(cmd)
        if key is not None and self._applied_at.get(key, 0) > seq:  # a later write of it is applied already
            self._count(cmd, "superseded")
            self._spawn(self._ack([msg]))
            return
        item = Item(cmd, msg_id, index_of(msg_id), seq)
        item.msgs.append(msg)
        item.kept = time.monotonic()
        self._admit(item)

    def _receive_event(self, cmd: o.RecordEvent, msg: Any, msg_id: str, seq: int) -> None:
        """A RecordEvent, as Kubernetes' event recorder takes one: acked at once, written in the background,
        at most `EVENT_QUEUE` waiting (more are dropped, counted), lost if the process stops or dies first."""
        self._spawn(self._ack([msg]))
        offered = self._held.pop(msg_id, None)
        if offered is not None:  # offered ahead of its store: written already, or on its way
            if offered.stream_seq == 0 and self.ahead is not None:
                self.ahead.taken += 1
                metrics.COMMANDS_AHEAD.inc()
            return
        source = cmd.component or DEFAULT_SOURCE
        if len(self._events.get(source, ())) + (source in self._recording) >= EVENT_QUEUE:
            self._count(cmd, "dropped")
            return
        item = Item(cmd, msg_id, index_of(msg_id), seq)
        item.done = asyncio.get_running_loop().create_future()
        self._queue(self._lanes.admit(item)[0])  # no lane: ready at once

    def _admit(self, item: Item) -> None:
        item.admitted = time.perf_counter()
        item.done = asyncio.get_running_loop().create_future()
        self._held[item.msg_id] = item
        ready, superseded = self._lanes.admit(item)
        for old in superseded:
            self._finish(old, "superseded")
            if old.msgs:
                self._spawn(self._ack(old.msgs))
        self.peak_waiting = max(self.peak_waiting, len(self._held))
        metrics.ACTUATOR_IN_HAND.set(len(self._held))
        self._queue(ready)
        self._forget_offers()

    def _forget_offers(self) -> None:
        """Done offers whose stored copy never came (a store that failed for good) are forgotten, oldest first."""
        while len(self._held) > self.window + HELD:
            msg_id, oldest = next(iter(self._held.items()))
            if oldest.state != DONE:
                break
            del self._held[msg_id]

    def _queue(self, items: list[Item]) -> None:
        for item in items:
            if item.lane is None:  # a RecordEvent: its component's recorder writes it
                self._events.setdefault(item.cmd.component or DEFAULT_SOURCE, collections.deque()).append(item)
            else:
                self._ready.append(item)
        self._dispatch()

    def _dispatch(self) -> None:
        if not self._running or self._halted or (self._stop is not None and self._stop.is_set()):
            return
        if len(self._recording) < RECORDERS:
            for source, waiting in self._events.items():
                if waiting and source not in self._recording and len(self._recording) < RECORDERS:
                    item = waiting.popleft()
                    self._lanes.start(item)
                    self._recording.add(source)
                    self._spawn(self._work(item))
        while self._busy < self.concurrency and self._ready:
            item = self._ready.popleft()
            if not self._lanes.start(item):
                continue  # superseded while it waited
            self._busy += 1
            self._spawn(self._work(item))
        metrics.ACTUATOR_IN_FLIGHT.set(self._busy)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ------------------------------------------------------------------ one command

    async def _work(self, item: Item) -> None:
        cmd = item.cmd
        began = time.perf_counter()
        try:
            try:
                result = await self._apply(item)
            except _Stopped:
                return  # not acked: redelivered to the next run
            except Exception as err:
                if denied(err):
                    self._fail(permission_denied(err, component="actuator",
                                                 doing=f"applying {type(cmd).__name__} for {cmd.job}"))
                    return
                if not (refused(err) or isinstance(err, ValueError)):  # ValueError: a command that can never apply
                    self._fail(err)
                    return
                result = "refused"
                try:
                    await self._refused(cmd, item.index, item.msg_id, err)
                except Exception as bus_err:  # its REFUSED record not stored: not acked, stop
                    self._fail(bus_err)
                    return
        finally:
            if item.lane is None:
                self._recording.discard(cmd.component or DEFAULT_SOURCE)
            else:
                self._busy -= 1
        took = (time.perf_counter() - began) * 1e3
        if log.isEnabledFor(logging.DEBUG):  # the audit benchmarks/latency.py times the API call by
            waited = (began - item.admitted) * 1e3 if item.admitted else 0.0
            log.debug("actuator: %s %s for %s: %s in %.1f ms (waited %.1f ms)", item.msg_id, type(cmd).__name__,
                      cmd.job, result, took, waited)
        try:
            if item.msgs:
                await self._ack(item.msgs)
        except Exception as err:  # the bus went away: stop, the next run gets it again
            self._fail(err)
            return
        self._finish(item, result, took)
        self._queue(self._lanes.finish(item))

    def _finish(self, item: Item, result: str, took: float = 0.0) -> None:
        item.result = result
        item.state = DONE
        self._count(item.cmd, result)
        if item.msgs:  # its stored copy is acked: nothing more to match
            self._note_applied(item)
            self._held.pop(item.msg_id, None)
            metrics.ACTUATOR_IN_HAND.set(len(self._held))
        metrics.ACTUATOR_IN_FLIGHT.set(self._busy)
        if item.done is not None and not item.done.done():
            item.done.set_result((result, took))

    def _note_applied(self, item: Item) -> None:
        key = status_object(item.cmd)
        if key is not None and item.result != "superseded" and item.stream_seq:
            self._applied_at[key] = max(self._applied_at.get(key, 0), item.stream_seq)
            if len(self._applied_at) > 65536:  # bounded: the oldest objects are forgotten
                for old in list(self._applied_at)[:16384]:
                    del self._applied_at[old]

    def _count(self, cmd: Any, result: str) -> None:
        self.results[result] = self.results.get(result, 0) + 1
        metrics.command_result(cmd, result)

    @staticmethod
    async def _ack(msgs: list[Any]) -> None:
        # A plain ack, not waited for (`ack_sync`: one more message each way per command): one the server
        # never gets (its connection lost) brings the command back after ACK_WAIT, applied again
        # idempotently, as after a crash.
        for msg in msgs:
            await msg.ack()

    async def _apply(self, item: Item) -> str:
        """Apply one command; transient failures retried with jittered backoff (tenacity) until `stop`."""
        cmd, stop = item.cmd, self._stop
        assert stop is not None

        async def sleep(seconds: float) -> None:
            for msg in item.msgs:
                with contextlib.suppress(Exception):
                    await msg.in_progress()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), seconds)

        def retried(err: BaseException) -> bool:  # anything but a final answer: the server is away or busy
            final = denied(err) or refused(err) or isinstance(err, (ValueError, NotLeader, _Stopped))
            if not final:
                self.results["failed"] += 1
                metrics.COMMAND_RETRIES.labels(type(cmd).__name__).inc()
            return not final

        call = functools.partial(self.actuator.apply, cmd, index=item.index, msg_id=item.msg_id)
        loop = asyncio.get_running_loop()

        async def once() -> str:
            if stop.is_set() or self._halted:
                raise _Stopped
            if self.fence is not None:
                self.fence()  # NotLeader: a deposed leader writes nothing more
            return await loop.run_in_executor(self._pool, call)

        try:  # the first try outside the retry loop: nearly every command needs only one
            return await once()
        except Exception as err:  # sorted by `retried`
            if not retried(err):
                raise
        retry = unreachable_retry("actuator", maximum=self.max_backoff, logger=log)
        retry["retry"] = tenacity.retry_if_exception(retried)
        result = "failed"
        async for attempt in tenacity.AsyncRetrying(sleep=sleep, **retry):
            with attempt:
                result = await once()
        return result

    async def _refused(self, cmd: Any, index: int, msg_id: str, err: BaseException) -> None:
        """A command refused for good: logged, and a Warning Event on the job says which and why."""
        reason = f"{status_of(err)} {_refusal(err)}".strip()
        log.error("actuator: %s for %s refused by the API server (%s); recorded as failed, going on",
                  type(cmd).__name__, cmd.job, reason)
        ns, _, _ = cmd.job.partition("/")
        if ns == s.CLUSTER_SCOPE or isinstance(cmd, o.RecordEvent):
            return
        await self._record_refusal(cmd, msg_id, err)
        if isinstance(cmd, o.CreatePod):
            return  # the decider records Volcano's FailedCreate Event when it folds the REFUSED record
        event = o.RecordEvent(
            job=cmd.job, seq=cmd.seq, time=cmd.time, event_type="Warning", reason="CommandRefused",
            message=f"vcbus could not {type(cmd).__name__} (refused by the API server: {reason})"[:1024],
        )
        call = functools.partial(self.actuator.apply, event, index=index, msg_id=f"{msg_id or cmd.seq}:refused")
        try:
            await asyncio.get_running_loop().run_in_executor(self._pool, call)
        except Exception as event_err:  # the Event is a courtesy: never block on it
            log.warning("actuator: the CommandRefused event for %s failed too (%s)", cmd.job, event_err)

    async def _record_refusal(self, cmd: Any, msg_id: str, err: BaseException) -> None:
        """The REFUSED record of `cmd` stored on VCBUS_K8S (retried as a direct store; a BusError once the
        tries are used up)."""
        msg = refusal_message(refusal_fields(cmd, err), observed_now(), msg_id or f"{cmd.seq}:?")
        if self._refusals is None:
            self._refusals = Publisher(self.bus.js)
        publisher = self._refusals
        async for attempt in retries.STORE.retrying(on=lambda e: isinstance(e, direct.ERRORS)):
            with attempt:
                await publisher.publish(msg)
                await publisher.flush()


def refusal_fields(cmd: Any, err: BaseException) -> dict[str, Any]:
    """The `refusal` of a REFUSED record (statemachines.model.records.RefusalSpec, camelCase): the command,
    the decision it came from and the API server's answer."""
    fields: dict[str, Any] = {"job": cmd.job, "command": type(cmd).__name__, "name": getattr(cmd, "name", "") or "",
                              "task": getattr(cmd, "task", "") or "", "seq": cmd.seq,
                              "jobUid": getattr(cmd, "job_uid", "") or "",
                              "jobVersion": getattr(cmd, "job_version", 0) or 0, "code": status_of(err),
                              "reason": status_reason(err), "message": _refusal(err)}
    return {k: v for k, v in fields.items() if v not in ("", 0) or k in ("job", "command")}
