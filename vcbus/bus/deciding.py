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

The `Deciding` part of `vcbus.bus.decider.Decider`: it folds a record into
the decider's engine (`vcbus.bus.foldstate.FoldState`, shared with the
rebuild) and builds the messages; storing them, and setting a failed record
aside, are the decider's (vcbus.bus.storing, vcbus.bus.rebuilding).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from statemachines import outputs as o
from statemachines.model.objects import Job
from statemachines.model.records import Observed, decode
from vcbus.bus import bigrecords
from vcbus.bus import poison as p
from vcbus.bus import subjects as s
from vcbus.bus.foldstate import FoldState
from vcbus.bus.publisher import Prepared

log = logging.getLogger("vcbus.decider")


class BadTimes(Protocol):
    """What `Deciding` counts (the decider's stats)."""

    bad_times: int


class Deciding:
    """One record decided into (commands, events) messages, or into a `Failure`; poison and retried events."""

    component = "decider"  # who sets records aside (a poison event's `component`)

    def __init__(self, fold: FoldState, counts: BadTimes, *, source: str, publish_commands: bool,
                 clock: Callable[[], str]) -> None:
        self.fold = fold
        self.counts = counts
        self.source = source  # CloudEvents source of every output
        # Observe-only: nothing acts on the commands, so none is stored (a later full-mode
        # actuator must never carry out what was decided while only watching).
        self.publish_commands = publish_commands
        self.clock = clock

    def decide(self, seq: int, subject: str, data: bytes, *, prepare: bool) -> p.Failure | tuple | bigrecords.Split:
        """Fold one record; return its (commands, events) messages (None, None without
        `prepare`), or a `Failure`. Subjects are built in both modes, so a record whose
        outputs cannot be addressed fails the same way live and on a rebuild."""
        try:
            decoded = decode(data)
        except Exception as err:  # RecordError, RecursionError, anything: the engine is untouched
            return p.Failure(p.reason_of(err), p.job_of(subject), dirty=False)
        if isinstance(decoded, Observed) and decoded.notes:
            if prepare:
                self.counts.bad_times += 1
                log.warning("decider: record %s seq %d: %s", subject, seq, "; ".join(decoded.notes))
        raw = data if isinstance(decoded, Observed) and isinstance(decoded.object, Job) else None
        try:
            outs = self.fold.engine.apply(seq, decoded, raw=raw)
            return self.messages(seq, outs, prepare=prepare)
        except Exception as err:  # RecursionError included
            return p.Failure(p.reason_of(err), p.job_of(subject, decoded), dirty=True)

    def messages(self, seq: int, outs: list[o.Output], *, prepare: bool) -> tuple | bigrecords.Split:
        """(commands, events) messages, or a `Split` built lazily when the record has more outputs than
        one batch (vcbus.bus.bigrecords); (None, None) without `prepare` (subjects are built anyway)."""
        shared_elsewhere = not self.fold.partition.queue_outputs  # with N > 1 the queue role's (vcbus.bus.queueing)
        split = bigrecords.split(seq, outs, source=self.source, publish_commands=self.publish_commands,
                                 skip_cluster=shared_elsewhere, count=prepare)
        if not prepare:
            return (None, None)
        return split if split.big() else split.lists()

    def poison(self, seq: int, subject: str, reason: str, job: str) -> Prepared:
        event = p.poison_event(
            component=self.component, stream=s.K8S_STREAM, sequence=seq, subject=subject, reason=reason, job=job,
            now=self.clock(),
        )
        return p.poison_message(event, source=self.source)

    def retried(self, seq: int, original: int, subject: str, data: bytes) -> Prepared:
        """The event that record `seq` is a retry (`vcbus poison retry`) of the poisoned record `original`."""
        self.fold.retried.add(original)
        return p.retried_message(p.retried_event(seq, original, subject, data, now=self.clock()), source=self.source)
