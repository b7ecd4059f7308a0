"""A job's delayed actions: scheduled by a resolution with a timeout, cancelled by Volcano's rules.

Each job keeps Volcano's registry (`JobEntry.timers`, one timer per pod name,
`""` for job-level events); the engine's `TimerHeap` orders them all by due
time. Scheduling and cancelling are outputs (`TimerScheduled`,
`TimerCancelled`); firing is the worker's (`statemachines/worker.py`).

`engine` is the `Engine` running the job: these functions use its record
(`seq`, `now`), its `emit` and its `timers` heap.
"""

from __future__ import annotations

from typing import Any

from statemachines import outputs as o
from statemachines.model.timefmt import add, go_duration
from statemachines.policies import Request, Resolution
from statemachines.timers.rules import RULE_A_EVENTS, Timer, rule_a_cancels, rule_b_cancels


def schedule(engine: Any, entry: Any, req: Request, res: Resolution) -> None:
    """Register `res.action` to run after `res.delay` (Volcano's delayed action)."""
    engine.emit(
        o.RecordEvent,
        entry,
        reason="ExecuteAction",
        message=f"Execute action {res.action} after {go_duration(res.delay)}",
    )
    existing = entry.timers.get(req.pod)
    if existing is not None and existing.action == res.action:
        return
    heap = engine.timers
    order = heap.next_order()
    timer = Timer(
        id=f"{engine.seq}.{order}",
        job=entry.key,
        key=req.pod,
        action=res.action,
        due=add(engine.now, res.delay),
        event=req.event,
        task=req.task,
        pod=req.pod,
        pod_uid=req.pod_uid,
        partition=req.partition,
        policy=res.policy,
        order=order,
    )
    entry.timers[req.pod] = timer  # a replaced timer is not cancelled: it still fires (QUIRK)
    heap.push(timer)
    engine.emit(
        o.TimerScheduled,
        entry,
        timer=timer.id,
        action=timer.action,
        due=timer.due,
        event=timer.event,
        task=timer.task,
        pod=timer.pod,
        pod_uid=timer.pod_uid,
        partition=timer.partition,
        policy=timer.policy,
    )


def cancel(engine: Any, entry: Any, timer: Timer, reason: str) -> None:
    if entry.timers.get(timer.key) is timer:
        del entry.timers[timer.key]
    if not timer.cancelled:
        timer.cancelled = True
        engine.timers.discard(timer)
        engine.emit(o.TimerCancelled, entry, timer=timer.id, reason=reason)


def cancel_all(engine: Any, entry: Any, reason: str) -> None:
    for timer in list(entry.timers.values()):
        cancel(engine, entry, timer, reason)


def rule_a(engine: Any, entry: Any, req: Request) -> None:
    """Rule A: a pod's Running/Failed/Evicted event cancels that pod's pending timer."""
    if req.event in RULE_A_EVENTS and req.source == "pod":
        timer = entry.timers.get(req.pod)
        if timer is not None and rule_a_cancels(timer, req.event, req.pod_uid):
            cancel(engine, entry, timer, f"{req.event} of pod {req.pod}")


def rule_b(engine: Any, entry: Any, action: str, *, task: str, pod: str, partition: str) -> None:
    """Rule B: an executed action cancels the job's timers of its own scope."""
    for timer in list(entry.timers.values()):
        if rule_b_cancels(timer, action, task=task, pod=pod, partition=partition):
            cancel(engine, entry, timer, f"{action} executed")
