"""One step of one task of a job: fire the task machine on the book's counts.

The engine calls `step` after a pod change of the task has been counted in
the job's `TaskBook` (and after a change of the job's spec, for every task).
It returns the Volcano event the transition raised (`TaskCompleted`,
`TaskFailed` or None) and, when the task's phase moved, a `Move` the engine
turns into a `task.phase.changed` event.
"""

from __future__ import annotations

from statemachines.model.objects import TaskSpec
from statemachines.task.counts import TaskBook, TaskCounts
from statemachines.task.machine import PODS_CHANGED, fire_why
from statemachines.task.phases import TaskCheck, TaskPhase, guard_text

_PENDING = TaskPhase.PENDING.value


class Move:
    """A task's phase moved: from, to, the trigger, the guards in words and the counts then."""

    __slots__ = ("task", "from_phase", "to_phase", "trigger", "cause", "replicas", "min_available", "counts")

    def __init__(self, task: str, from_phase: str, to_phase: str, trigger: str, cause: str,
                 replicas: int, min_available: int, counts: TaskCounts) -> None:
        self.task = task
        self.from_phase = from_phase
        self.to_phase = to_phase
        self.trigger = trigger
        self.cause = cause
        self.replicas = replicas
        self.min_available = min_available
        self.counts = counts


def check_of(spec: TaskSpec | None, counts: TaskCounts) -> TaskCheck:
    """A task that is not (or no longer) in the job's spec has 0 replicas: it never completes nor fails."""
    if spec is None:
        return TaskCheck(0, None, 0, counts)
    return TaskCheck(spec.replicas, spec.min_available, spec.max_retry, counts)


# (phase, trigger, replicas, minAvailable, maxRetry, running, succeeded, failed, restarts) -> fire_why's answer.
# A pure function of what the guards read, so remembering it changes nothing; it saves the
# guard calls on the hot path (one step per pod record). Bounded: cleared when full.
_MEMO: dict[tuple, tuple[str, str | None, tuple]] = {}
_MEMO_SIZE = 1 << 14


def step(book: TaskBook, task: str, spec: TaskSpec | None, trigger: str) -> tuple[str | None, Move | None]:
    """Fire `trigger` for `task`; (Volcano event raised or None, the phase move or None)."""
    counts = book.counts.get(task)
    if counts is None:
        counts = book.of(task)
    old = book.phases.get(task, _PENDING)
    if spec is None:
        key: tuple = (old, trigger, 0, None, 0, counts.running, counts.succeeded, counts.failed, counts.restarts)
    else:
        key = (old, trigger, spec.replicas, spec.min_available, spec.max_retry,
               counts.running, counts.succeeded, counts.failed, counts.restarts)
    hit = _MEMO.get(key)
    if hit is None:
        if len(_MEMO) >= _MEMO_SIZE:
            _MEMO.clear()
        hit = _MEMO[key] = fire_why(old, trigger, check_of(spec, counts))
    dest, event, guards = hit
    if dest == old:
        return event, None
    check = check_of(spec, counts)
    book.phases[task] = dest
    cause = "; ".join(guard_text(fn.__name__, want, check) for fn, want in guards) or "no other rule holds"
    return event, Move(task, old, dest, trigger, cause, check.replicas, check.task_min(), counts)


def resettle(book: TaskBook, tasks: list[TaskSpec]) -> list[Move]:
    """The job's spec changed (or the job appeared): re-derive every task's phase.

    Tasks of the spec in spec order, then tasks the book knows that the spec no
    longer has (by name)."""
    moves = []
    named = set()
    for spec in tasks:
        named.add(spec.name)
        if spec.name not in book.counts and spec.name not in book.phases:
            continue  # no pods yet and never moved: Pending, nothing to say
        _, move = step(book, spec.name, spec, PODS_CHANGED)
        if move is not None:
            moves.append(move)
    for name in sorted(set(book.counts) - named):
        _, move = step(book, name, None, PODS_CHANGED)
        if move is not None:
            moves.append(move)
    return moves
