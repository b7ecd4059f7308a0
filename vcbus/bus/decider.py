"""The decider: VCBUS_K8S in, domain events (VCBUS_JOBS) and commands (VCBUS_CMDS) out.

The state machines are a pure fold over the log, so the decider's state is a
function of the stream alone and needs no storage of its own:

1. **Rebuild.** A durable consumer (`vcbus-decider`) remembers how far the
   decider got: its ack floor. On start the decider re-applies VCBUS_K8S from
   sequence 1 up to the ack floor to its engine, publishing nothing; from its
   newest valid snapshot instead of sequence 1 when it has one
   (`vcbus.bus.statesnap`: saved every `snapshot_every` records and on a clean
   stop, only when every record it covers has its outputs stored).
2. **Decide, pipelined.** Then it takes the records after the floor in stream
   order, in batches of whatever has arrived (`vcbus.bus.pulling`: pull
   requests are kept open, so a lone record is decided the moment it is
   stored and a burst in batches of up to `batch`; no timer ever waits for a
   batch to fill). A missing sequence is fetched directly, so a redelivery can
   never overtake. Each output's `Nats-Msg-Id` (and CloudEvents id) is
   `<K8S seq>:<index>`. A batch's commands, then its events, go out as one
   atomic batch per stream (`vcbus.bus.batching`: one durable write each);
   while the server stores them the decider already decides the next batch,
   which is sent once they are stored (`depth`: a failed batch must never be
   overtaken by the next one, or the streams would lose their order).
3. **Ack** the records of a batch, in order, only after JetStream has
   acknowledged all its outputs (and those of every batch before it).

One decider per partition (`vcbus.bus.partitions`; one partition by default):
`vcbus.bus.ownership` refuses a second one for a partition a live decider owns.

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
absent (`statemachines.model.records.checked_times`), logged and counted in
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
from statemachines.model.objects import Job
from statemachines.model.records import Observed, decode
from statemachines.model.timefmt import fmt
from vcbus.bus import partitions as parts
from vcbus.bus import subjects as s
from vcbus.bus.batching import BatchWriter
from vcbus.bus.cloudevents import headers as ce_headers
from vcbus.bus.cloudevents import output_id
from vcbus.bus.connecting import Bus
from vcbus.bus.consumers import open_decider_consumer
from vcbus.bus.errors import BusError
from vcbus.bus.flights import Flight, restore
from vcbus.bus.ownership import Ownership
from vcbus.bus import poison as p
from vcbus.bus.publisher import Prepared, timer_message
from vcbus.bus.pulling import Puller
from vcbus.bus.reading import read_stream
from vcbus.bus import statesnap
from vcbus.bus.supervising import supervise
from vcbus.errors import UserError
from vcbus.observability import metrics

log = logging.getLogger("vcbus.decider")

DURABLE = parts.DURABLE
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
    restored: int = 0  # the K8S sequence the start's snapshot covered (0: refolded from sequence 1)
    snapshots: int = 0  # snapshots saved by this run (vcbus.bus.statesnap)


class Decider:
    def __init__(
        self,
        bus: Bus,
        *,
        engine: Engine | None = None,
        publish_commands: bool = True,
        clock: Callable[[], str] = wall_clock,
        batch: int = 256,
        idle: float = 0.25,
        depth: int = 1,
        partition: int | None = None,
        atomic: bool = True,
    ) -> None:
        self.bus = bus
        self.js = bus.js
        self.engine = engine or Engine(max_pods=bus.settings.max_pods_per_job)
        # Observe-only: nothing acts on the commands, so none is stored (a later full-mode
        # actuator must never carry out what was decided while only watching).
        self.publish_commands = publish_commands
        self.clock = clock
        self.batch = batch
        self.idle = idle
        # Decided batches queued unacked besides the one being sent. Whatever the depth, a batch's
        # commands (events) go out only once the batch before it has its commands (events) stored
        # (`_send`), so a failed batch (a leader change, a timeout) is never overtaken by the next one.
        self.depth = max(1, depth)
        self.atomic = atomic  # False: outputs published message by message (the benchmark's comparison)
        self.partition_index = partition  # which partition of VCBUS_K8S (None: 0)
        self.partition = parts.Partition()
        self.applied = 0
        self.stats = DeciderStats()
        self._timers_sent: set[str] = set()
        self.poisoned: set[int] = set()  # VCBUS_K8S sequences set aside (never folded)
        self._retried: set[int] = set()  # poisoned sequences whose retry was decided
        self._rebuilt = False
        self._owner: Ownership | None = None
        self._writer: BatchWriter | None = None
        self._puller: Puller | None = None
        self._careful_until = 0  # records up to here may have stored outputs: sent one by one
        self._sent_upto = 0  # the last record whose outputs were sent
        self._flights: list[Flight] = []  # sent, not yet stored-and-acked, in stream order
        self._records: list[Msg] = []  # the batch being decided: records to ack
        self._commands: list[Prepared] = []
        self._events: list[Prepared] = []
        self.ready = asyncio.Event()
        self.snapshot_every = getattr(bus.settings, "snapshot_every", 0)  # records between snapshots (0: none)
        self.snapshots: statesnap.Store | None = None
        self._base: statesnap.Restored | None = None  # the newest snapshot: where a refold starts

    # ------------------------------------------------------------------ lifecycle

    async def run(self, *, stop: asyncio.Event | None = None, until_idle: bool = False) -> DeciderStats:
        """Decide until `stop` is set (or, with `until_idle`, until the log is used up).

        Transient bus failures restart the session, which continues from the
        last decided record with the engine state it has (`vcbus.bus.supervising`).
        Raises `PartitionOwned` when a live decider owns the partition already.
        """
        stop = stop or asyncio.Event()
        try:
            await supervise(
                "decider",
                lambda: self._session(stop, until_idle),
                progress=lambda: self.applied,
                stop=stop,
                until_idle=until_idle,
                log=log,
            )
        finally:
            if self._owner is not None:
                await self._owner.release()
                self._owner = None
            if self._writer is not None:
                await self._writer.close()
        return self.stats

    async def _session(self, stop: asyncio.Event, until_idle: bool) -> None:
        if self._owner is None:
            count = await parts.partitions(self.js)
            try:
                self.partition = parts.Partition(self.partition_index or 0, count)
            except ValueError as err:
                raise UserError(f"decider: {err}") from None
            owner = Ownership(self.bus.nc, s.K8S_STREAM, self.partition.consumer, partition=self.partition.name)
            await owner.claim()
            self._owner = owner
        if self.snapshots is None and self.snapshot_every:
            self.snapshots = statesnap.Store(
                self.js, owner=self.partition.consumer, stream=s.K8S_STREAM, config=self._snapshot_config()
            )
        floor, group = await self._consumer()
        if not self._rebuilt:
            t0 = time.perf_counter()
            await self._rebuild(floor)
            self._rebuilt = True
            log.info(
                "decider: partition %s: state rebuilt from %d records in %.2fs; deciding from seq %d",
                self.partition.name,
                self.stats.rebuilt,
                time.perf_counter() - t0,
                floor + 1,
            )
        if self._writer is None:
            info = await self.js.stream_info(s.JOBS_STREAM)
            self._writer = BatchWriter(self.bus.nc, self.js, atomic=self.atomic and bool(info.config.allow_atomic))
        if self._flights:  # a failed session's outputs: store them (again) before going on
            # kept until stored: if this fails too (the server is still away), the next session
            # must try them again, or their records would be skipped with their outputs lost
            res = await restore(self._writer, self._flights, self.bus.settings.publish_timeout)
            self._flights = []
            self._count(res)
        self._sent_upto = self.applied
        info = await self.js.stream_info(s.K8S_STREAM)
        first = int(info.state.first_seq or 1)
        if self.applied < first - 1:  # older records were removed (limits, purge): nothing to fill in
            self.applied = first - 1
        await self._reset()
        puller = Puller(self.bus.nc, s.K8S_STREAM, self.partition.consumer, batch=self.batch, group=group)
        self._puller = puller
        await puller.start()
        self.ready.set()
        try:
            while not stop.is_set():
                await self._complete(block=False)
                msgs = await puller.take(self.batch, timeout=self.idle)
                if not msgs:
                    if self._flights:
                        continue  # a flight finished (or is slow): complete it first
                    if await self._fire_due_timers():
                        continue
                    if until_idle and await self._caught_up():
                        break
                    continue
                for msg in msgs:
                    await self._handle(msg)
                await self._send()
                if self.snapshots is not None and self.snapshots.due(self.applied, self.snapshot_every):
                    await self._drain()
                    await self._snapshot()
            while self._flights:  # stopping: store and ack what was decided
                await self._complete(block=True)
            if self.snapshots is not None and self.applied > self.snapshots.saved_seq:
                await self._snapshot()  # a clean stop: the next start folds nothing
        finally:
            self._puller = None
            await puller.close()

    async def _consumer(self) -> tuple[int, str | None]:
        """Open the partition's durable consumer (`vcbus.bus.consumers`); return its ack floor and
        priority group, and note up to where records may have outputs stored already."""
        pos = await open_decider_consumer(
            self.bus.nc, self.partition, self.bus.settings, max_ack_pending=self.batch * (self.depth + 2)
        )
        self._careful_until = pos.delivered
        return pos.floor, pos.group

    async def _reset(self) -> None:
        """Redeliver what a crashed run had received but not acked now, not after AckWait."""
        try:
            await self.js.reset_consumer(s.K8S_STREAM, self.partition.consumer, seq=self.applied + 1)
        except Exception as err:  # servers before 2.14 have no reset; order is kept anyway (`_handle`)
            log.debug("decider: consumer reset unavailable (%s); relying on redelivery", err)

    async def _rebuild(self, floor: int) -> None:
        self.poisoned |= await p.poisoned_sequences(self.js)
        self._retried |= await p.retried_sequences(self.js)
        if self.snapshots is not None:  # the newest valid snapshot, else a refold from sequence 1
            self._base = await self.snapshots.restore(kind=Engine, hooks=self._hooks())
            self.stats.restored = self._base.seq if self._base is not None else 0
        upto = max(floor, self.stats.restored)  # a snapshot past the floor: its records' outputs are stored
        if upto <= 0:
            return
        found = await self._refold(upto)
        self.stats.rebuilt = self.applied - self.stats.restored
        self.applied = max(self.applied, floor)
        # Records that failed but have no poison event (set aside before poison events existed,
        # or a crash in between): record them now (same msg ids, so at most once).
        for seq, subject, reason, job in found:
            await self._store([self._poison(seq, subject, reason, job)], what=f"poison event of record {seq}")

    async def _refold(self, upto: int) -> list[tuple[int, str, str, str]]:
        """A fresh engine folded from sequence 1 (from the newest snapshot, `_base`, when it
        covers at most `upto`) to `upto`, skipping the poisoned records.

        A record that fails and is not known as poisoned yet is added to them and the
        fold starts over (its failure may have left the engine half-applied). Returns
        those newly found (seq, subject, reason, job)."""
        found: list[tuple[int, str, str, str]] = []
        while True:
            base = self._base if self._base is not None and self._base.seq <= upto else None
            self.engine = self._fresh_engine() if base is None else self._snapshot_engine(base)
            self.applied = 0 if base is None else base.seq
            failed = None
            batches = read_stream(
                self.js, s.K8S_STREAM, start_seq=self.applied + 1, end_seq=upto, batch=512, filters=self.partition.filters
            )
            try:
                async for batch in batches:
                    for msg in batch:
                        seq = msg.metadata.sequence.stream
                        if seq not in self.poisoned and self.partition.mine(msg.subject):
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
            max_pods=e.max_pods,
        )

    # ------------------------------------------------------------------ snapshots (vcbus.bus.statesnap)

    def _hooks(self) -> dict:
        """What the engine refers to but a snapshot does not hold: re-attached from this process."""
        return {"render_pod": self.engine._render_pod, "render_podgroup": self.engine._render_podgroup}

    def _snapshot_config(self) -> str:
        """What a snapshot's engine must have been built with to be this decider's (else it is ignored)."""
        e = self.engine

        def named(f: object) -> str | None:
            return None if f is None else f"{getattr(f, '__module__', '?')}.{getattr(f, '__qualname__', '?')}"

        return msgspec.json.encode(
            {
                "explain": e.explain, "timers": e.timer_mode, "strict_queues": e.strict_queues, "max_pods": e.max_pods,
                "render_pod": named(e._render_pod), "render_podgroup": named(e._render_podgroup),
                "partition": self.partition.name, "partitions": self.partition.count,
            }
        ).decode()

    def _snapshot_engine(self, base: statesnap.Restored) -> Engine:
        return statesnap.load_payload(base.payload, hooks=self._hooks())

    async def _snapshot(self) -> None:
        """Save the engine as covering `applied`, only when every record up to it has its outputs
        stored (no flight, nothing decided unsent): a restart from it repeats and loses nothing."""
        if self.snapshots is None or self._flights or self._records or self._commands or self._events:
            return
        saved = await self.snapshots.save(self.applied, self.engine, hooks=self._hooks())
        if saved is not None:
            self._base = saved
            self.stats.snapshots += 1

    async def _caught_up(self) -> bool:
        if self.partition.count > 1:  # the stream's last record may be another partition's
            info = await self.js.consumer_info(s.K8S_STREAM, self.partition.consumer)
            return not info.num_pending and not info.num_ack_pending
        info = await self.js.stream_info(s.K8S_STREAM)
        return self.applied >= int(info.state.last_seq or 0)

    # ------------------------------------------------------------------ the pipeline

    async def _send(self) -> None:
        """Send the outputs of the records decided since the last send, as one flight.

        Records up to `_careful_until` (delivered to a run that died before acking them) may have
        outputs stored already: an atomic batch holding one of them would be refused whole (and
        stored message by message only after the flights sent behind it), so such a flight goes
        message by message."""
        if not self._records and not self._commands and not self._events:
            self._sent_upto = self.applied
            return
        while len(self._flights) >= self.depth + 1:  # bound the queue (see `depth`)
            await self._complete(block=True)
        before = self._flights[-1] if self._flights else None
        careful = self._sent_upto < self._careful_until
        self._sent_upto = self.applied
        records, commands, events = self._records, self._commands, self._events
        self._records, self._commands, self._events = [], [], []
        # queued before anything is sent: if sending fails half-way, the next session stores it all again
        flight = Flight(records, commands + events, [], self.applied)
        self._flights.append(flight)
        assert self._writer is not None
        timeout = self.bus.settings.publish_timeout
        # Per stream, a batch goes out once the batch before it in that stream is stored: a failed one
        # is never overtaken (the streams keep their order), and commands need not wait for events.
        if commands:
            if before is not None:
                await before.stored(before.commands, timeout)
            flight.commands = await self._writer.send(commands, atomic=not careful)
            flight.sent += flight.commands
        if events:
            if commands:
                await asyncio.sleep(0)  # let the client's flusher put the commands on the wire now
            if before is not None:
                await before.stored(before.events, timeout)
            flight.events = await self._writer.send(events, atomic=not careful)
            flight.sent += flight.events
        if self._puller is not None:
            flight.when_done(self._puller.poke)

    async def _complete(self, *, block: bool) -> None:
        """Ack the leading flights whose outputs are stored; with `block`, wait for the oldest first."""
        while self._flights and (block or self._flights[0].done()):
            res = await self._flights[0].complete(self.bus.settings.publish_timeout)
            self._flights.pop(0)
            self._count(res)
            block = False

    def _count(self, res) -> None:  # noqa: ANN001
        self.stats.outputs += res.stored
        self.stats.duplicates += res.duplicates

    async def _drain(self) -> None:
        await self._send()
        while self._flights:
            await self._complete(block=True)

    # ------------------------------------------------------------------ one record

    async def _handle(self, msg: Msg) -> None:
        seq = msg.metadata.sequence.stream
        if seq <= self.applied:
            self._records.append(msg)  # a redelivery of something already decided: ack with this batch
            return
        if self.partition.count == 1:
            while self.applied + 1 < seq:  # fill a gap from the stream itself: order is the fold's
                await self._decide_missing(self.applied + 1)
        await self._decide_live(seq, msg.subject, msg.data, msg.headers)
        self._records.append(msg)

    async def _decide_missing(self, seq: int) -> None:
        try:
            raw = await self.js.get_msg(s.K8S_STREAM, seq)
        except NotFoundError:
            self.applied = seq  # deleted from the stream: nothing to decide
            return
        await self._decide_live(seq, raw.subject or "", raw.data or b"", raw.headers)

    async def _decide_live(self, seq: int, subject: str, data: bytes, headers: dict | None) -> None:
        """Decide one record and queue its outputs, or set it aside; `applied` = seq after."""
        if seq in self.poisoned or not self.partition.mine(subject):  # set aside, or another partition's
            self.applied = seq
            return
        result = self._decide(seq, subject, data, prepare=True)
        if isinstance(result, p.Failure):
            await self._drain()  # everything decided before it is stored first: order holds
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
        self._commands.extend(commands)
        self._events.extend(events)
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
        shared_elsewhere = self.partition.count > 1 and self.partition.index != 0
        for i, out in enumerate(outs):
            if shared_elsewhere and out.job.startswith("_/"):
                continue  # queue-scoped outputs: partition 0's decider publishes them (vcbus.bus.partitions)
            if prepare:  # live decisions only (not a rebuild): /metrics vcbus_decisions_total
                metrics.decided(out, command=o.is_command(out))
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
        count = self.partition.count
        timers = [timer_message(t) for t in due]
        timers = [m._replace(subject=parts.route(m.subject, m.headers.get("Vcbus-Job"), count)) for m in timers]
        await self._store(timers, what=f"{len(due)} TIMER record(s)")
        self._timers_sent.intersection_update(t.id for t in pending)
        self._timers_sent.update(t.id for t in due)
        self.stats.timers += len(due)
        log.info("decider: fired %d timer(s) due by %s", len(due), now)
        return len(due)

