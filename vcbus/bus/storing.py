"""How the decider stores outputs: pipelined flights, direct writes, and TIMER records.

**Pipelined.** The records decided since the last send go out as one flight
(`vcbus.bus.flights`): a batch's commands, then its events, as one atomic
batch per stream (`vcbus.bus.batching`: one durable write each). While the
server stores them the decider already decides the next batch, and whatever
else arrives meanwhile (up to `GATHER` batches, `vcbus.bus.decider`), which
is sent once they are stored (`depth`: a failed batch must never be overtaken
by the next one, or the streams would lose their order): the slower the
writes, the fuller each one. The records of a flight
are acked, in order, only after JetStream has acknowledged all their outputs
(and those of every flight before it).

**Direct.** Poison events and TIMER records are published and every ack
waited for, with retries (`Outbox.store`, vcbus.bus.direct); a record with more outputs than one
batch is stored batch by batch (`vcbus.bus.bigrecords`).

**Time.** The engine fires delayed actions (policies with `timeout`) when the
log's time passes their due time, exactly as `vcbus replay` does, so the bus
and a replay of the same log agree. When the log goes quiet past a due time,
the decider appends a `TIMER` record to VCBUS_K8S (msg id `timer:<id>`, time =
the due time) and fires the action when it reads that record back: the firing
is itself in the log, and replaying the stream gives the same decisions
(`DueTimers`).

Two parts of `vcbus.bus.decider.Decider`: the `Outbox` holds what was decided
and is not stored yet and does every write; `DueTimers` appends the TIMER
records. Neither reads the decider: what they need is given to them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from statemachines.timers.rules import Timer
from vcbus.bus import bigrecords, direct
from vcbus.bus import partitions as parts
from vcbus.bus import subjects as s
from vcbus.bus.batching import BatchWriter, Stored
from vcbus.bus.flights import Flight, restore
from vcbus.bus.publisher import Prepared, timer_message

log = logging.getLogger("vcbus.decider")

# A light load's reaction (commands offered ahead, vcbus.k8s.ahead): its flight is sent once the first
# command's apply is over, or after this many seconds (benchmarks/latency.py: the PATCH and DELETE of a
# kill took 9.4-11.0 ms with the flight held, 12.4-16.7 ms beside its stores; p50s of five runs each)
AHEAD_HOLD = 0.05

Offer = Callable[[list[Prepared], int], "asyncio.Future | None"]


class Counts(Protocol):
    """What the outbox counts (the decider's stats)."""

    outputs: int
    duplicates: int
    timers: int


class Outbox:
    """What the decider decided and has not stored yet, and every write it makes to the streams."""

    def __init__(self, js: JetStreamContext, nc: Client, counts: Counts, *, timeout: float, depth: int,
                 atomic: bool) -> None:
        self.js = js
        self.nc = nc
        self.counts = counts
        self.timeout = timeout
        # Decided batches queued unacked besides the one being sent. Whatever the depth, a batch's
        # commands (events) go out only once the batch before it has its commands (events) stored
        # (`send`), so a failed batch (a leader change, a timeout) is never overtaken by the next one.
        self.depth = max(1, depth)
        self.atomic = atomic  # False: outputs published message by message (the benchmark's comparison)
        self.writer: BatchWriter | None = None
        self.records: list[Msg] = []  # the batch being decided: records to ack
        self.commands: list[Prepared] = []
        self.events: list[Prepared] = []
        self.flights: list[Flight] = []  # sent, not yet stored-and-acked, in stream order
        self.careful_until = 0  # records up to here may have stored outputs: sent one by one
        self.sent_upto = 0  # the last record whose outputs were sent
        # Commands applied before they are stored (vcbus.k8s.ahead): the in-process actuator's
        # `offer`, and a VCBUS_CMDS sequence at or after this decider's last stored command (None:
        # not known; the offers wait for the next stored one)
        self.ahead: Offer | None = None
        # how long a flight whose commands were offered waits for the first one's apply before it is
        # sent (`send`); 0: sent at once, beside the apply
        self.ahead_hold = AHEAD_HOLD
        self.cmd_seq: int | None = None
        self.poke: Callable[[], None] | None = None  # called when a flight is stored (the puller's wake-up)

    # ------------------------------------------------------------------ lifecycle

    async def open(self) -> None:
        """The writer, atomic where VCBUS_JOBS allows it (before anything is stored: a rebuild may store)."""
        if self.writer is None:
            info = await self.js.stream_info(s.JOBS_STREAM)
            self.writer = BatchWriter(self.nc, atomic=self.atomic and bool(info.config.allow_atomic))

    async def resume(self, applied: int) -> None:
        """A new session: store what a failed one decided and did not confirm (again), before going on."""
        assert self.writer is not None
        if self.pending():  # decided by a failed session, not sent yet
            self.flights.append(Flight(self.records, self.commands + self.events, [], applied))
            self.records, self.commands, self.events = [], [], []
        if self.flights:
            # kept until stored: if this fails too (the server is still away), the next session
            # must try them again, or their records would be skipped with their outputs lost
            res = await restore(self.writer, self.flights, self.timeout)
            self.flights = []
            self._count(res)
        self.sent_upto = applied
        if self.ahead is not None:  # what an earlier run stored may not be applied yet: nothing goes ahead of it
            self.cmd_seq = int((await self.js.stream_info(s.CMDS_STREAM)).state.last_seq or 0)

    async def close(self) -> None:
        if self.writer is not None:
            await self.writer.close()

    def pending(self) -> bool:
        """Whether anything was decided since the last send."""
        return bool(self.records or self.commands or self.events)

    def idle(self) -> bool:
        """Nothing decided unsent and nothing in the air: every decided record has its outputs stored."""
        return not self.flights and not self.pending()

    # ------------------------------------------------------------------ the pipeline

    async def send(self, applied: int) -> None:
        """Send the outputs of the records decided since the last send (up to `applied`), as one flight.

        Records up to `careful_until` (delivered to a run that died before acking them) may have
        outputs stored already: an atomic batch holding one of them would be refused whole (and
        stored message by message only after the flights sent behind it), so such a flight goes
        message by message."""
        if not self.pending():
            self.sent_upto = applied
            return
        while len(self.flights) >= self.depth + 1:  # bound the queue (see `depth`)
            await self.complete(block=True)
        careful = self.sent_upto < self.careful_until
        if self.ahead is not None and self.commands and not careful:  # careful: may be stored and applied already
            await self.complete(block=False)
            if not self.flights and self.cmd_seq is not None:  # every command before these is stored
                first = self.ahead(self.commands, self.cmd_seq)  # the actuator of this process applies them now, if it may
                if first is not None and self.ahead_hold > 0:
                    # the reaction's first API call has the machine to itself: this flight's stores, their
                    # deliveries and the next records' decisions wait for it (a light load's reaction only:
                    # an offer is taken only when nothing is in the air and the actuator is idle)
                    await asyncio.wait((first,), timeout=self.ahead_hold)
        before = self.flights[-1] if self.flights else None
        self.sent_upto = applied
        records, commands, events = self.records, self.commands, self.events
        self.records, self.commands, self.events = [], [], []
        # queued before anything is sent: if sending fails half-way, the next session stores it all again
        flight = Flight(records, commands + events, [], applied)
        self.flights.append(flight)
        assert self.writer is not None
        # Per stream, a batch goes out once the batch before it in that stream is stored: a failed one
        # is never overtaken (the streams keep their order), and commands need not wait for events.
        if commands:
            if before is not None:
                await before.stored(before.commands, self.timeout)
            flight.commands = await self.writer.send(commands, atomic=not careful)
            flight.sent += flight.commands
        if events:
            if commands:
                await asyncio.sleep(0)  # let the client's flusher put the commands on the wire now
            if before is not None:
                await before.stored(before.events, self.timeout)
            flight.events = await self.writer.send(events, atomic=not careful)
            flight.sent += flight.events
        if self.poke is not None:
            flight.when_done(self.poke)

    async def complete(self, *, block: bool) -> None:
        """Ack the leading flights whose outputs are stored; with `block`, wait for the oldest first."""
        while self.flights and (block or self.flights[0].done()):
            res = await self.flights[0].complete(self.timeout)
            flight = self.flights.pop(0)
            self._count(res)
            for one in flight.commands:
                last = one.result.last_seq if one.result is not None else 0
                self.cmd_seq = max(self.cmd_seq or 0, last) if last else None
            block = False

    def would_wait(self) -> bool:
        """Whether `send` would first wait for the last flight: for its commands, when there are commands
        to send, else for its events (each stream waits for its own previous batch)."""
        if not self.flights:
            return False
        last = self.flights[-1]
        first = last.commands if self.commands else last.events
        return not all(fut.done() for one in first for _, fut in one.replies)

    async def drain(self, applied: int) -> None:
        """Send what was decided and wait until every flight is stored and acked."""
        await self.send(applied)
        while self.flights:
            await self.complete(block=True)

    def _count(self, res: Stored) -> None:
        self.counts.outputs += res.stored
        self.counts.duplicates += res.duplicates

    # ------------------------------------------------------------------ direct writes

    async def store_big(self, seq: int, split: bigrecords.Split, *, applied: int) -> None:
        """A record with more outputs than one batch (a 10,000-pod job): what was decided before it is
        stored and acked first, then its outputs in batches of at most `bigrecords.OUTPUT_BATCH`, each
        built (pods rendered) only once the one before is stored. Its record is acked with the next flight.
        Queued as a flight meanwhile: if the session fails part-way, the next one restores it."""
        await self.drain(applied)
        flight = Flight([], split, [], seq)
        self.flights.append(flight)
        careful = seq <= self.careful_until  # outputs may be stored already: message by message
        assert self.writer is not None
        res = await bigrecords.store(self.writer, split, atomic=not careful, timeout=self.timeout)
        self.cmd_seq = None  # not known: no command is applied ahead until the next stored one says
        self.flights.remove(flight)
        self._count(res)

    async def store(self, messages: list[Prepared], *, what: str) -> None:
        """Publish `messages` in order and wait for every ack, retried (vcbus.bus.direct)."""
        assert self.writer is not None
        await direct.store(self.writer, messages, who="decider", what=what, timeout=self.timeout, log=log)


class DueTimers:
    """TIMER records for the engine's timers due by the clock while the log is quiet."""

    def __init__(self, outbox: Outbox, clock: Callable[[], str], counts: Counts) -> None:
        self.outbox = outbox
        self.clock = clock
        self.counts = counts
        self.sent: set[str] = set()  # ids of the timers whose record was appended

    async def fire(self, pending: list[Timer], partitions: int) -> int:
        """Append a TIMER record for each of `pending` due by the clock and not appended yet."""
        if not pending:
            self.sent.clear()
            return 0
        now = self.clock()
        due = [t for t in pending if t.due <= now and t.id not in self.sent]
        if not due:
            return 0
        timers = [timer_message(t) for t in due]
        timers = [m._replace(subject=parts.route(m.subject, m.headers.get("Vcbus-Job"), partitions)) for m in timers]
        await self.outbox.store(timers, what=f"{len(due)} TIMER record(s)")
        self.sent.intersection_update(t.id for t in pending)
        self.sent.update(t.id for t in due)
        self.counts.timers += len(due)
        log.info("decider: fired %d timer(s) due by %s", len(due), now)
        return len(due)
