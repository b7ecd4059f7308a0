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
JetStream drops as duplicates (within the streams' duplicate window, 1 hour
by default). Nothing is lost and nothing is repeated. Delayed actions (policy
timeouts) are fired through TIMER records the decider appends to the log
(`vcbus.bus.storing`), so replaying the stream gives the same decisions.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable

import msgspec
from nats.aio.msg import Msg

from statemachines.engine import Engine
from statemachines.model.timefmt import fmt
from vcbus.bus import partitions as parts
from vcbus.bus import bigrecords
from vcbus.bus import subjects as s
from vcbus.bus.batching import BatchWriter
from vcbus.bus.connecting import Bus
from vcbus.bus.consumers import open_decider_consumer
from vcbus.bus.deciding import Deciding
from vcbus.bus.flights import Flight, restore
from vcbus.bus.ownership import Ownership
from vcbus.bus.publisher import Prepared
from vcbus.bus.merging import Merger
from vcbus.bus.pulling import Puller
from vcbus.bus.rebuilding import Rebuilding
from vcbus.bus import statesnap
from vcbus.bus.storing import Storing
from vcbus.bus.supervising import supervise
from vcbus.errors import UserError

log = logging.getLogger("vcbus.decider")

DURABLE = parts.DURABLE
# A light load's reaction (commands offered ahead, vcbus.k8s.ahead): its flight is sent once the first
# command's apply is over, or after this many seconds (benchmarks/latency.py: the PATCH and DELETE of a
# kill took 9.4-11.0 ms with the flight held, 12.4-16.7 ms beside its stores; p50s of five runs each)
AHEAD_HOLD = 0.05
GATHER = 4  # while a flight is stored, up to GATHER * batch records are decided into the next one
__all__ = ["DURABLE", "Decider", "DeciderStats", "wall_clock"]


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


class Decider(Rebuilding, Deciding, Storing):
    """One partition's decider: a session loop over the mixins that rebuild, decide and store."""

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
        self.engine._render_pod = bigrecords.lazy(self.engine._render_pod)  # pods rendered when encoded
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
        self._puller: Puller | Merger | None = None
        self._careful_until = 0  # records up to here may have stored outputs: sent one by one
        self._sent_upto = 0  # the last record whose outputs were sent
        self._flights: list[Flight] = []  # sent, not yet stored-and-acked, in stream order
        # Commands applied before they are stored (vcbus.k8s.ahead): the in-process actuator's
        # `offer`, and a VCBUS_CMDS sequence at or after this decider's last stored command (None:
        # not known; the offers wait for the next stored one)
        self.ahead: Callable[[list[Prepared], int], asyncio.Future | None] | None = None
        # how long a flight whose commands were offered waits for the first one's apply before it is
        # sent (`Storing._send`); 0: sent at once, beside the apply
        self.ahead_hold = AHEAD_HOLD
        self.cmd_seq: int | None = None
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
                self.partition = self._layout(count)
            except ValueError as err:
                raise UserError(f"decider: {err}") from None
            if self.engine.queue_controller_on != self.partition.queue_outputs:
                self.engine = self._fresh_engine()  # with N > 1 no queue controller: the queue role runs it
            owner = Ownership(self.bus.nc, s.K8S_STREAM, self.partition.consumer, partition=self.partition.name)
            await owner.claim()
            self._owner = owner
        if self.snapshots is None and self.snapshot_every:
            self.snapshots = statesnap.Store(
                self.js, owner=self.partition.consumer, stream=s.K8S_STREAM, config=self._snapshot_config()
            )
        if self._writer is None:  # the rebuild may store poison events already
            info = await self.js.stream_info(s.JOBS_STREAM)
            self._writer = BatchWriter(self.bus.nc, self.js, atomic=self.atomic and bool(info.config.allow_atomic))
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
        if self._records or self._commands or self._events:  # decided by a failed session, not sent yet
            self._flights.append(Flight(self._records, self._commands + self._events, [], self.applied))
            self._records, self._commands, self._events = [], [], []
        if self._flights:  # a failed session's outputs: store them (again) before going on
            # kept until stored: if this fails too (the server is still away), the next session
            # must try them again, or their records would be skipped with their outputs lost
            res = await restore(self._writer, self._flights, self.bus.settings.publish_timeout)
            self._flights = []
            self._count(res)
        self._sent_upto = self.applied
        if self.ahead is not None:  # what an earlier run stored may not be applied yet: nothing goes ahead of it
            self.cmd_seq = int((await self.js.stream_info(s.CMDS_STREAM)).state.last_seq or 0)
        info = await self.js.stream_info(s.K8S_STREAM)
        first = int(info.state.first_seq or 1)
        if self.applied < first - 1:  # older records were removed (limits, purge): nothing to fill in
            self.applied = first - 1
        await self._reset()
        puller: Puller | Merger
        if self.partition.merged:  # own and shared records through two consumers (vcbus.bus.merging)
            puller = Merger(self.bus.nc, self.js, self.partition, batch=self.batch, group=group, start=self.applied)
        else:
            puller = Puller(self.bus.nc, s.K8S_STREAM, self.partition.consumer, batch=self.batch, group=group)
        self._puller = puller
        await puller.start()
        self.ready.set()
        try:
            while not stop.is_set():
                await self._complete(block=False)
                msgs = await puller.take(self.batch, timeout=self.idle)
                for msg in msgs:
                    await self._handle(msg)
                if self._records or self._commands or self._events:
                    if self._would_wait() and len(self._records) < self.batch * GATHER:
                        # `_send` would wait for the last flight before putting anything on the wire: decide
                        # what arrives meanwhile and send it all as one flight (fewer, fuller durable writes).
                        # The flight's completion pokes `take`, so nothing waits longer than it would have.
                        continue
                    await self._send()
                elif not msgs:
                    if self._flights:
                        continue  # a flight finished (or is slow): complete it first
                    if await self._fire_due_timers():
                        continue
                    if until_idle and await self._caught_up():
                        break
                    continue
                if self.snapshots is not None and self.snapshots.due(self.applied, self.snapshot_every):
                    await self._drain()
                    await self._snapshot()
            await self._send()  # stopping: what was decided and not sent yet
            while self._flights:  # store and ack what was decided
                await self._complete(block=True)
            await self._settle()
            if self.snapshots is not None and self.applied > self.snapshots.saved_seq:
                await self._snapshot()  # a clean stop: the next start folds nothing
        finally:
            self._puller = None
            await puller.close()

    def _would_wait(self) -> bool:
        """Whether `_send` would first wait for the last flight: for its commands, when there are commands
        to send, else for its events (`vcbus.bus.storing`: each stream waits for its own previous batch)."""
        if not self._flights:
            return False
        last = self._flights[-1]
        first = last.commands if self._commands else last.events
        return not all(fut.done() for one in first for _, fut in one.replies)

    def _layout(self, count: int) -> parts.Partition:
        """The part of VCBUS_K8S this decider folds, the stream having `count` partitions."""
        return parts.Partition(self.partition_index or 0, count)

    async def _consumer(self) -> tuple[int, str | None]:
        """Open the partition's durable consumer (`vcbus.bus.consumers`); return its ack floor and
        priority group, and note up to where records may have outputs stored already."""
        pos = await open_decider_consumer(
            self.bus.nc, self.partition, self.bus.settings, max_ack_pending=self.batch * (self.depth + 2)
        )
        self._careful_until = pos.delivered
        return pos.floor, pos.group

    async def _settle(self) -> None:
        """A clean stop with N > 1: move the ack floor to the decider's position, past the shared records
        decided after its partition's last record (else the next start decides them again, harmlessly)."""
        if not self.partition.whole and not self._flights:
            await self._reset()

    async def _reset(self) -> None:
        """Redeliver what a crashed run had received but not acked now, not after AckWait."""
        try:
            await self.js.reset_consumer(s.K8S_STREAM, self.partition.consumer, seq=self.applied + 1)
        except Exception as err:  # servers before 2.14 have no reset; order is kept anyway (`_handle`)
            log.debug("decider: consumer reset unavailable (%s); relying on redelivery", err)

    async def _caught_up(self) -> bool:
        if isinstance(self._puller, Merger):  # the stream's last record may be another partition's
            return await self._puller.caught_up()
        if not self.partition.whole:  # a consumer of some records only (vcbus.bus.queueing)
            info = await self.js.consumer_info(s.K8S_STREAM, self.partition.consumer)
            return not info.num_pending and not info.num_ack_pending
        info = await self.js.stream_info(s.K8S_STREAM)
        return self.applied >= int(info.state.last_seq or 0)
