"""What a partition's decider made of a record, before the queue role folds it (N > 1 partitions).

With one partition, a record the decider sets aside as poison (`vcbus.bus.deciding`) is never
folded: not by the job controller, not by the queue controller, and its time never moves the
engine's clock (a record that failed half-way is rolled back by a refold without it). Those
decisions are the contract for N > 1 too. The queue role (`vcbus.bus.queueing`) folds the
PodGroup, Command and TIMER records of every partition, and partition K's decider may set one
of them aside after decoding it (its job controller failed on it, its outputs have a job key no
subject can be built from, ...): the role must then skip it too, or the record would still move
the queues' counts, states and clock.

So before the role folds partition K's record X it waits until K's decider has decided X. K
stores a record's poison event before it acks the record, so once K's ack floor is at X or past
it the poison events on VCBUS_JOBS tell: the role reads those stored since it last looked (one
`STREAM.MSG.GET` with `next_by_subj` on the poison subjects, usually answered "none") and skips
X if K set it aside. At a steady load one `CONSUMER.INFO` answers for a whole batch (K's floor is
usually ahead); a lone record waits the few milliseconds K takes to store its own outputs (queue
decisions come after the job's, never before). A partition whose decider does not run holds the
queue decisions back until it does; with `until_idle` (`vcbus up --once`) the role stops after
`ALONE` seconds without a decider for it, with a warning.

Shared records (Queues, PodGroups of no vcjob) are not waited for: with the queue controller off
(`Engine(queue_controller=False)`) a partition's decider sets one aside only when it cannot be
decoded, and the role decodes the same bytes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import msgspec
import nats.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from statemachines import outputs as o
from vcbus.bus import partitions as parts
from vcbus.bus import poison as p
from vcbus.bus import subjects as s
from vcbus.bus.ownership import control_subject

log = logging.getLogger("vcbus.decider")

ALONE = 5.0  # seconds (until_idle only) without a decider for a partition whose verdict is awaited
FIRST_WAIT = 0.0005  # seconds; doubled up to MAX_WAIT while a partition's decider has not got there
MAX_WAIT = 0.05


def partition_of(subject: str) -> int | None:
    """The partition a stored K8S record belongs to (its seventh token), None for a shared record."""
    tokens = subject.split(".")
    return int(tokens[6]) if len(tokens) == 7 and tokens[6].isdigit() else None


class Verdicts:
    """The partitions' deciders' verdicts, as far as the queue role needs them."""

    def __init__(
        self, nc: Client, js: JetStreamContext, *, count: int, poisoned: set[int], stop: asyncio.Event,
        until_idle: bool,
    ) -> None:
        self.nc = nc
        self.js = js
        self.count = count
        self.poisoned = poisoned  # the role's own set: sequences every fold must skip
        self.stop = stop
        self.until_idle = until_idle
        self.floors: dict[int, int] = {}  # partition -> its ack floor as last read
        self.cursor = 1  # VCBUS_JOBS sequence from which poison events were not read yet
        self.requests = 0  # JetStream API requests made (a figure for tests and benchmarks)

    async def start(self) -> None:
        """Before the role reads the poison events stored so far: read later ones from here on."""
        info = await self.js.stream_info(s.JOBS_STREAM)
        self.cursor = int(info.state.last_seq or 0) + 1

    def known(self, partition: int, seq: int) -> bool:
        """Whether `partition`'s verdict on `seq` is known already (its ack floor as last read is past it)."""
        return self.floors.get(partition, 0) >= seq

    async def decided(self, partition: int, seq: int) -> bool:
        """Wait until `partition`'s decider has decided record `seq` (whether it set it aside is then
        in `poisoned`). False: stop was set, or (until_idle) the partition has no decider."""
        if self.known(partition, seq):
            return True
        wait, alone_since = FIRST_WAIT, 0.0
        while True:
            if await self._floor(partition) >= seq:
                await self._read_poison()
                return True
            if self.stop.is_set():
                return False
            if self.until_idle:
                if await self._owned(partition):
                    alone_since = 0.0
                elif not alone_since:
                    alone_since = time.monotonic()
                elif time.monotonic() - alone_since > ALONE:
                    log.warning(
                        "decider (queues): partition %d has no decider and has not decided seq %d; stopping here",
                        partition, seq,
                    )
                    return False
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.stop.wait(), wait)
            wait = min(wait * 2, MAX_WAIT)

    async def _floor(self, partition: int) -> int:
        self.requests += 1
        try:
            info = await self.js.consumer_info(s.K8S_STREAM, parts.Partition(partition, self.count).consumer)
        except NotFoundError:  # no decider has started there yet
            return 0
        floor = int(info.ack_floor.stream_seq or 0) if info.ack_floor else 0
        self.floors[partition] = max(self.floors.get(partition, 0), floor)
        return self.floors[partition]

    async def _read_poison(self) -> None:
        """The poison events stored since the last look: the records the deciders set aside."""
        while True:
            self.requests += 1
            try:
                msg = await self.js.get_msg(s.JOBS_STREAM, seq=self.cursor, subject=p.POISON_FILTER, next=True)
            except NotFoundError:
                return
            self.cursor = int(msg.seq or self.cursor) + 1
            try:
                event = o.output_decoder.decode(msg.data or b"")
            except msgspec.DecodeError:
                continue
            if isinstance(event, o.RecordPoisoned) and event.component == "decider" and event.stream == s.K8S_STREAM:
                self.poisoned.add(event.sequence)

    async def _owned(self, partition: int) -> bool:
        """Whether a live decider answers for the partition (`vcbus.bus.ownership`)."""
        subject = control_subject(parts.Partition(partition, self.count).consumer)
        try:
            await self.nc.request(subject, b"", timeout=1.0)
        except nats.errors.NoRespondersError:
            return False
        except (nats.errors.TimeoutError, asyncio.TimeoutError):
            return True  # someone is there, busy
        return True
