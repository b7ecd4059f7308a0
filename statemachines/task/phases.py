"""A task's phases, what a guard sees, and the guards.

A task's phase is derived from the pods the controller's cache holds for it
and from the task's spec, in this order (the first that holds wins):

- Completed: the task has replicas and at least that many pods Succeeded
  (Volcano's `TaskCompleted` test, `pkg/controllers/cache/cache.go`);
- Failed: the container restarts of its Running and Pending pods reached the
  task's maxRetry (Volcano's `TaskFailed` test: maxRetry 0 counts as 3, -1
  never fails, a task of 0 replicas never fails), or every replica finished
  and fewer than the task's minAvailable succeeded (the per-task test of
  `pkg/controllers/job/state/running.go`; the task's minAvailable defaults
  to its replicas, as the admission webhook sets it);
- Running: at least minAvailable of its pods (and at least one) are running
  or finished (the job's Pending -> Running rule, per task);
- Pending: anything else, including a task scaled to zero replicas.

Guards are pure predicates over a `TaskCheck`.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from statemachines.task.counts import TaskCounts


class TaskPhase(enum.StrEnum):
    PENDING = "Pending"  # fewer than minAvailable pods running or finished
    RUNNING = "Running"  # minAvailable pods running or finished
    COMPLETED = "Completed"  # every replica succeeded (Volcano's TaskCompleted)
    FAILED = "Failed"  # restarts reached maxRetry (Volcano's TaskFailed), or finished short of minAvailable


class TaskCheck:
    """What a guard sees: the task's spec figures and its pod counts."""

    __slots__ = ("replicas", "min_available", "max_retry", "counts")

    def __init__(self, replicas: int, min_available: int | None, max_retry: int, counts: TaskCounts) -> None:
        self.replicas = replicas
        self.min_available = min_available  # None: not set (then the replicas)
        self.max_retry = max_retry  # as in the spec: 0 means 3, -1 means no limit
        self.counts = counts

    def task_min(self) -> int:
        return self.min_available if self.min_available is not None else self.replicas

    def retry_limit(self) -> int:
        return self.max_retry or 3

    def __repr__(self) -> str:
        return (
            f"TaskCheck(replicas={self.replicas}, min_available={self.min_available}, "
            f"max_retry={self.max_retry}, counts={self.counts!r})"
        )


# ---------------------------------------------------------------- guards


def all_succeeded(c: TaskCheck) -> bool:
    """Volcano's TaskCompleted: replicas > 0 and succeeded pods >= replicas."""
    return c.replicas > 0 and c.counts.succeeded >= c.replicas


def retries_exhausted(c: TaskCheck) -> bool:
    """Volcano's TaskFailed: restarts of Running/Pending pods >= maxRetry (0 -> 3; -1 and 0 replicas: never)."""
    if c.replicas == 0 or c.max_retry == -1:
        return False
    return c.counts.restarts >= c.retry_limit()


def finished_short(c: TaskCheck) -> bool:
    """Every replica finished and fewer than the task's minAvailable succeeded."""
    n = c.counts
    return c.replicas > 0 and n.succeeded + n.failed >= c.replicas and n.succeeded < c.task_min()


def min_available_active(c: TaskCheck) -> bool:
    """At least minAvailable pods (and at least one) are Running, Succeeded or Failed."""
    n = c.counts
    return c.replicas > 0 and n.running + n.succeeded + n.failed >= max(c.task_min(), 1)


GUARDS: dict[str, Callable[[TaskCheck], bool]] = {
    f.__name__: f for f in (all_succeeded, retries_exhausted, finished_short, min_available_active)
}


def guard_text(name: str, want: bool, c: TaskCheck) -> str:
    """A guard that held, in words with its figures (`TaskPhaseChanged.cause`)."""
    n = c.counts
    # only the text asked for is formatted (one per guard of every phase move)
    if name == "all_succeeded":
        text = f"all replicas succeeded ({n.succeeded} of {c.replicas})"
    elif name == "retries_exhausted":
        text = f"container restarts reached maxRetry ({n.restarts} of {c.retry_limit()})"
    elif name == "finished_short":
        text = f"every replica finished, {n.succeeded} succeeded of minAvailable {c.task_min()}"
    elif name == "min_available_active":
        text = (
            f"minAvailable reached ({n.running} running, {n.succeeded} succeeded, "
            f"{n.failed} failed of minAvailable {c.task_min()})"
        )
    else:
        raise KeyError(name)
    return text if want else f"not {text}"
