"""The task state machine: declared for `transitions`, compiled into a lookup table.

Three triggers, one per kind of pod change that Volcano's `updatePod`
(`pkg/controllers/job/job_controller_handler.go`) tells apart:

- `pod_succeeded`: a pod of the task moved to Succeeded. Volcano then asks
  its cache whether the task completed; here, the row into Completed raises
  `TaskCompleted`.
- `pod_updated`: a Running or Pending pod of the task changed without
  changing phase (typically its restart count). Volcano then asks whether the
  task failed; here, the rows guarded by `retries_exhausted` raise
  `TaskFailed`.
- `pods_changed`: anything else (a pod added, deleted, moved to another
  phase, created by the controller itself; the task's spec changed). It only
  re-derives the phase and raises nothing.

Every trigger ends in the phase its guards derive (`phases.py`), from any
phase: a restart kills a Completed task's pods and it is Pending again. The
Volcano events ride on the rows as `after` callbacks (`task_completed`,
`task_failed`), so they come from the machine's transitions and nowhere else.

As for the job machine, one shared `transitions.Machine` is built at import
and compiled into `GRAPH[(phase, trigger)] -> [(dest, guards, event)]`;
`fire()` walks it (the first row whose guards all hold wins, as
`transitions` picks) and a test checks both agree on every (phase, trigger).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from transitions import Machine, MachineError

from statemachines.machinegraph import declare
from statemachines.model.vocabulary import Event
from statemachines.task.phases import GUARDS, TaskCheck, TaskPhase

POD_SUCCEEDED = "pod_succeeded"
POD_UPDATED = "pod_updated"
PODS_CHANGED = "pods_changed"
TRIGGERS = (POD_SUCCEEDED, POD_UPDATED, PODS_CHANGED)

# `after` callbacks that raise Volcano's task events
EVENTS = {"task_completed": Event.TASK_COMPLETED, "task_failed": Event.TASK_FAILED}

_ANY = "*"


def _derive(trigger: str, *, skip: str = "") -> list[dict]:
    """The phase a task's counts give, in order of precedence (phases.py); `skip`: a guard already tried."""
    rows = [
        {"trigger": trigger, "source": _ANY, "dest": TaskPhase.COMPLETED.value, "conditions": "all_succeeded"},
        {"trigger": trigger, "source": _ANY, "dest": TaskPhase.FAILED.value, "conditions": "retries_exhausted"},
        {"trigger": trigger, "source": _ANY, "dest": TaskPhase.FAILED.value, "conditions": "finished_short"},
        {"trigger": trigger, "source": _ANY, "dest": TaskPhase.RUNNING.value, "conditions": "min_available_active"},
        {"trigger": trigger, "source": _ANY, "dest": TaskPhase.PENDING.value},
    ]
    return [r for r in rows if not skip or r.get("conditions") != skip]


TRANSITIONS: list[dict] = [
    # a pod succeeded: Volcano's TaskCompleted when every replica has
    {
        "trigger": POD_SUCCEEDED,
        "source": _ANY,
        "dest": TaskPhase.COMPLETED.value,
        "conditions": "all_succeeded",
        "after": "task_completed",
    },
    *_derive(POD_SUCCEEDED, skip="all_succeeded"),
    # a live pod changed in place: Volcano's TaskFailed when the restarts reached maxRetry
    {
        "trigger": POD_UPDATED,
        "source": _ANY,
        "dest": TaskPhase.COMPLETED.value,
        "conditions": ["all_succeeded", "retries_exhausted"],
        "after": "task_failed",
    },
    {
        "trigger": POD_UPDATED,
        "source": _ANY,
        "dest": TaskPhase.FAILED.value,
        "conditions": "retries_exhausted",
        "after": "task_failed",
    },
    *_derive(POD_UPDATED, skip="retries_exhausted"),
    *_derive(PODS_CHANGED),
]

STATES = [p.value for p in TaskPhase]
INITIAL = TaskPhase.PENDING.value


class IllegalTransition(Exception):
    def __init__(self, phase: str, trigger: str) -> None:
        super().__init__(f"no task transition {trigger!r} from phase {phase!r}")
        self.phase = phase
        self.trigger = trigger


def build_machine(model: object = None, *, initial: str = INITIAL, cls: type = Machine) -> Machine:
    """The shared machine. Pass a model only for debugging or diagrams."""
    return declare(STATES, TRANSITIONS, initial, model, cls)


Guard = tuple[Callable[[TaskCheck], bool], bool]
Row = tuple[str, tuple[Guard, ...], str | None]


def compile_graph(machine: Machine) -> dict[tuple[str, str], list[Row]]:
    graph: dict[tuple[str, str], list[Row]] = {}
    for trigger, event in machine.events.items():
        for source, transitions in event.transitions.items():
            rows = []
            for t in transitions:  # declared from TRANSITIONS: guards and callbacks by name, each with a dest
                guards = tuple((GUARDS[cast(str, c.func)], c.target) for c in t.conditions)
                raised = [EVENTS[cast(str, name)].value for name in t.after]  # plain str: compared and hashed on every pod
                rows.append((cast(str, t.dest), guards, raised[0] if raised else None))
            graph[(source, trigger)] = rows
    return graph


MACHINE = build_machine()
GRAPH = compile_graph(MACHINE)


def fire_why(phase: str, trigger: str, check: TaskCheck) -> tuple[str, str | None, tuple[Guard, ...]]:
    """(destination, Volcano event raised or None, the guards of the row that fired)."""
    rows = GRAPH.get((phase, trigger))
    if rows is None:
        raise IllegalTransition(phase, trigger)
    for dest, guards, event in rows:
        for fn, want in guards:
            if fn(check) != want:
                break
        else:
            return dest, event, guards
    raise IllegalTransition(phase, trigger)  # unreachable: every trigger ends in an unguarded row


def fire(phase: str, trigger: str, check: TaskCheck) -> tuple[str, str | None]:
    """(destination, Volcano event raised or None) of `trigger` from `phase`."""
    dest, event, _ = fire_why(phase, trigger, check)
    return dest, event


class DebugModel:
    """A model for driving the real `transitions.Machine` (tests only): records the events raised."""

    def __init__(self, check: TaskCheck) -> None:
        self.check = check
        self.raised: list[str] = []
        for name, fn in GUARDS.items():
            setattr(self, name, lambda fn=fn: fn(self.check))
        for name, event in EVENTS.items():
            setattr(self, name, lambda event=event: self.raised.append(event))


def fire_with_transitions(phase: str, trigger: str, check: TaskCheck) -> tuple[str, str | None]:
    """The same as `fire`, through `transitions` itself (slow; for checking `fire`)."""
    model = DebugModel(check)
    machine = build_machine(model, initial=phase)
    if trigger not in machine.events:
        machine.remove_model(model)
        raise IllegalTransition(phase, trigger)
    try:
        model.trigger(trigger)  # type: ignore[attr-defined]  # added to the model by transitions.Machine
    except MachineError as err:
        raise IllegalTransition(phase, trigger) from err
    dest = model.state  # type: ignore[attr-defined]  # the same
    machine.remove_model(model)
    assert len(model.raised) <= 1
    return dest, (model.raised[0] if model.raised else None)
