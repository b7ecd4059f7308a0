"""The decider's state on start: refolded from the log, or restored from a snapshot.

The state machines are a pure fold over the log, so the decider's state is a
function of the stream alone. On start the decider re-applies VCBUS_K8S from
sequence 1 up to its consumer's ack floor (the last record whose outputs are
stored) to a fresh engine, publishing nothing; from its newest valid snapshot
instead of sequence 1 when it has one (`vcbus.bus.statesnap`: saved every
`snapshot_every` records and on a clean stop, only when every record it
covers has its outputs stored). Records set aside as poison are skipped; one
that fails on the refold is set aside then and the fold starts over.

A mixin of `vcbus.bus.decider.Decider` (the attributes it uses are set there).
"""

from __future__ import annotations

import logging

import msgspec

from statemachines.engine import Engine
from vcbus.bus import poison as p
from vcbus.bus import statesnap
from vcbus.bus import subjects as s
from vcbus.bus.reading import read_stream, stream_seq

log = logging.getLogger("vcbus.decider")


class Rebuilding:
    """Rebuild, refold and snapshots of the decider's engine."""

    # ------------------------------------------------------------------ rebuild

    async def _rebuild(self, floor: int) -> None:
        self.poisoned |= await p.poisoned_sequences(self.js)
        self._retried |= await p.retried_sequences(self.js)
        if self.snapshots is not None:  # the newest valid snapshot, else a refold from sequence 1
            self._base = await self.snapshots.restore(kind=type(self.engine), hooks=self._hooks())
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
                        seq = stream_seq(msg)
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
            queue_controller=self.partition.queue_outputs,  # with N > 1 the queue role's (vcbus.bus.queueing)
            cronjobs=self.partition.count == 1,  # with N > 1 no decider sees every run's vcjob records
            jobflows=self.partition.count == 1,  # nor every vcjob record of a flow
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
                "queue_controller": e.queue_controller_on, "cronjobs": e.cronjob_controller is not None,
                "jobflows": e.jobflow_controller is not None,
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
