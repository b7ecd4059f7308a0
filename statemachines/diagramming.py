"""Mermaid drawings of a `transitions` machine, shared by the job, task and queue diagrams.

Each machine's `diagram.py` writes its page in docs/statemachines/ (`make docs`); the
drawing itself is the same for all of them: the declared states and transitions, no
automatic transitions, guards shown on the arrows.
"""

from __future__ import annotations

from typing import Any

from transitions.extensions import GraphMachine


class _Model:
    pass


def draw_mermaid(states: list[str], transitions: list[dict[str, Any]], initial: str, title: str) -> str:
    model = _Model()
    GraphMachine(
        model=model,
        states=states,
        transitions=transitions,
        initial=initial,
        auto_transitions=False,
        graph_engine="mermaid",
        show_conditions=True,
        title=title,
    )
    return model.get_graph().draw(None)  # type: ignore[attr-defined]  # added to the model by the GraphMachine
