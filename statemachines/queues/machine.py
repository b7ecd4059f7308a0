"""The queue state machine: Open, Closing, Closed, Unknown, declared for `transitions`, compiled.

Volcano's queue controller (`pkg/controllers/queue/state/*.go`) picks a state
object from `status.state` (`""` counts as Open) and, per action, calls one of
three queue functions with a closure that computes the new state:

- `FN_SYNC` (`syncQueue`): recount the queue's PodGroups, write the state if it
  changed, then align the queue with its parent (hierarchy);
- `FN_OPEN` (`openQueue`): check the parent lets it open, reopen the children it
  closed, write Open;
- `FN_CLOSE` (`closeQueue`): close the children too (never `root`), write Closed
  or Closing, record the `CloseQueue` event.

`HANDLERS[state][action]` says which function runs; the closures are the guarded
transitions below (trigger = the action: OpenQueue, CloseQueue, or SyncQueue for
every other action). The only guard is Volcano's `len(podGroupList) == 0`: a
queue whose PodGroups are all gone is Closed, otherwise Closing. Every trigger has
a transition in every state (a queue state object handles any action), so `fire`
never refuses; it returns the state after the closure (possibly the same).

As for the job machine, the `transitions.Machine` is the single source of truth
(docs/statemachines/queue.md is drawn from it) and is compiled at import into
`GRAPH[(state, trigger)] -> [(dest, guards)]`; a test fires every trigger both
ways and checks they agree.
"""

from __future__ import annotations

from collections.abc import Callable

from msgspec import Struct
from transitions import Machine, MachineError

from statemachines.machinegraph import GuardModel, compile_graph, declare
from statemachines.model.vocabulary import Action

OPEN = "Open"
CLOSING = "Closing"
CLOSED = "Closed"
UNKNOWN = "Unknown"
STATES = (OPEN, CLOSING, CLOSED, UNKNOWN)
CLOSED_OR_CLOSING = frozenset({CLOSED, CLOSING})

OPEN_QUEUE = Action.OPEN_QUEUE.value
CLOSE_QUEUE = Action.CLOSE_QUEUE.value
SYNC_QUEUE = Action.SYNC_QUEUE.value
TRIGGERS = (OPEN_QUEUE, CLOSE_QUEUE, SYNC_QUEUE)

FN_SYNC = "SyncQueue"  # the Go function each handler calls: syncQueue, openQueue, closeQueue
FN_OPEN = "OpenQueue"
FN_CLOSE = "CloseQueue"
DEFAULT = "*"


class Check(Struct):
    """What a guard sees: how many PodGroups the controller lists for the queue."""

    podgroups: int = 0


def no_podgroups(c: Check) -> bool:
    """Volcano's `len(podGroupList) == 0`."""
    return c.podgroups == 0


GUARDS: dict[str, Callable[[Check], bool]] = {"no_podgroups": no_podgroups}

# state -> action -> queue function (state/open.go, closing.go, closed.go, unknown.go)
HANDLERS: dict[str, dict[str, str]] = {
    OPEN: {OPEN_QUEUE: FN_SYNC, CLOSE_QUEUE: FN_CLOSE, DEFAULT: FN_SYNC},
    CLOSING: {OPEN_QUEUE: FN_OPEN, CLOSE_QUEUE: FN_SYNC, DEFAULT: FN_SYNC},
    CLOSED: {OPEN_QUEUE: FN_OPEN, CLOSE_QUEUE: FN_SYNC, DEFAULT: FN_SYNC},
    UNKNOWN: {OPEN_QUEUE: FN_OPEN, CLOSE_QUEUE: FN_CLOSE, DEFAULT: FN_SYNC},
}


def _closes(trigger: str, source: str) -> list[dict]:
    """Volcano's "Closed if no PodGroup is left, else Closing" closure."""
    return [
        {"trigger": trigger, "source": source, "dest": CLOSED, "conditions": "no_podgroups"},
        {"trigger": trigger, "source": source, "dest": CLOSING},
    ]


# The closures, state by state. A default SyncQueue keeps the state it was picked
# for (its `specState` is the same `status.state`), except Closing, which becomes
# Closed once its PodGroups are gone.
TRANSITIONS: list[dict] = [
    # state/open.go
    {"trigger": OPEN_QUEUE, "source": OPEN, "dest": OPEN},
    *_closes(CLOSE_QUEUE, OPEN),
    {"trigger": SYNC_QUEUE, "source": OPEN, "dest": OPEN},
    # state/closing.go
    {"trigger": OPEN_QUEUE, "source": CLOSING, "dest": OPEN},
    *_closes(CLOSE_QUEUE, CLOSING),
    *_closes(SYNC_QUEUE, CLOSING),
    # state/closed.go
    {"trigger": OPEN_QUEUE, "source": CLOSED, "dest": OPEN},
    {"trigger": CLOSE_QUEUE, "source": CLOSED, "dest": CLOSED},
    {"trigger": SYNC_QUEUE, "source": CLOSED, "dest": CLOSED},
    # state/unknown.go
    {"trigger": OPEN_QUEUE, "source": UNKNOWN, "dest": OPEN},
    *_closes(CLOSE_QUEUE, UNKNOWN),
    {"trigger": SYNC_QUEUE, "source": UNKNOWN, "dest": UNKNOWN},
]


def build_machine(model: object = None, *, initial: str = OPEN, cls: type = Machine) -> Machine:
    """The shared machine. Pass a model only for debugging or diagrams."""
    return declare(list(STATES), TRANSITIONS, initial, model, cls)


MACHINE = build_machine()
GRAPH = compile_graph(MACHINE, GUARDS)


class UnknownState(ValueError):
    """`status.state` is none of Volcano's (NewState returns nil: "state ... is invalid")."""


def known_state(state: str) -> str:
    """The state object Volcano picks for `status.state`: `""` is Open."""
    if state == "":
        return OPEN
    if state not in HANDLERS:
        raise UnknownState(state)
    return state


def trigger_of(action: str) -> str:
    """OpenQueue and CloseQueue are their own trigger; every other action is the default SyncQueue."""
    return action if action in (OPEN_QUEUE, CLOSE_QUEUE) else SYNC_QUEUE


def handling(state: str, action: str) -> str:
    """The queue function `action` calls in `state` (FN_SYNC, FN_OPEN or FN_CLOSE)."""
    table = HANDLERS.get(state) or HANDLERS[known_state(state)]  # known_state only for "" and the invalid
    return table.get(action) or table[DEFAULT]


def fire(state: str, trigger: str, check: Check) -> str:
    """The state the closure of `trigger` computes from `state`."""
    # known_state only for "" and the invalid; loops, not `all(...)` over a generator (one per
    # PodGroup record: the queue is synced on each)
    for dest, guards in GRAPH.get((state, trigger)) or GRAPH[(known_state(state), trigger)]:
        for fn, want in guards:
            if fn(check) != want:
                break
        else:
            return dest
    raise AssertionError(f"no transition {trigger!r} from {state!r}")  # every trigger ends unguarded


def fire_with_transitions(state: str, trigger: str, check: Check) -> str:
    """The same as `fire`, through `transitions` itself (slow; for checking `fire`)."""
    model = GuardModel(GUARDS, check)
    machine = build_machine(model, initial=known_state(state))
    try:
        model.trigger(trigger)
    except MachineError as err:
        raise AssertionError(f"transitions refused {trigger!r} from {state!r}") from err
    dest = model.state
    machine.remove_model(model)
    return dest
