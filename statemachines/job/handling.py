"""The vocabulary of the per-phase tables: what an action does to pods, and the guards.

Volcano's state handlers (`pkg/controllers/job/state/*.go`) each map an action
to one of three pod operations and a *status function*. Here the pod operation
is data (`Handling`) and the status function is a `transitions` trigger whose
guarded transitions are declared by the phase modules; `machine.py` builds one
shared machine from them.

Guards are pure predicates over a `Check`: the job's spec and the status that
the pod operation has just computed.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

from msgspec import Struct

from statemachines.model.objects import JobSpec
from statemachines.model.status import JobStatus


class PodOp(enum.StrEnum):
    SYNC = "SyncJob"  # reconcile pods (§6)
    KILL_JOB = "KillJob"  # version+1, kill pods outside the retain set, delete the PodGroup (§7)
    KILL_TARGET = "KillTarget"  # kill one task / pod / partition (§7)


class Retain(enum.StrEnum):
    NONE = "None"  # kill pods of every phase
    SOFT = "Soft"  # keep Succeeded and Failed pods


SOFT_PHASES = frozenset({"Succeeded", "Failed"})


class Handling(Struct, frozen=True):
    """What one action does in one phase."""

    op: PodOp
    trigger: str | None  # status function, a trigger of the shared machine; None: no status function
    retain: Retain = Retain.NONE
    retry: bool = False  # retryCount+1 (restart actions from Pending/Running, resume)


DEFAULT = "*"  # key of the row used for every action without a row of its own


class Check(Struct, gc=False):
    """What a guard sees: the job spec and the freshly computed status.

    `replicas` and `min_total` are the spec's totals (`total_replicas`, `total_task_min`),
    -1 until a guard first needs them: a status function evaluates up to seven guards on one
    Check (Running's, on every sync in Running), most of them on the total replicas, and
    summing the tasks once per Check instead of once per guard halves its cost. Not tracked by
    the garbage collector (`gc=False`): one is made on every sync and kill, and it refers to
    nothing that could refer back to it."""

    spec: JobSpec
    status: JobStatus
    replicas: int = -1
    min_total: int = -1


def total_replicas(spec: JobSpec) -> int:
    return sum(t.replicas for t in spec.tasks)


def task_min(task) -> int:
    return task.min_available if task.min_available is not None else task.replicas


def total_task_min(spec: JobSpec) -> int:
    return sum(task_min(t) for t in spec.tasks)


def _replicas(c: Check) -> int:
    """`total_replicas(c.spec)`, summed once per Check."""
    n = c.replicas
    if n < 0:
        n = c.replicas = total_replicas(c.spec)
    return n


# ---------------------------------------------------------------- guards


def min_available_reached(c: Check) -> bool:
    """Pending -> Running: spec.minAvailable <= running + succeeded + failed."""
    s = c.status
    return c.spec.min_available <= s.running + s.succeeded + s.failed


def scaled_to_zero(c: Check) -> bool:
    return _replicas(c) == 0


def min_success_reached(c: Check) -> bool:
    ms = c.spec.min_success
    return ms is not None and c.status.succeeded >= ms


def all_pods_finished(c: Check) -> bool:
    return c.status.succeeded + c.status.failed == _replicas(c)


def task_min_not_met(c: Check) -> bool:
    """Every pod finished, minAvailable >= ΣtaskMin, and a task with minAvailable fell short."""
    if not all_pods_finished(c):
        return False
    if c.min_total < 0:
        c.min_total = total_task_min(c.spec)
    if c.spec.min_available < c.min_total:
        return False
    counts = c.status.task_status_count or {}
    for task in c.spec.tasks:
        if task.min_available is None or task.name not in counts:
            continue
        if counts[task.name]["phase"].get("Succeeded", 0) < task.min_available:
            return True
    return False


def min_success_not_met(c: Check) -> bool:
    ms = c.spec.min_success
    return all_pods_finished(c) and ms is not None and c.status.succeeded < ms


def succeeded_reach_min_available(c: Check) -> bool:
    return all_pods_finished(c) and c.status.succeeded >= c.spec.min_available


def too_many_pending(c: Check) -> bool:
    """Running -> Pending: pending > R - spec.minAvailable."""
    return c.status.pending > _replicas(c) - c.spec.min_available


def retries_exhausted(c: Check) -> bool:
    return c.status.retry_count >= c.spec.max_retry


def enough_pods_left(c: Check) -> bool:
    """Restarting -> Pending: R - status.terminating >= status.minAvailable."""
    return _replicas(c) - c.status.terminating >= c.status.min_available


def no_live_pods(c: Check) -> bool:
    s = c.status
    return s.terminating == 0 and s.pending == 0 and s.running == 0


GUARDS: dict[str, Callable[[Check], bool]] = {
    f.__name__: f
    for f in (
        min_available_reached,
        scaled_to_zero,
        min_success_reached,
        all_pods_finished,
        task_min_not_met,
        min_success_not_met,
        succeeded_reach_min_available,
        too_many_pending,
        retries_exhausted,
        enough_pods_left,
        no_live_pods,
    )
}
