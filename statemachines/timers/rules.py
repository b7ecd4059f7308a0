"""Delayed actions (§5.2, §5.3) as scheduled events, so replay stays deterministic.

A policy with a `timeout` does not act at once: the decision is "fire action X
at time T" (`TimerScheduled`). The firing is itself an input: in a replayed
file it happens when the log's time passes T; on the bus a `TIMER` record is
appended to the log when the wall clock passes T, and the engine acts when it
reads that record. Either way, the same log gives the same decisions.

Volcano's registry rules are kept, quirks included: one entry per pod name
(`""` for job-level events); a second registration with the same action is
ignored; a different action replaces the entry but the replaced timer still
fires; a fired action runs against the current phase without re-checking
policies; rule A (pod events) and rule B (same-scope actions) cancel entries.
"""

from __future__ import annotations

from msgspec import Struct

from statemachines.model.vocabulary import INTERNAL_ACTIONS, Action, Event


class Timer(Struct):
    id: str
    job: str
    key: str  # registry key: the request's pod name, "" for job-level events
    action: str
    due: str
    event: str = ""
    task: str = ""
    pod: str = ""
    pod_uid: str = ""
    partition: str = ""
    policy: str = ""
    order: int = 0
    cancelled: bool = False


_SCOPES: dict[str, str] = {  # Action is a StrEnum: its members are the str keys
    Action.RESTART_TASK: "task",
    Action.RESTART_POD: "pod",
    Action.RESTART_PARTITION: "partition",
}


def scope(action: str) -> str:
    """Volcano's GetActionType: task, pod, partition, or job for everything else."""
    return _SCOPES.get(action, "job")


def rule_a_cancels(timer: Timer, event: str, pod_uid: str) -> bool:
    """Rule A: a pod's later Running/Failed/Evicted event cancels its pending timer."""
    if timer.event == Event.POD_PENDING and pod_uid == timer.pod_uid:
        return True
    return timer.event in (Event.POD_FAILED, Event.POD_EVICTED) and event == Event.POD_RUNNING


RULE_A_EVENTS = frozenset({Event.POD_RUNNING, Event.POD_FAILED, Event.POD_EVICTED})


def rule_b_cancels(timer: Timer, action: str, *, task: str, pod: str, partition: str) -> bool:
    """Rule B: an executed action cancels the registered timers of its own scope."""
    kind = scope(action)
    if scope(timer.action) != kind:
        return False
    if kind == "task":
        return timer.task == task
    if kind == "pod":
        return timer.pod == pod
    if kind == "partition":
        return timer.partition == partition
    return True


def cancels_on_execute(action: str) -> bool:
    return action not in INTERNAL_ACTIONS
