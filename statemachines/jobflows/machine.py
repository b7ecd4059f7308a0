"""The JobFlow machine, declared for `transitions` and compiled.

Volcano's jobflow controller (`pkg/controllers/jobflow/state/`) keeps the flow's phase in
`status.state.phase` and picks a state object by it (factory.go's NewState): `""` and Pending
share pendingState, then Running, Succeed, Terminating and Failed. Only Pending, Running and
Succeed act on a sync (SyncJobFlow: create the vcjobs whose dependencies are met, then write the
status with the phase the state's function decides); failedState and terminatingState do
nothing. Nothing in Volcano ever sets Terminating: it is declared and drawn, and unreachable.

`sync` is one sync that ran (its status counted), guarded by what the counts show, in the order
of Volcano's status functions:

- from New (no phase yet) or Pending (pending.go): `started` (a vcjob Running or Completed) and
  not `failed` -> Running; else `failed_or_terminated` -> Failed; else Pending;
- from Running (running.go): `all_completed` (as many Completed vcjobs as flows) -> Succeed;
  else `failed_or_terminated` -> Failed; else Running;
- from Succeed (succeed.go): the phase stays (the retain policy `delete` deletes the vcjobs).

`delete` (the JobFlow's DELETED record) ends in Deleted from any state.

As for the job, queue and CronJob machines, the `transitions.Machine` is the source of truth
(docs/statemachines/jobflow.md is drawn from it), compiled at import into
`GRAPH[(state, trigger)] -> [(dest, guards)]`; a test fires every trigger through both.
"""

from __future__ import annotations

from collections.abc import Callable

from msgspec import Struct
from transitions import Machine, MachineError

from statemachines.machinegraph import compile_graph, declare, fire_through

NEW = "New"  # no status.state.phase yet: Volcano's pendingState too
PENDING = "Pending"
RUNNING = "Running"
SUCCEED = "Succeed"
FAILED = "Failed"
TERMINATING = "Terminating"
DELETED = "Deleted"
STATES = (NEW, PENDING, RUNNING, SUCCEED, FAILED, TERMINATING, DELETED)
PHASES = {"": NEW, PENDING: PENDING, RUNNING: RUNNING, SUCCEED: SUCCEED, FAILED: FAILED, TERMINATING: TERMINATING}
SYNC = "sync"
DELETE = "delete"
TRIGGERS = (SYNC, DELETE)


class Counts(Struct, frozen=True):
    """A sync's status in numbers: vcjobs of the flow by phase, and the flows declared."""

    running: int = 0
    completed: int = 0
    failed: int = 0
    terminated: int = 0
    flows: int = 0


GUARDS: dict[str, Callable[[Counts], bool]] = {
    "started": lambda c: c.running > 0 or c.completed > 0,
    "failed": lambda c: c.failed > 0,
    "failed_or_terminated": lambda c: c.failed > 0 or c.terminated > 0,
    "all_completed": lambda c: c.completed == c.flows,
}

TRANSITIONS: list[dict] = [
    {"trigger": SYNC, "source": [NEW, PENDING], "dest": RUNNING, "conditions": "started", "unless": "failed"},
    {"trigger": SYNC, "source": [NEW, PENDING], "dest": FAILED, "conditions": "failed_or_terminated"},
    {"trigger": SYNC, "source": [NEW, PENDING], "dest": PENDING},
    {"trigger": SYNC, "source": RUNNING, "dest": SUCCEED, "conditions": "all_completed"},
    {"trigger": SYNC, "source": RUNNING, "dest": FAILED, "conditions": "failed_or_terminated"},
    {"trigger": SYNC, "source": RUNNING, "dest": RUNNING},
    {"trigger": SYNC, "source": SUCCEED, "dest": SUCCEED},
    {"trigger": DELETE, "source": list(STATES), "dest": DELETED},
]


class NoSync(ValueError):
    """A trigger the state does not take (a sync in Failed or Terminating: Volcano does nothing)."""


def build_machine(model: object = None, *, initial: str = NEW, cls: type = Machine) -> Machine:
    """Pass a model only for debugging or diagrams."""
    return declare(list(STATES), TRANSITIONS, initial, model, cls)


GRAPH = compile_graph(build_machine(), GUARDS)


def syncs(state: str) -> bool:
    """Whether a sync in `state` does anything (Volcano's Pending, Running and Succeed states)."""
    return (state, SYNC) in GRAPH


def fire(state: str, trigger: str, counts: Counts) -> str:
    """The state after `trigger`: the first transition whose guards hold; NoSync if none is declared."""
    options = GRAPH.get((state, trigger))
    if not options:
        raise NoSync(f"jobflow trigger {trigger!r} from {state!r}")
    for dest, guards in options:
        if all(fn(counts) == want for fn, want in guards):
            return dest
    raise AssertionError(f"no transition {trigger!r} from {state!r}")  # each source ends unguarded


def fire_with_transitions(state: str, trigger: str, counts: Counts) -> str:
    """`fire` through `transitions` itself (slow; for checking it)."""
    try:
        return fire_through(lambda model, at: build_machine(model, initial=at), GUARDS, state, trigger, counts)
    except MachineError as err:
        raise NoSync(f"jobflow trigger {trigger!r} from {state!r}") from err
