"""A `transitions.Machine` compiled to a lookup table, and a model to drive the machine itself.

The machines of statemachines/ are declared with `transitions`, then compiled once into
`{(source, trigger): [(dest, ((guard, wanted), ...)), ...]}` so a decision is a dict lookup and
a few guard calls. Each condition of the tables is named by a string, the key of the machine's
`guards` mapping. `GuardModel` gives `transitions` those guards as methods over one check, for
the tests and diagrams that run a trigger through the real machine to compare with the table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from transitions import Machine
from transitions.core import Condition

Guard = tuple[Callable[[Any], bool], bool]
Row = tuple[Any, tuple[Guard, ...]]  # (dest, guards); dest None only for an internal transition


def compile_graph(machine: Machine, guards: Mapping[str, Callable[[Any], bool]]) -> dict[tuple[str, str], list[Row]]:
    """Every (source, trigger) of `machine`: its transitions in order, each with its guards."""
    graph: dict[tuple[str, str], list[Row]] = {}
    for trigger, event in machine.events.items():
        for source, transitions in event.transitions.items():
            graph[(source, trigger)] = [(t.dest, tuple(_guard(guards, c) for c in t.conditions)) for t in transitions]
    return graph


def _guard(guards: Mapping[str, Callable[[Any], bool]], condition: Condition) -> Guard:
    """A transition's condition as (guard, the value it must have); the machines name their guards."""
    if not isinstance(condition.func, str):
        raise TypeError(f"a guard given as {condition.func!r}, not by name")
    return guards[condition.func], condition.target


class GuardModel:
    """A model for the real `transitions.Machine`: each guard a method over `check`."""

    # set on the model by `transitions.Machine` when it takes it (`add_model`): its state, and the
    # method that fires a trigger by name
    state: str
    trigger: Callable[[str], bool]

    def __init__(self, guards: Mapping[str, Callable[[Any], bool]], check: Any) -> None:
        self.check = check
        for name, fn in guards.items():
            setattr(self, name, lambda fn=fn: fn(self.check))


def declare(states: list[str], transitions: list[dict], initial: str, model: object = None,
            cls: type = Machine) -> Machine:
    """A machine as every machine of statemachines/ is declared: no automatic transitions, queued,
    an invalid trigger an error. Pass a model only to drive it (tests, diagrams)."""
    return cls(
        model=model,
        states=states,
        transitions=transitions,
        initial=initial,
        auto_transitions=False,
        queued=True,
        ignore_invalid_triggers=False,
    )


def fire_through(build: Callable[[object, str], Machine], guards: Mapping[str, Callable[[Any], bool]],
                 state: str, trigger: str, check: Any) -> str:
    """The state after `trigger` fired through the real `transitions.Machine` that `build(model, state)`
    makes (slow; the tests compare the compiled graph with it). MachineError when no transition is declared."""
    model = GuardModel(guards, check)
    machine = build(model, state)
    try:
        model.trigger(trigger)
    finally:
        machine.remove_model(model)
    return model.state
