"""How the decider stores outputs: pipelined flights, direct writes, and TIMER records.

**Pipelined.** The records decided since the last send go out as one flight
(`vcbus.bus.flights`): a batch's commands, then its events, as one atomic
batch per stream (`vcbus.bus.batching`: one durable write each). While the
server stores them the decider already decides the next batch, and whatever
else arrives meanwhile (up to `GATHER` batches, `vcbus.bus.decider`), which
is sent once they are stored (`depth`: a failed batch must never be overtaken
by the next one, or the streams would lose their order): the slower the
writes, the fuller each one. The records of a flight
are acked, in order, only after JetStream has acknowledged all its outputs
(and those of every flight before it).

**Direct.** Poison events and TIMER records are published and every ack
waited for, with retries (`_store`, vcbus.bus.direct); a record with more outputs than one
batch is stored batch by batch (`vcbus.bus.bigrecords`).

**Time.** The engine fires delayed actions (policies with `timeout`) when the
log's time passes their due time, exactly as `vcbus replay` does, so the bus
and a replay of the same log agree. When the log goes quiet past a due time,
the decider appends a `TIMER` record to VCBUS_K8S (msg id `timer:<id>`, time =
the due time) and fires the action when it reads that record back: the firing
is itself in the log, and replaying the stream gives the same decisions.

A mixin of `vcbus.bus.decider.Decider` (the attributes it uses are set there).
"""

from __future__ import annotations

import asyncio
import logging

from vcbus.bus import bigrecords, direct
from vcbus.bus import partitions as parts
from vcbus.bus.flights import Flight
from vcbus.bus.publisher import Prepared, timer_message

log = logging.getLogger("vcbus.decider")


class Storing:
    """The decider's writes: flights of outputs, direct stores, TIMER records."""

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
        careful = self._sent_upto < self._careful_until
        if self.ahead is not None and self._commands and not careful:  # careful: may be stored and applied already
            await self._complete(block=False)
            if not self._flights and self.cmd_seq is not None:  # every command before these is stored
                first = self.ahead(self._commands, self.cmd_seq)  # the actuator of this process applies them now, if it may
                if first is not None and self.ahead_hold > 0:
                    # the reaction's first API call has the machine to itself: this flight's stores, their
                    # deliveries and the next records' decisions wait for it (a light load's reaction only:
                    # an offer is taken only when nothing is in the air and the actuator is idle)
                    await asyncio.wait((first,), timeout=self.ahead_hold)
        before = self._flights[-1] if self._flights else None
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
            flight = self._flights.pop(0)
            self._count(res)
            for one in flight.commands:
                last = one.result.last_seq if one.result is not None else 0
                self.cmd_seq = max(self.cmd_seq or 0, last) if last else None
            block = False

    def _count(self, res) -> None:  # noqa: ANN001
        self.stats.outputs += res.stored
        self.stats.duplicates += res.duplicates

    async def _drain(self) -> None:
        await self._send()
        while self._flights:
            await self._complete(block=True)

    async def _store_big(self, seq: int, split: bigrecords.Split) -> None:
        """A record with more outputs than one batch (a 10,000-pod job): what was decided before it is
        stored and acked first, then its outputs in batches of at most `bigrecords.OUTPUT_BATCH`, each
        built (pods rendered) only once the one before is stored. Its record is acked with the next flight.
        Queued as a flight meanwhile: if the session fails part-way, the next one restores it."""
        await self._drain()
        flight = Flight([], split, [], seq)
        self._flights.append(flight)
        careful = seq <= self._careful_until  # outputs may be stored already: message by message
        assert self._writer is not None
        res = await bigrecords.store(self._writer, split, atomic=not careful, timeout=self.bus.settings.publish_timeout)
        self.cmd_seq = None  # not known: no command is applied ahead until the next stored one says
        self._flights.remove(flight)
        self._count(res)

    # ------------------------------------------------------------------ direct writes

    async def _store(self, messages: list[Prepared], *, what: str) -> None:
        """Publish `messages` in order and wait for every ack, retried (vcbus.bus.direct)."""
        assert self._writer is not None
        await direct.store(self._writer, messages, who="decider", what=what,
                           timeout=self.bus.settings.publish_timeout, log=log)

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
