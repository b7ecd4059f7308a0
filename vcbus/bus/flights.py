"""A decided batch in flight: its records, to be acked once its outputs are stored.

The decider sends a batch's outputs (`vcbus.bus.batching`) and goes on
deciding; each sent batch is a `Flight` in a queue kept in stream order. A
flight completes when every one of its sends is acknowledged: its records are
acked then, in order, and never before the flights ahead of it (the ack floor
may only move past records whose outputs are stored).

If a flight fails (a timeout, a lost connection), the decider's session ends
with its flights still queued; the next session first stores their outputs
again message by message (`restore`: the same msg ids, so whatever had been
stored is dropped as a duplicate), then moves the consumer past them.
"""

from __future__ import annotations

from typing import Callable, Sequence

from nats.aio.msg import Msg

from vcbus.bus.batching import MAX_ATOMIC, BatchWriter, Sent, Stored
from vcbus.bus.publisher import Prepared


class Flight:
    """One batch: the records it decided (to ack) and its outputs on the wire."""

    __slots__ = ("records", "outputs", "sent", "last_seq", "commands", "events")

    def __init__(self, records: list[Msg], outputs: Sequence[Prepared], sent: list[Sent], last_seq: int) -> None:
        self.records = records
        self.outputs = outputs  # commands then events, in the order sent
        self.sent = sent
        self.last_seq = last_seq
        self.commands: list[Sent] = []  # the sends to VCBUS_CMDS (also in `sent`)
        self.events: list[Sent] = []  # the sends to VCBUS_JOBS (also in `sent`)

    def done(self) -> bool:
        return all(fut.done() for one in self.sent for _, fut in one.replies)

    def when_done(self, callback: Callable[[], None]) -> None:
        for one in self.sent:
            for _, fut in one.replies:
                fut.add_done_callback(lambda _f: callback())

    async def stored(self, sends: list[Sent], timeout: float) -> None:
        """Wait until these sends (one stream's) are stored; raises if one fails."""
        for one in sends:
            await one.wait(timeout)

    async def complete(self, timeout: float) -> Stored:
        """Wait until the outputs are stored, then ack the records in order."""
        stored = duplicates = 0
        for one in self.sent:
            res = await one.wait(timeout)
            stored += res.stored
            duplicates += res.duplicates
        for msg in self.records:
            await msg.ack()
        return Stored(stored, duplicates)


async def restore(writer: BatchWriter, flights: list[Flight], timeout: float) -> Stored:
    """Store the outputs of flights a failed session left unconfirmed, in order, message by message."""
    stored = duplicates = 0
    for flight in flights:
        for one in flight.sent:
            writer.forget(one.replies)
        # in chunks: a big record's outputs are built (pods rendered) only as they go (vcbus.bus.bigrecords)
        for start in range(0, len(flight.outputs), MAX_ATOMIC):
            res = await writer.one_by_one(flight.outputs[start:start + MAX_ATOMIC], timeout)
            stored += res.stored
            duplicates += res.duplicates
    return Stored(stored, duplicates)
