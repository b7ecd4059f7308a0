"""The decider: VCBUS_K8S in, domain events (VCBUS_JOBS) and commands (VCBUS_CMDS) out.

The state machines are a pure fold over the log, so the decider's state is a
function of the stream alone and needs no storage of its own. A session:

1. **Rebuild** (`vcbus.bus.rebuilding`). A durable consumer (`vcbus-decider`)
   remembers how far the decider got: its ack floor. On start the decider
   re-applies VCBUS_K8S up to the ack floor to its engine, publishing nothing,
   from its newest valid snapshot when it has one.
2. **Decide, pipelined.** Then it takes the records after the floor in stream
   order, in batches of whatever has arrived (`vcbus.bus.pulling`: pull
   requests are kept open, so a lone record is decided the moment it is
   stored and a burst in batches of up to `batch`; no timer ever waits for a
   batch to fill). With one partition a missing sequence is fetched directly,
   so a redelivery can never overtake; with N > 1 the partition's own records
   and the shared ones come through two consumers merged by sequence
   (`vcbus.bus.merging`). Each record is decided into messages or set aside
   as poison (`vcbus.bus.deciding`).
3. **Store, then ack** (`vcbus.bus.storing`). A batch's commands, then its
   events, go out as one atomic batch per stream while the next batch is
   decided; the records are acked, in order, only after JetStream has
   acknowledged all their outputs (and those of every batch before them).
   An actuator in the same process may apply a batch's commands while they
   are being stored (`ahead`, vcbus.k8s.ahead).

One decider per partition (`vcbus.bus.partitions`; one partition by default):
`vcbus.bus.ownership` refuses a second one for a partition a live decider owns.
With N > 1 the queue decisions come from the queue role, a decider of its own
over every partition's PodGroups, Queues and Commands (`vcbus.bus.queueing`),
and the partitions' engines run no queue controller.

A crash anywhere between receiving a record and acking it means the record is
decided again after the restart: the same outputs with the same ids, which
JetStream drops as duplicates (within the streams' duplicate window, 10
minutes by default). Nothing is lost and nothing is repeated. Delayed actions (policy
timeouts) are fired through TIMER records the decider appends to the log
(`vcbus.bus.storing`), so replaying the stream gives the same decisions.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import msgspec
from nats.aio.msg import Msg
from nats.js.errors import NotFoundError

from statemachines.engine import Engine
from statemachines.model.timefmt import fmt
from vcbus.bus import bigrecords, rebuilding
from vcbus.bus import partitions as parts
from vcbus.bus import poison as p
from vcbus.bus import subjects as s
from vcbus.bus.connecting import Bus
from vcbus.bus.consumers import open_decider_consumer
from vcbus.bus.deciding import Deciding
from vcbus.bus.foldstate import FoldState
from vcbus.bus.merging import Merger
from vcbus.bus.ownership import Ownership
from vcbus.bus.pulling import Puller
from vcbus.bus.reading import stream_seq
from vcbus.bus.rebuilding import Rebuilder
from vcbus.bus.storing import AHEAD_HOLD, DueTimers, Offer, Outbox
from vcbus.bus.supervising import supervise
from vcbus.errors import UserError

log = logging.getLogger("vcbus.decider")

DURABLE = parts.DURABLE
GATHER = 4  # while a flight is stored, up to GATHER * batch records are decided into the next one
__all__ = ["AHEAD_HOLD", "DURABLE", "Decider", "DeciderStats", "wall_clock"]


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
    """One partition's decider: a session loop over its parts, each an object with its own state.

    - `fold` (`FoldState`): the engine, how far it folded (`applied`), the records set aside;
    - `deciding` (`Deciding`): one record into messages, or a failure;
    - `outbox` (`Outbox`): what was decided and not stored yet, and every write;
    - `rebuilder` (`Rebuilder`): the engine refolded or restored on start and after a failure, snapshots;
    - `timers` (`DueTimers`): TIMER records for the timers due while the log is quiet.

    The decider joins them per record (`_handle`, `_decide_live`: set aside a failure, queue or
    store the outputs) and per session (`_session`).
    """

    deciding_kind = Deciding  # its records into messages (the queue role's ids differ, vcbus.bus.queueing)

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
        self.clock = clock
        self.batch = batch
        self.idle = idle
        self.partition_index = partition  # which partition of VCBUS_K8S (None: 0)
        self.stats = DeciderStats()
        engine = engine or Engine(max_pods=bus.settings.max_pods_per_job)
        engine._render_pod = bigrecords.lazy(engine._render_pod)  # pods rendered when encoded
        self.fold = FoldState(engine)
        self.deciding = self._deciding(publish_commands)
        self.outbox = Outbox(self.js, bus.nc, self.stats, timeout=bus.settings.publish_timeout, depth=depth,
                             atomic=atomic)
        self.rebuilder = Rebuilder(self.js, self.fold, self.deciding, self.outbox, self.stats,
                                   fresh=self._fresh_engine, snapshot_every=getattr(bus.settings, "snapshot_every", 0))
        self.timers = DueTimers(self.outbox, clock, self.stats)
        self._rebuilt = False
        self._owner: Ownership | None = None
        self._puller: Puller | Merger | None = None
        self.ready = asyncio.Event()

    def _deciding(self, publish_commands: bool) -> Deciding:
        return self.deciding_kind(self.fold, self.stats, source=self.bus.settings.ce_source, publish_commands=publish_commands,
                        clock=self.clock)

    def _fresh_engine(self) -> Engine:
        return rebuilding.fresh_engine(self.fold.engine, self.fold.partition)

    # ------------------------------------------------------------------ the parts' state, as the decider's

    @property
    def engine(self) -> Engine:
        return self.fold.engine

    @property
    def applied(self) -> int:
        return self.fold.applied

    @property
    def poisoned(self) -> set[int]:
        return self.fold.poisoned

    @property
    def partition(self) -> parts.Partition:
        return self.fold.partition

    @property
    def ahead(self) -> Offer | None:
        """The in-process actuator's `offer` (vcbus.k8s.ahead): commands applied before they are stored."""
        return self.outbox.ahead

    @ahead.setter
    def ahead(self, offer: Offer | None) -> None:
        self.outbox.ahead = offer

    @property
    def ahead_hold(self) -> float:
        """How long a flight whose commands were offered waits for the first one's apply (`Outbox.send`)."""
        return self.outbox.ahead_hold

    @ahead_hold.setter
    def ahead_hold(self, seconds: float) -> None:
        self.outbox.ahead_hold = seconds

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
                progress=lambda: self.fold.applied,
                stop=stop,
                until_idle=until_idle,
                log=log,
            )
        finally:
            if self._owner is not None:
                await self._owner.release()
                self._owner = None
            await self.outbox.close()
        return self.stats

    async def _session(self, stop: asyncio.Event, until_idle: bool) -> None:
        fold, outbox = self.fold, self.outbox
        if self._owner is None:
            count = await parts.partitions(self.js)
            try:
                fold.partition = self._layout(count)
            except ValueError as err:
                raise UserError(f"decider: {err}") from None
            if fold.engine.queue_controller_on != fold.partition.queue_outputs:
                fold.engine = self._fresh_engine()  # with N > 1 no queue controller: the queue role runs it
            owner = Ownership(self.bus.nc, s.K8S_STREAM, fold.partition.consumer, partition=fold.partition.name)
            await owner.claim()
            self._owner = owner
        self.rebuilder.open_snapshots()
        await outbox.open()  # the rebuild may store poison events already
        floor, group = await self._consumer()
        if not self._rebuilt:
            t0 = time.perf_counter()
            await self._rebuild(floor)
            self._rebuilt = True
            log.info(
                "decider: partition %s: state rebuilt from %d records in %.2fs; deciding from seq %d",
                fold.partition.name,
                self.stats.rebuilt,
                time.perf_counter() - t0,
                floor + 1,
            )
        await outbox.resume(fold.applied)
        info = await self.js.stream_info(s.K8S_STREAM)
        first = int(info.state.first_seq or 1)
        if fold.applied < first - 1:  # older records were removed (limits, purge): nothing to fill in
            fold.applied = first - 1
        await self._reset()
        puller: Puller | Merger
        if fold.partition.merged:  # own and shared records through two consumers (vcbus.bus.merging)
            puller = Merger(self.bus.nc, self.js, fold.partition, batch=self.batch, group=group, start=fold.applied)
        else:
            puller = Puller(self.bus.nc, s.K8S_STREAM, fold.partition.consumer, batch=self.batch, group=group)
        self._puller = puller
        outbox.poke = puller.poke
        await puller.start()
        self.ready.set()
        try:
            while not stop.is_set():
                await outbox.complete(block=False)
                msgs = await puller.take(self.batch, timeout=self.idle)
                for msg in msgs:
                    await self._handle(msg)
                if outbox.pending():
                    if outbox.would_wait() and len(outbox.records) < self.batch * GATHER:
                        # `send` would wait for the last flight before putting anything on the wire: decide
                        # what arrives meanwhile and send it all as one flight (fewer, fuller durable writes).
                        # The flight's completion pokes `take`, so nothing waits longer than it would have.
                        continue
                    await outbox.send(fold.applied)
                elif not msgs:
                    if outbox.flights:
                        continue  # a flight finished (or is slow): complete it first
                    if await self.timers.fire(fold.engine.pending_timers(), fold.partition.count):
                        continue
                    if until_idle and await self._caught_up():
                        break
                    continue
                if self.rebuilder.snapshot_due():
                    await outbox.drain(fold.applied)
                    await self.rebuilder.snapshot()
            await outbox.drain(fold.applied)  # stopping: store and ack what was decided
            await self._settle()
            await self.rebuilder.snapshot(stopping=True)  # a clean stop: the next start folds nothing
        finally:
            self._puller = None
            outbox.poke = None
            await puller.close()

    # ------------------------------------------------------------------ one record

    async def _handle(self, msg: Msg) -> None:
        fold = self.fold
        seq = stream_seq(msg)
        acked = not fold.partition.shared(msg.subject)  # shared records come without acks (vcbus.bus.merging)
        if seq <= fold.applied:
            if acked:
                self.outbox.records.append(msg)  # a redelivery of something already decided: ack with this batch
            return
        if fold.partition.whole:
            while fold.applied + 1 < seq:  # fill a gap from the stream itself: order is the fold's
                await self._decide_missing(fold.applied + 1)
        await self._decide_live(seq, msg.subject, msg.data, msg.headers)
        if acked:
            self.outbox.records.append(msg)

    async def _decide_missing(self, seq: int) -> None:
        try:
            raw = await self.js.get_msg(s.K8S_STREAM, seq)
        except NotFoundError:
            self.fold.applied = seq  # deleted from the stream: nothing to decide
            return
        await self._decide_live(seq, raw.subject or "", raw.data or b"", raw.headers)

    async def _decide_live(self, seq: int, subject: str, data: bytes, headers: dict | None) -> None:
        """Decide one record and queue its outputs, or set it aside; `applied` = seq after."""
        fold, outbox = self.fold, self.outbox
        if seq in fold.poisoned or not fold.partition.mine(subject):  # set aside, or another partition's
            fold.applied = seq
            return
        result = self.deciding.decide(seq, subject, data, prepare=True)
        if isinstance(result, p.Failure):
            await self._set_aside(seq, subject, result)
            return
        retry_of = (headers or {}).get(p.RETRY_OF)
        original = int(retry_of) if retry_of is not None and retry_of.isdigit() else None  # `vcbus poison retry`
        if isinstance(result, bigrecords.Split):  # more outputs than one batch (vcbus.bus.bigrecords)
            if original is not None:
                result.events.extra.append(self.deciding.retried(seq, original, subject, data))
            fold.applied = seq
            self.stats.decided += 1
            await outbox.store_big(seq, result, applied=seq)
            return
        commands, events = result
        if original is not None and events is not None:
            events.append(self.deciding.retried(seq, original, subject, data))
        outbox.commands.extend(commands)
        outbox.events.extend(events)
        fold.applied = seq
        self.stats.decided += 1

    async def _set_aside(self, seq: int, subject: str, failure: p.Failure) -> None:
        """A record that failed: everything decided before it stored first (order holds), the engine
        refolded up to the record before it when it may be half-applied, and a poison event stored."""
        fold, outbox = self.fold, self.outbox
        await outbox.drain(fold.applied)
        self.stats.poison += 1
        log.warning("decider: record %s seq %d set aside: %s", subject, seq, failure.reason)
        if failure.dirty:  # the engine may be half-applied: refold it up to the record before
            self.stats.rollbacks += 1
            for old, old_subject, reason, job in await self.rebuilder.refold(seq - 1):
                await outbox.store([self.deciding.poison(old, old_subject, reason, job)], what=f"poison event of {old}")
        fold.poisoned.add(seq)
        await outbox.store([self.deciding.poison(seq, subject, failure.reason, failure.job)],
                           what=f"poison event of {seq}")
        fold.applied = seq

    # ------------------------------------------------------------------ the session's surroundings

    async def _rebuild(self, floor: int) -> None:
        await self.rebuilder.rebuild(floor)

    def _layout(self, count: int) -> parts.Partition:
        """The part of VCBUS_K8S this decider folds, the stream having `count` partitions."""
        return parts.Partition(self.partition_index or 0, count)

    async def _consumer(self) -> tuple[int, str | None]:
        """Open the partition's durable consumer (`vcbus.bus.consumers`); return its ack floor and
        priority group, and note up to where records may have outputs stored already."""
        pos = await open_decider_consumer(
            self.bus.nc, self.fold.partition, self.bus.settings,
            max_ack_pending=self.batch * (self.outbox.depth + 2),
        )
        self.outbox.careful_until = pos.delivered
        return pos.floor, pos.group

    async def _settle(self) -> None:
        """A clean stop with N > 1: move the ack floor to the decider's position, past the shared records
        decided after its partition's last record (else the next start decides them again, harmlessly)."""
        if not self.fold.partition.whole and not self.outbox.flights:
            await self._reset()

    async def _reset(self) -> None:
        """Redeliver what a crashed run had received but not acked now, not after AckWait."""
        try:
            await self.js.reset_consumer(s.K8S_STREAM, self.fold.partition.consumer, seq=self.fold.applied + 1)
        except Exception as err:  # servers before 2.14 have no reset; order is kept anyway (`_handle`)
            log.debug("decider: consumer reset unavailable (%s); relying on redelivery", err)

    async def _caught_up(self) -> bool:
        if isinstance(self._puller, Merger):  # the stream's last record may be another partition's
            return await self._puller.caught_up()
        if not self.fold.partition.whole:  # a consumer of some records only (vcbus.bus.queueing)
            info = await self.js.consumer_info(s.K8S_STREAM, self.fold.partition.consumer)
            return not info.num_pending and not info.num_ack_pending
        info = await self.js.stream_info(s.K8S_STREAM)
        return self.fold.applied >= int(info.state.last_seq or 0)
