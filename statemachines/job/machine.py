"""The job state machine: one shared `transitions.Machine`, compiled into a lookup table.

The phase modules declare, as data, what each action does in their phase
(`HANDLERS`) and the guarded transitions of their status functions
(`TRANSITIONS`). `build_machine()` turns all the transitions into one
`transitions.Machine`, the single source of truth for the graph (diagrams in
docs/statemachines/ are drawn from it).

Building a `Machine` per job is far too slow (100k models take tens of
seconds), and per-job state is plain data anyway. So at import the shared
machine is compiled into `GRAPH[(phase, trigger)] -> [(dest, guards)]`, read
straight from `machine.events`, and `fire()` walks that list: the first
transition whose guards all hold wins, exactly as `transitions` would pick it.
A test fires every trigger both ways and checks they agree.
"""

from __future__ import annotations

from transitions import Machine, MachineError

from statemachines.job import aborted, aborting, completing, finished, pending, restarting, running, terminating
from statemachines.job.handling import DEFAULT, GUARDS, Check, Handling
from statemachines.machinegraph import Guard, GuardModel, compile_graph, declare
from statemachines.model.vocabulary import Action, Phase

PHASE_MODULES = (pending, running, restarting, aborting, aborted, completing, terminating)


class IllegalTransition(Exception):
    def __init__(self, phase: str, trigger: str) -> None:
        super().__init__(f"no transition {trigger!r} from phase {phase!r}")
        self.phase = phase
        self.trigger = trigger


class UnknownPhase(Exception):
    pass


def handlers() -> dict[str, dict[str, Handling]]:
    table: dict[str, dict[str, Handling]] = {m.PHASE.value: m.HANDLERS for m in PHASE_MODULES}
    for phase in finished.PHASES:
        table[phase.value] = finished.HANDLERS
    return table


def all_transitions() -> list[dict]:
    out: list[dict] = []
    for module in (*PHASE_MODULES, finished):
        for t in module.TRANSITIONS:
            out.append({k: (v.value if isinstance(v, Phase) else v) for k, v in t.items()})
    return out


def build_machine(model: object = None, *, initial: str = Phase.PENDING.value, cls: type = Machine) -> Machine:
    """The shared machine. Pass a model only for debugging or diagrams."""
    return declare([p.value for p in Phase], all_transitions(), initial, model, cls)


MACHINE = build_machine()
GRAPH = compile_graph(MACHINE, GUARDS)
HANDLERS = handlers()
# `handling` runs on every request. The tables keyed by plain str (a StrEnum member is slow to hash
# and compare, vocabulary.py), and each phase's SyncJob row apart: `resolve` answers most requests
# with the member itself, found here by identity, without hashing it
_BY_TEXT = {phase: {str(action): h for action, h in table.items()} for phase, table in HANDLERS.items()}
_PENDING_ROWS = _BY_TEXT[Phase.PENDING.value]
_SYNC_MEMBER = Action.SYNC_JOB
_SYNC_ROWS = {phase: table.get(Action.SYNC_JOB.value) or table[DEFAULT] for phase, table in _BY_TEXT.items()}
_SYNC_PENDING = _SYNC_ROWS[Phase.PENDING.value]


def handling(phase: str, action: str) -> Handling:
    """The row of `phase`'s table for `action` ("" and unknown phases use Pending's, as Volcano)."""
    if action is _SYNC_MEMBER:
        return _SYNC_ROWS.get(phase) or _SYNC_PENDING
    table = _BY_TEXT.get(phase) or _PENDING_ROWS
    return table.get(action) or table[DEFAULT]


def fire(phase: str, trigger: str, check: Check) -> str | None:
    """Destination of `trigger` from `phase`, or None when no transition applies."""
    rows = GRAPH.get((phase, trigger))
    if rows is None:
        raise IllegalTransition(phase, trigger)
    for dest, guards in rows:
        if all(fn(check) == want for fn, want in guards):
            return dest
    return None


def fire_why(phase: str, trigger: str, check: Check) -> tuple[str | None, tuple[Guard, ...]]:
    """`fire`, also returning the guards of the row that fired (the cause of the move)."""
    rows = GRAPH.get((phase, trigger))
    if rows is None:
        raise IllegalTransition(phase, trigger)
    for dest, guards in rows:  # `fire`'s loop, unrolled: this runs on every sync
        for fn, want in guards:
            if fn(check) != want:
                break
        else:
            return dest, guards
    return None, ()


def fire_with_transitions(phase: str, trigger: str, check: Check) -> str | None:
    """The same as `fire`, through `transitions` itself (slow; for checking `fire`)."""
    model = GuardModel(GUARDS, check)
    machine = build_machine(model, initial=phase)
    try:
        moved = model.trigger(trigger)
    except MachineError as err:
        raise IllegalTransition(phase, trigger) from err
    dest = model.state
    machine.remove_model(model)
    return dest if moved and dest != phase else None
