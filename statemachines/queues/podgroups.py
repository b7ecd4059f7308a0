"""The PodGroups of each queue and their counts by phase: the queue controller's PodGroup lister.

Volcano's queue controller keeps, per queue, the PodGroups that name it
(`c.podGroups`) and counts them by `status.phase` when it syncs the queue
(`queue_controller_action.go` syncQueue), into its metrics, not into the Queue. Here the
counts are kept up to date on every PodGroup record instead, and `/metrics` reads them
when it is scraped (`QueueController.podgroup_counts`).
"""

from __future__ import annotations

COUNTED = ("Pending", "Running", "Inqueue", "Unknown", "Completed")
COUNT_FIELDS = ("pending", "running", "inqueue", "unknown", "completed")
_INDEX: dict[str | None, int] = {phase: i for i, phase in enumerate(COUNTED)}  # (None: a PodGroup without a phase)
ZERO = (0, 0, 0, 0, 0)


class QueuePodGroups:
    __slots__ = ("members", "counts", "phase", "queues")

    def __init__(self) -> None:
        self.members: dict[str, set[str]] = {}  # queue -> PodGroup keys (Volcano's c.podGroups)
        self.counts: dict[str, list[int]] = {}  # queue -> counts of its members by phase
        self.phase: dict[str, str] = {}  # PodGroup key -> status.phase (Volcano's lister)
        self.queues: dict[str, set[str]] = {}  # PodGroup key -> the queues listing it

    def forget_queue(self, queue: str) -> None:
        for key in self.members.pop(queue, ()):
            self.queues.get(key, set()).discard(queue)
        self.counts.pop(queue, None)


    def set_phase(self, key: str, phase: str) -> None:
        old = self.phase.get(key)
        self.phase[key] = phase
        listed = self.queues.get(key)
        if listed:  # (a PodGroup seen for the first time is in no queue yet)
            for queue in listed:
                self._count(queue, old, -1)
                self._count(queue, phase, +1)

    def add(self, queue: str, key: str) -> None:
        # `get`, not `setdefault(key, set())`: the default would be a new set on every PodGroup record
        listed = self.queues.get(key)
        if listed is None:
            listed = self.queues[key] = set()
        elif queue in listed:
            return
        listed.add(queue)
        members = self.members.get(queue)
        if members is None:
            members = self.members[queue] = set()
        members.add(key)
        self._count(queue, self.phase.get(key), +1)

    def forget(self, key: str) -> None:
        phase = self.phase.pop(key, None)
        for queue in self.queues.pop(key, ()):
            self.members.get(queue, set()).discard(key)
            self._count(queue, phase, -1)

    def _count(self, queue: str, phase: str | None, delta: int) -> None:
        i = _INDEX.get(phase)  # (None is no key of it either)
        if i is not None:
            counts = self.counts.get(queue)
            if counts is None:
                counts = self.counts[queue] = [0, 0, 0, 0, 0]
            counts[i] += delta

    def podgroups_of(self, queue: str) -> int:
        return len(self.members.get(queue, ()))

    def counts_of(self, queue: str) -> tuple[int, ...]:
        counts = self.counts.get(queue)
        return tuple(counts) if counts is not None else ZERO
