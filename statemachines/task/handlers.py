"""The task machine inside the job controller: step a job's task and say so on the bus.

`step_task` runs after the engine has counted a pod change into the job's
`TaskBook` (statemachines/intake/pods.py) or after the job controller has
changed the task's pods (statemachines/job/sync.py); `resettle` after the
job appeared or its spec changed. A move of a task's phase becomes a
`TaskPhaseChanged` output (`task.phase.changed`).

`ctx` is what runs the job (the `Engine`): only what its `emit` uses (`out`, `seq`, `now`).
"""

from __future__ import annotations

from typing import Any

from statemachines import outputs as o
from statemachines.task.stepping import Move, step
from statemachines.task.stepping import resettle as resettle_book


def step_task(ctx: Any, entry: Any, task: str, trigger: str, pod: str = "") -> str | None:
    """Fire the task machine for `task` (its counts already updated); the Volcano event it raised."""
    if entry.job is None:
        return None  # no spec, no task phases (nor TaskCompleted/TaskFailed, as in Volcano's cache)
    book = entry.tasks
    job_spec = entry.job.spec
    spec = book.spec_of(job_spec, task)
    event, move = step(book, task, spec, trigger)
    if move is not None:
        emit_move(ctx, entry, move, pod)
    return event


def emit_move(ctx: Any, entry: Any, move: Move, pod: str = "") -> None:
    n = move.counts
    ctx.out.append(  # built by its keywords (`JobContext.emit`): no keyword dict packed and unpacked again
        o.TaskPhaseChanged(
            job=entry.key,
            seq=ctx.seq,
            time=ctx.now,
            task=move.task,
            from_phase=move.from_phase,
            to_phase=move.to_phase,
            trigger=move.trigger,
            pod=pod,
            cause=move.cause,
            replicas=move.replicas,
            min_available=move.min_available,
            pending=n.pending,
            running=n.running,
            succeeded=n.succeeded,
            failed=n.failed,
            unknown=n.unknown,
            restarts=n.restarts,
        )
    )


def resettle(ctx: Any, entry: Any) -> None:
    """The job's spec changed or the job appeared: every task's phase re-derived."""
    assert entry.job is not None
    for move in resettle_book(entry.tasks, entry.job.spec.tasks):
        emit_move(ctx, entry, move)
