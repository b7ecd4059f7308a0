"""The decider's state on start: refolded from the log, or restored from a snapshot.

The state machines are a pure fold over the log, so the decider's state is a
function of the stream alone. On start the decider re-applies VCBUS_K8S from
sequence 1 up to its consumer's ack floor (the last record whose outputs are
stored) to a fresh engine, publishing nothing; from its newest valid snapshot
instead of sequence 1 when it has one (`vcbus.bus.statesnap`: saved every
`snapshot_every` records and on a clean stop, only when every record it
covers has its outputs stored). Records set aside as poison are skipped; one
that fails on the refold is set aside then and the fold starts over.

The `Rebuilder` part of `vcbus.bus.decider.Decider`: it replaces the fold's
engine (`vcbus.bus.foldstate.FoldState`) with a refolded or restored one,
deciding each record through the decider's `Deciding` without publishing,
storing through its `Outbox` only the poison events it finds; and it saves
the snapshots.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

import msgspec
from nats.js import JetStreamContext

from statemachines.engine import Engine
from vcbus.bus import partitions as parts
from vcbus.bus import poison as p
from vcbus.bus import statesnap
from vcbus.bus import subjects as s
from vcbus.bus.starting import hold, started
from vcbus.bus.deciding import Deciding
from vcbus.bus.foldstate import FoldState
from vcbus.bus.reading import read_stream, stream_seq
from vcbus.bus.storing import Outbox

log = logging.getLogger("vcbus.decider")


class Counts(Protocol):
    """What the rebuild counts (the decider's stats)."""

    rebuilt: int
    restored: int
    rollbacks: int
    snapshots: int


def fresh_engine(like: Engine, partition: parts.Partition) -> Engine:
    """A new engine built as `like` was, for a decider of `partition`."""
    return Engine(
        explain=like.explain,
        timers=like.timer_mode,
        strict_queues=like.strict_queues,
        render_pod=like._render_pod,
        render_podgroup=like._render_podgroup,
        max_pods=like.max_pods,
        queue_controller=partition.queue_outputs,  # with N > 1 the queue role's (vcbus.bus.queueing)
        cronjobs=partition.count == 1,  # with N > 1 no decider sees every run's vcjob records
        jobflows=partition.count == 1,  # nor every vcjob record of a flow
    )


class Rebuilder:
    """Rebuild, refold and snapshots of the decider's engine."""

    def __init__(self, js: JetStreamContext, fold: FoldState, deciding: Deciding, outbox: Outbox, counts: Counts,
                 *, fresh: Callable[[], Engine], snapshot_every: int) -> None:
        self.js = js
        self.fold = fold
        self.deciding = deciding
        self.outbox = outbox
        self.counts = counts
        self.fresh = fresh  # a new engine for the fold (the decider's `_fresh_engine`)
        self.snapshot_every = snapshot_every  # records between snapshots (0: none)
        self.snapshots: statesnap.Store | None = None
        self.base: statesnap.Restored | None = None  # the newest snapshot: where a refold starts
        self.starts: dict[str, str] = {}  # controllers the log starts late (vcbus.bus.starting): kind -> due

    # ------------------------------------------------------------------ rebuild

    async def rebuild(self, floor: int) -> None:
        fold = self.fold
        fold.poisoned |= await p.poisoned_sequences(self.js)
        fold.retried |= await p.retried_sequences(self.js)
        if fold.engine.cronjob_controller is not None or fold.engine.jobflow_controller is not None:
            self.starts = await started(self.js)
        if self.snapshots is not None:  # the newest valid snapshot, else a refold from sequence 1
            self.base = await self.snapshots.restore(kind=type(fold.engine), hooks=self.hooks())
            self.counts.restored = self.base.seq if self.base is not None else 0
        if self.base is None:  # the engine built fresh: its controllers held as the refold's are
            hold(fold.engine, self.starts)
        upto = max(floor, self.counts.restored)  # a snapshot past the floor: its records' outputs are stored
        if upto <= 0:
            return
        found = await self.refold(upto)
        self.counts.rebuilt = fold.applied - self.counts.restored
        fold.applied = max(fold.applied, floor)
        # Records that failed but have no poison event (set aside before poison events existed,
        # or a crash in between): record them now (same msg ids, so at most once).
        for seq, subject, reason, job in found:
            await self.outbox.store([self.deciding.poison(seq, subject, reason, job)],
                                    what=f"poison event of record {seq}")

    async def refold(self, upto: int) -> list[tuple[int, str, str, str]]:
        """A fresh engine folded from sequence 1 (from the newest snapshot, `base`, when it
        covers at most `upto`) to `upto`, skipping the poisoned records.

        A record that fails and is not known as poisoned yet is added to them and the
        fold starts over (its failure may have left the engine half-applied). Returns
        those newly found (seq, subject, reason, job)."""
        fold = self.fold
        found: list[tuple[int, str, str, str]] = []
        while True:
            base = self.base if self.base is not None and self.base.seq <= upto else None
            if base is None:
                fold.engine = self.fresh()
                hold(fold.engine, self.starts)  # a controller the log starts late (vcbus.bus.starting)
            else:
                fold.engine = self._snapshot_engine(base)
            fold.applied = 0 if base is None else base.seq
            failed = None
            batches = read_stream(
                self.js, s.K8S_STREAM, start_seq=fold.applied + 1, end_seq=upto, batch=512,
                filters=fold.partition.filters,
            )
            try:
                async for batch in batches:
                    for msg in batch:
                        seq = stream_seq(msg)
                        if seq not in fold.poisoned and fold.partition.mine(msg.subject):
                            result = self.deciding.decide(seq, msg.subject, msg.data, prepare=False)
                            if isinstance(result, p.Failure):
                                if not result.dirty:  # failed before the engine saw it: no restart
                                    fold.poisoned.add(seq)
                                    found.append((seq, msg.subject, result.reason, result.job))
                                else:
                                    failed = (seq, msg.subject, result.reason, result.job)
                                    break
                        fold.applied = seq
                    if failed is not None:
                        break
            finally:
                await batches.aclose()
            if failed is None:
                return found
            log.warning("decider: record seq %d fails on refold (%s); set aside", failed[0], failed[2])
            fold.poisoned.add(failed[0])
            found.append(failed)
            self.counts.rollbacks += 1

    # ------------------------------------------------------------------ snapshots (vcbus.bus.statesnap)

    def open_snapshots(self) -> None:
        """The snapshot store of the fold's partition, when snapshots are on (once its partition is known)."""
        if self.snapshots is None and self.snapshot_every:
            self.snapshots = statesnap.Store(
                self.js, owner=self.fold.partition.consumer, stream=s.K8S_STREAM, config=self._snapshot_config()
            )

    def snapshot_due(self) -> bool:
        return self.snapshots is not None and self.snapshots.due(self.fold.applied, self.snapshot_every)

    def hooks(self) -> dict:
        """What the engine refers to but a snapshot does not hold: re-attached from this process."""
        engine = self.fold.engine
        return {"render_pod": engine._render_pod, "render_podgroup": engine._render_podgroup}

    def _snapshot_config(self) -> str:
        """What a snapshot's engine must have been built with to be this decider's (else it is ignored)."""
        e, partition = self.fold.engine, self.fold.partition

        def named(f: object) -> str | None:
            return None if f is None else f"{getattr(f, '__module__', '?')}.{getattr(f, '__qualname__', '?')}"

        return msgspec.json.encode(
            {
                "explain": e.explain, "timers": e.timer_mode, "strict_queues": e.strict_queues, "max_pods": e.max_pods,
                "queue_controller": e.queue_controller_on, "cronjobs": e.cronjob_controller is not None,
                "jobflows": e.jobflow_controller is not None,
                "render_pod": named(e._render_pod), "render_podgroup": named(e._render_podgroup),
                "partition": partition.name, "partitions": partition.count,
            }
        ).decode()

    def _snapshot_engine(self, base: statesnap.Restored) -> Engine:
        return statesnap.load_payload(base.payload, hooks=self.hooks())

    async def snapshot(self, *, stopping: bool = False) -> None:
        """Save the engine as covering `applied`, only when every record up to it has its outputs
        stored (no flight, nothing decided unsent): a restart from it repeats and loses nothing.
        `stopping`: only when it covers more than the last one saved (a clean stop: the next start folds nothing)."""
        if self.snapshots is None or not self.outbox.idle():
            return
        if stopping and self.fold.applied <= self.snapshots.saved_seq:
            return
        saved = await self.snapshots.save(self.fold.applied, self.fold.engine, hooks=self.hooks())
        if saved is not None:
            self.base = saved
            self.counts.snapshots += 1
