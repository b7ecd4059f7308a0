"""Per-task pod counts of one job, kept up to date on every change of a cached pod.

The controller's cache (`statemachines.cache.JobEntry.pods`) holds a job's
pods by task. Every time a pod enters the cache, leaves it, or a cached pod is
refreshed from a watch record, the engine takes the pod's old contribution
out (`TaskBook.forget`) and puts its new one in (`TaskBook.count`), so a task
decision reads its counts in O(1) instead of walking the task's pods.

What is counted is what Volcano's cache tests read: every pod in the cache
for the task (our own created pods, which are Pending until the log shows
them, and pods being deleted included), by phase, and the container restarts
(init containers included) of the pods that are Running or Pending. Also the
pods being deleted or marked out of sync (`flagged`): when there are none,
and the task's pods are exactly its expected ones, syncJob takes its counts
from here instead of walking the pods (statemachines/job/sync.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from statemachines.model.objects import JobSpec, TaskSpec


class CachedPod(Protocol):
    task: str
    phase: str
    restarts: int
    deleting: bool
    out_of_sync: bool


_LIVE = ("Running", "Pending")


class TaskCounts:
    """One task's pods by phase ("Unknown" for any other phase), its live pods' restarts, its flagged pods."""

    __slots__ = ("pods", "pending", "running", "succeeded", "failed", "unknown", "restarts", "flagged")

    def __init__(self) -> None:
        self.pods = 0
        self.pending = 0
        self.running = 0
        self.succeeded = 0
        self.failed = 0
        self.unknown = 0
        self.restarts = 0
        self.flagged = 0  # pods being deleted or marked out of sync

    def add(self, pod: CachedPod, sign: int) -> None:
        self.add_values(pod.phase, pod.restarts, pod.deleting or pod.out_of_sync, sign)

    def add_values(self, phase: str, restarts: int, flagged: bool, sign: int) -> None:
        self.pods += sign
        if phase == "Running":
            self.running += sign
            self.restarts += sign * restarts
        elif phase == "Pending":
            self.pending += sign
            self.restarts += sign * restarts
        elif phase == "Succeeded":
            self.succeeded += sign
        elif phase == "Failed":
            self.failed += sign
        else:
            self.unknown += sign
        if flagged:
            self.flagged += sign

    def by_phase(self, pods: Mapping[str, CachedPod]) -> dict[str, int]:
        """syncJob's per-task counter: the non-zero phases, keyed in the order the task's pods
        (`pods`, the cache's dict of them) first show each phase, as a walk over them would."""
        n = self.pods
        if self.running == n:  # the common cases: every pod in one phase
            return {"Running": n} if n else {}
        if self.pending == n:
            return {"Pending": n}
        if self.succeeded == n:
            return {"Succeeded": n}
        classes = {}
        for name, n in (("Pending", self.pending), ("Running", self.running), ("Succeeded", self.succeeded),
                        ("Failed", self.failed), ("Unknown", self.unknown)):
            if n:
                classes[name] = n
        if len(classes) < 2:
            return classes
        order: dict[str, int] = {}
        for pod in pods.values():
            phase = pod.phase
            if phase not in classes:
                phase = "Unknown"
            if phase not in order:
                order[phase] = classes[phase]
                if len(order) == len(classes):
                    break
        return order

    def as_tuple(self) -> tuple[int, ...]:
        return (self.pods, self.pending, self.running, self.succeeded, self.failed, self.unknown, self.restarts,
                self.flagged)

    def __repr__(self) -> str:
        return (
            f"TaskCounts(pods={self.pods}, pending={self.pending}, running={self.running}, "
            f"succeeded={self.succeeded}, failed={self.failed}, unknown={self.unknown}, restarts={self.restarts}, "
            f"flagged={self.flagged})"
        )


def counts_of(pods: Iterable[CachedPod]) -> TaskCounts:
    """The counts of an iterable of cached pods, from scratch (tests check the book against it)."""
    counts = TaskCounts()
    for pod in pods:
        counts.add(pod, 1)
    return counts


class TaskBook:
    """One job's per-task counts and the task machine's phase of each task."""

    __slots__ = ("counts", "phases", "spec", "by_name", "epoch")

    def __init__(self) -> None:
        self.counts: dict[str, TaskCounts] = {}
        # +1 on every change of the counts, which every change of the job's cached pods goes
        # through (a pod in or out, a phase, restarts, a flag): syncJob's memo compares it
        self.epoch = 0
        self.phases: dict[str, str] = {}  # task -> TaskPhase value; absent: Pending (never moved)
        self.spec: object = None  # the job spec `by_name` was made from
        self.by_name: dict = {}  # task name -> TaskSpec

    def forget(self, pod: CachedPod) -> None:
        """Take `pod`'s contribution out (before it changes or leaves the cache)."""
        self.epoch += 1
        counts = self.counts.get(pod.task)
        if counts is not None:
            counts.add(pod, -1)

    def count(self, pod: CachedPod) -> None:
        """Put `pod`'s contribution in (after it entered the cache or changed)."""
        self.epoch += 1
        self.of(pod.task).add(pod, 1)

    def recount(self, pod: CachedPod, phase: str, restarts: int, flagged: bool) -> None:
        """`pod` changed in place from (phase, restarts, flagged): move its contribution."""
        self.epoch += 1
        counts = self.of(pod.task)
        counts.add_values(phase, restarts, flagged, -1)
        counts.add(pod, 1)

    def spec_of(self, spec: JobSpec, task: str) -> TaskSpec | None:
        """`task`'s TaskSpec in the job spec `spec` (the first of that name), or None."""
        if self.spec is not spec:
            by_name: dict = {}
            for t in spec.tasks:
                by_name.setdefault(t.name, t)
            self.spec, self.by_name = spec, by_name
        return self.by_name.get(task)

    def of(self, task: str) -> TaskCounts:
        counts = self.counts.get(task)
        if counts is None:
            counts = self.counts[task] = TaskCounts()
        return counts
