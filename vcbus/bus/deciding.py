"""One record through the decider: decided into messages, or set aside as poison.

Each output's `Nats-Msg-Id` (and CloudEvents id) is `<K8S seq>:<index>`, so a
record decided again (after a crash) gives the same outputs with the same
ids, which JetStream drops as duplicates.

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

A mixin of `vcbus.bus.decider.Decider` (the attributes it uses are set there).
"""

from __future__ import annotations

import logging

from nats.aio.msg import Msg
from nats.js.errors import NotFoundError

from statemachines import outputs as o
from statemachines.model.objects import Job
from statemachines.model.records import Observed, decode
from vcbus.bus import bigrecords
from vcbus.bus import poison as p
from vcbus.bus import subjects as s
from vcbus.bus.publisher import Prepared
from vcbus.bus.reading import stream_seq

log = logging.getLogger("vcbus.decider")


class Deciding:
    """Deciding one record (live, or refolded without publishing) and the messages it makes."""

    async def _handle(self, msg: Msg) -> None:
        seq = stream_seq(msg)
        acked = not self.partition.shared(msg.subject)  # shared records come without acks (vcbus.bus.merging)
        if seq <= self.applied:
            if acked:
                self._records.append(msg)  # a redelivery of something already decided: ack with this batch
            return
        if self.partition.whole:
            while self.applied + 1 < seq:  # fill a gap from the stream itself: order is the fold's
                await self._decide_missing(self.applied + 1)
        await self._decide_live(seq, msg.subject, msg.data, msg.headers)
        if acked:
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
        retry_of = (headers or {}).get(p.RETRY_OF)
        if isinstance(result, bigrecords.Split):  # more outputs than one batch (vcbus.bus.bigrecords)
            if retry_of and retry_of.isdigit():
                result.events.extra.append(self._retried_message(seq, int(retry_of), subject, data))
            self.applied = seq
            self.stats.decided += 1
            await self._store_big(seq, result)
            return
        commands, events = result
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

    def _messages(self, seq: int, outs: list[o.Output], *, prepare: bool) -> "tuple | bigrecords.Split":
        """(commands, events) messages, or a `Split` built lazily when the record has more outputs than
        one batch (vcbus.bus.bigrecords); (None, None) without `prepare` (subjects are built anyway)."""
        shared_elsewhere = not self.partition.queue_outputs  # with N > 1 the queue role's (vcbus.bus.queueing)
        split = bigrecords.split(seq, outs, source=self.bus.settings.ce_source, publish_commands=self.publish_commands,
                                 skip_cluster=shared_elsewhere, count=prepare)
        if not prepare:
            return (None, None)
        return split if split.big() else split.lists()

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
