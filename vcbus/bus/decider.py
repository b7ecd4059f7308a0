"""The decider: VCBUS_K8S in, domain events (VCBUS_JOBS) and commands (VCBUS_CMDS) out.

The state machines are a pure fold over the log, so the decider's state is a
function of the stream alone and needs no storage of its own:

1. **Rebuild.** A durable consumer (`vcbus-decider`) remembers how far the
   decider got: its ack floor. On start the decider re-applies VCBUS_K8S from
   sequence 1 up to the ack floor to its engine, publishing nothing.
2. **Decide.** Then it takes the records after the floor one at a time, in
   stream order (a missing sequence is fetched directly, so a redelivery can
   never overtake), applies each to the engine and publishes the outputs. Each
   output's `Nats-Msg-Id` (and CloudEvents id) is `<K8S seq>:<index>`.
3. **Ack** a record only after JetStream has acknowledged all its outputs.

A crash anywhere between receiving a record and acking it means the record is
decided again after the restart: the same outputs with the same ids, which
JetStream drops as duplicates (within the streams' duplicate window, 1 hour
by default). Nothing is lost and nothing is repeated.

Time. The engine fires delayed actions (policies with `timeout`) when the
log's time passes their due time, exactly as `vcbus replay` does, so the bus
and a replay of the same log agree. When the log goes quiet past a due time,
the decider appends a `TIMER` record to VCBUS_K8S (msg id `timer:<id>`, time =
the due time) and fires the action when it reads that record back: the firing
is itself in the log, and replaying the stream gives the same decisions.

Poison, never a halt. A record the decider cannot decode or decide, for any
reason (a `RecordError`, a `RecursionError`, an engine exception, a job key no
subject can be built from), is set aside: a `record.poison.v1` event is
published (`vcbus.bus.poison`), `stats.poison` counts it, the record is acked
and the next one is decided. The engine is never left half-applied: a record
that fails after the engine started folding it is *rolled back by refolding*
a fresh engine from the stream up to the record before it (skipping every
record set aside), which costs one rebuild per poison record and nothing on
the happy path. Records set aside stay set aside: the decider reads its
poison events back on start and skips those sequences when rebuilding, so
`vcbus poison retry` (a re-published copy) is the only way to decide one again.
Timestamps that are not RFC 3339 do not poison a record: they are treated as
absent (`statemachines.records.checked_times`), logged and counted in
`stats.bad_times`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

import msgspec
import nats.errors
from nats.aio.msg import Msg
from nats.js import api
from nats.js.errors import NotFoundError

from statemachines import outputs as o
from statemachines.engine import Engine
from statemachines.objects import Job
from statemachines.records import Observed, decode
from statemachines.timefmt import fmt
from vcbus.bus import subjects as s
from vcbus.bus.cloudevents import headers as ce_headers
from vcbus.bus.cloudevents import output_id
from vcbus.bus.connecting import Bus
from vcbus.bus.errors import BusError
from vcbus.bus import poison as p
from vcbus.bus.publisher import Prepared, timer_message
from vcbus.bus.reading import read_stream
from vcbus.bus.supervising import supervise

log = logging.getLogger("vcbus.decider")

DURABLE = "vcbus-decider"
PUBLISH_ATTEMPTS = 5


def wall_clock() -> str:
    return fmt(int(time.time()))


class DeciderStats(msgspec.Struct):
    rebuilt: int = 0  # records re-applied from the stream on start
    decided: int = 0  # records decided and acked in this run
    outputs: int = 0  # outputs stored
    duplicates: int = 0  # outputs JetStream already had (a re-decided record)
    timers: int = 0  # TIMER records appended
    poison: int = 0  # records set aside (a record.poison.v1 event each)
    bad_times: int = 0  # records with a timestamp that is not RFC 3339 (treated as absent)
    rollbacks: int = 0  # engine refolds after a record failed mid-apply


class Decider:
    def __init__(
        self,
        bus: Bus,
        *,
        engine: Engine | None = None,
        publish_commands: bool = True,
        clock: Callable[[], str] = wall_clock,
        batch: int = 64,
        idle: float = 0.25,
    ) -> None:
        self.bus = bus
        self.js = bus.js
        self.engine = engine or Engine()
        # Observe-only: nothing acts on the commands, so none is stored (a later full-mode
        # actuator must never carry out what was decided while only watching).
        self.publish_commands = publish_commands
        self.clock = clock
        self.batch = batch
        self.idle = idle
        self.applied = 0
        self.stats = DeciderStats()
        self._timers_sent: set[str] = set()
        self.poisoned: set[int] = set()  # VCBUS_K8S sequences set aside (never folded)
        self._retried: set[int] = set()  # poisoned sequences whose retry was decided
        self._rebuilt = False
        self.ready = asyncio.Event()

    # ------------------------------------------------------------------ lifecycle

    async def run(self, *, stop: asyncio.Event | None = None, until_idle: bool = False) -> DeciderStats:
        """Decide until `stop` is set (or, with `until_idle`, until the log is used up).

        Transient bus failures restart the session, which continues from the
        last decided record with the engine state it has (`vcbus.bus.supervising`).
        """
        stop = stop or asyncio.Event()
        await supervise(
            "decider",
            lambda: self._session(stop, until_idle),
            progress=lambda: self.applied,
            stop=stop,
            until_idle=until_idle,
            log=log,
        )
        return self.stats

    async def _session(self, stop: asyncio.Event, until_idle: bool) -> None:
        floor = await self._consumer()
        if not self._rebuilt:
            t0 = time.perf_counter()
            await self._rebuild(floor)
            self._rebuilt = True
            log.info(
                "decider: state rebuilt from %d records in %.2fs; deciding from seq %d",
                self.stats.rebuilt,
                time.perf_counter() - t0,
                floor + 1,
            )
        info = await self.js.stream_info(s.K8S_STREAM)
        first = int(info.state.first_seq or 1)
        if self.applied < first - 1:  # older records were removed (limits, purge): nothing to fill in
            self.applied = first - 1
        await self._reset()
        sub = await self.js.pull_subscribe_bind(durable=DURABLE, stream=s.K8S_STREAM)
        self.ready.set()
        try:
            while not stop.is_set():
                try:
                    msgs = await sub.fetch(self.batch, timeout=self.idle)
                except (nats.errors.TimeoutError, asyncio.TimeoutError):
                    if await self._fire_due_timers():
                        continue
                    if until_idle and await self._caught_up():
                        break
                    continue
                for msg in msgs:
                    await self._handle(msg)
                    if stop.is_set():
                        break
        finally:
            try:
                await sub.unsubscribe()
            except Exception:  # the connection may be gone already
                pass

    async def _consumer(self) -> int:
        """Create the durable consumer if needed; return its ack floor (the last decided seq)."""
        try:
            info = await self.js.consumer_info(s.K8S_STREAM, DURABLE)
        except NotFoundError:
            info = await self.js.add_consumer(
                s.K8S_STREAM,
                api.ConsumerConfig(
                    name=DURABLE,
                    durable_name=DURABLE,
                    description="vcbus decider: acks a record once its outputs are stored",
                    deliver_policy=api.DeliverPolicy.ALL,
                    ack_policy=api.AckPolicy.EXPLICIT,
                    ack_wait=self.bus.settings.ack_wait,
                    max_ack_pending=self.batch * 4,
                    max_deliver=-1,
                    filter_subject=f"{s.K8S_PREFIX}.>",
                ),
            )
        floor = info.ack_floor.stream_seq if info.ack_floor is not None else 0
        return int(floor or 0)

    async def _reset(self) -> None:
        """Redeliver what a crashed run had received but not acked now, not after AckWait."""
        try:
            await self.js.reset_consumer(s.K8S_STREAM, DURABLE, seq=self.applied + 1)
        except Exception as err:  # servers before 2.14 have no reset; order is kept anyway (`_handle`)
            log.debug("decider: consumer reset unavailable (%s); relying on redelivery", err)

    async def _rebuild(self, floor: int) -> None:
        self.poisoned |= await p.poisoned_sequences(self.js)
        self._retried |= await p.retried_sequences(self.js)
        if floor <= 0:
            return
        found = await self._refold(floor)
        self.stats.rebuilt = self.applied
        self.applied = max(self.applied, floor)
        # Records that failed but have no poison event (set aside before poison events existed,
        # or a crash in between): record them now (same msg ids, so at most once).
        for seq, subject, reason, job in found:
            await self._store([self._poison(seq, subject, reason, job)], what=f"poison event of record {seq}")

    async def _refold(self, upto: int) -> list[tuple[int, str, str, str]]:
        """A fresh engine folded from sequence 1 to `upto`, skipping the poisoned records.

        A record that fails and is not known as poisoned yet is added to them and the
        fold starts over (its failure may have left the engine half-applied). Returns
        those newly found (seq, subject, reason, job)."""
        found: list[tuple[int, str, str, str]] = []
        while True:
            self.engine = self._fresh_engine()
            self.applied = 0
            failed = None
            batches = read_stream(self.js, s.K8S_STREAM, end_seq=upto, batch=512)
            try:
                async for batch in batches:
                    for msg in batch:
                        seq = msg.metadata.sequence.stream
                        if seq not in self.poisoned:
                            result = self._decide(seq, msg.subject, msg.data, prepare=False)
                            if isinstance(result, p.Failure):
                                if not result.dirty:  # failed before the engine saw it: no restart
                                    self.poisoned.add(seq)
                                    found.append((seq, msg.subject, result.reason, result.job))
                                else:
                                    failed = (seq, msg.subject, result.reason, result.job)
                                    break
                        self.applied = seq
                    if failed is not None:
                        break
            finally:
                await batches.aclose()
            if failed is None:
                return found
            log.warning("decider: record seq %d fails on refold (%s); set aside", failed[0], failed[2])
            self.poisoned.add(failed[0])
            found.append(failed)
            self.stats.rollbacks += 1

    def _fresh_engine(self) -> Engine:
        e = self.engine
        return Engine(
            explain=e.explain,
            timers=e.timer_mode,
            strict_queues=e.strict_queues,
            render_pod=e._render_pod,
            render_podgroup=e._render_podgroup,
        )

    async def _caught_up(self) -> bool:
        info = await self.js.stream_info(s.K8S_STREAM)
        return self.applied >= int(info.state.last_seq or 0)

    # ------------------------------------------------------------------ one record

    async def _handle(self, msg: Msg) -> None:
        seq = msg.metadata.sequence.stream
        if seq <= self.applied:
            await msg.ack()  # a redelivery of something already decided
            return
        while self.applied + 1 < seq:  # fill a gap from the stream itself: order is the fold's
            await self._decide_missing(self.applied + 1)
        await self._decide_live(seq, msg.subject, msg.data, msg.headers)
        await msg.ack()

    async def _decide_missing(self, seq: int) -> None:
        try:
            raw = await self.js.get_msg(s.K8S_STREAM, seq)
        except NotFoundError:
            self.applied = seq  # deleted from the stream: nothing to decide
            return
        await self._decide_live(seq, raw.subject or "", raw.data or b"", raw.headers)

    async def _decide_live(self, seq: int, subject: str, data: bytes, headers: dict | None) -> None:
        """Decide one record and store its outputs, or set it aside; `applied` = seq after."""
        if seq in self.poisoned:  # set aside before a crash, not acked yet: stays aside
            self.applied = seq
            return
        result = self._decide(seq, subject, data, prepare=True)
        if isinstance(result, p.Failure):
            self.stats.poison += 1
            log.warning("decider: record %s seq %d set aside: %s", subject, seq, result.reason)
            if result.dirty:  # the engine may be half-applied: refold it up to the record before
                self.stats.rollbacks += 1
                for old, old_subject, reason, job in await self._refold(seq - 1):
                    await self._store([self._poison(old, old_subject, reason, job)], what=f"poison event of {old}")
            self.poisoned.add(seq)
            await self._store([self._poison(seq, subject, result.reason, result.job)], what=f"poison event of {seq}")
            self.applied = seq
            return
        commands, events = result
        retry_of = (headers or {}).get(p.RETRY_OF)
        if retry_of and retry_of.isdigit() and events is not None:
            events.append(self._retried_message(seq, int(retry_of), subject, data))
        await self._publish(seq, commands, events)
        self.applied = seq
        self.stats.decided += 1

    def _decide(self, seq: int, subject: str, data: bytes, *, prepare: bool) -> "p.Failure | tuple":
        """Fold one record; return its (commands, events) messages (None, None without
        `prepare`), or a `Failure`. Subjects are built in both modes, so a record whose
        outputs cannot be addressed fails the same way live and on a rebuild."""
        try:
            decoded = decode(data)
        except Exception as err:  # RecordError, RecursionError, anything: the engine is untouched
            return p.Failure(p.reason_of(err), p.job_of(subject), dirty=False)
        if isinstance(decoded, Observed) and decoded.notes:
            if prepare:
                self.stats.bad_times += 1
                log.warning("decider: record %s seq %d: %s", subject, seq, "; ".join(decoded.notes))
        raw = data if isinstance(decoded, Observed) and isinstance(decoded.object, Job) else None
        try:
            outs = self.engine.apply(seq, decoded, raw=raw)
            return self._messages(seq, outs, prepare=prepare)
        except Exception as err:  # RecursionError included
            return p.Failure(p.reason_of(err), p.job_of(subject, decoded), dirty=True)

    def _messages(self, seq: int, outs: list[o.Output], *, prepare: bool) -> tuple:
        source = self.bus.settings.ce_source
        commands: list[Prepared] = []
        events: list[Prepared] = []
        for i, out in enumerate(outs):
            if o.is_command(out):
                subject = s.command_subject(out.job)
                if prepare and self.publish_commands:
                    headers = ce_headers(out, ce_id=output_id(seq, i), source=source)
                    commands.append(Prepared(subject, o.encoder.encode(out), headers))
            else:
                subject = s.event_subject(out.job, o.tag_of(type(out)))
                if prepare:
                    headers = ce_headers(out, ce_id=output_id(seq, i), source=source)
                    events.append(Prepared(subject, o.encoder.encode(out), headers))
        return (commands, events) if prepare else (None, None)

    def _poison(self, seq: int, subject: str, reason: str, job: str) -> Prepared:
        event = p.poison_event(
            component="decider", stream=s.K8S_STREAM, sequence=seq, subject=subject, reason=reason, job=job,
            now=self.clock(),
        )
        return p.poison_message(event, source=self.bus.settings.ce_source)

    def _retried_message(self, seq: int, original: int, subject: str, data: bytes) -> Prepared:
        self._retried.add(original)
        return p.retried_message(
            p.retried_event(seq, original, subject, data, now=self.clock()), source=self.bus.settings.ce_source
        )

    async def _publish(self, seq: int, commands: list[Prepared], events: list[Prepared]) -> None:
        if not commands and not events:
            return
        # Commands first, sent before the events are even prepared for sending: the cluster side
        # waits for them. Each stream still gets its messages in decision order (the ids keep
        # the index in the record's outputs).
        for ack in await self._store(commands, events, what=f"outputs of record {seq}"):
            if ack.duplicate:
                self.stats.duplicates += 1
            else:
                self.stats.outputs += 1

    async def _store(
        self, first: list[Prepared], then: list[Prepared] | None = None, *, what: str
    ) -> list[api.PubAck]:
        """Publish `first`, then `then`, in order; wait for every ack; on failure retry the lot."""
        then = then or []
        timeout = self.bus.settings.publish_timeout
        publish = self.js.publish_async
        for attempt in range(1, PUBLISH_ATTEMPTS + 1):
            try:
                futs = [await publish(m.subject, m.body, headers=dict(m.headers)) for m in first]
                if first and then:
                    await asyncio.sleep(0)  # let the client's flusher put `first` on the wire now
                futs += [await publish(m.subject, m.body, headers=dict(m.headers)) for m in then]
                acks = await asyncio.wait_for(asyncio.gather(*futs), timeout)
            except (asyncio.TimeoutError, nats.errors.Error) as err:
                if attempt == PUBLISH_ATTEMPTS:
                    raise BusError(f"decider: cannot store the {what}: {err or type(err).__name__}") from err
                log.warning("decider: storing the %s failed (%s); retrying", what, err or type(err).__name__)
                await asyncio.sleep(0.2 * attempt)
                continue
            return list(acks)
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ timers

    async def _fire_due_timers(self) -> int:
        """Append a TIMER record for each pending timer due by the clock (the log is quiet)."""
        pending = self.engine.pending_timers()
        if not pending:
            self._timers_sent.clear()
            return 0
        now = self.clock()
        due = [t for t in pending if t.due <= now and t.id not in self._timers_sent]
        if not due:
            return 0
        await self._store([timer_message(t) for t in due], what=f"{len(due)} TIMER record(s)")
        self._timers_sent.intersection_update(t.id for t in pending)
        self._timers_sent.update(t.id for t in due)
        self.stats.timers += len(due)
        log.info("decider: fired %d timer(s) due by %s", len(due), now)
        return len(due)

