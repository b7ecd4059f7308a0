"""Generated documents are current: the state diagram is drawn from the machine."""

from __future__ import annotations

import pathlib
import re

from statemachines.job.diagram import document, mermaid
from statemachines.model.vocabulary import Phase

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_state_diagram_doc_is_current():
    checked_in = (ROOT / "docs" / "statemachines" / "job.md").read_text()
    assert checked_in == document(), "run: make docs"


def test_diagram_nodes_are_exactly_the_ten_phases():
    nodes = set(re.findall(r'state "(\w+)" as', mermaid()))
    assert nodes == {p.value for p in Phase}
    assert len(nodes) == 10


def test_queue_diagram_doc_is_current():
    from statemachines.queues.diagram import document as queue_document

    checked_in = (ROOT / "docs" / "statemachines" / "queue.md").read_text()
    assert checked_in == queue_document(), "run: make docs"


def test_queue_diagram_nodes_are_volcanos_four_states():
    from statemachines.queues.diagram import mermaid as queue_mermaid

    nodes = set(re.findall(r'state "(\w+)" as', queue_mermaid()))
    assert nodes == {"Open", "Closing", "Closed", "Unknown"}


def test_task_diagram_doc_is_current():
    from statemachines.task.diagram import document as task_document

    checked_in = (ROOT / "docs" / "statemachines" / "task.md").read_text()
    assert checked_in == task_document(), "run: make docs"


def test_task_diagram_nodes_are_the_four_task_phases():
    from statemachines.task.diagram import mermaid as task_mermaid
    from statemachines.task.phases import TaskPhase

    nodes = set(re.findall(r'state "(\w+)" as', task_mermaid()))
    assert nodes == {p.value for p in TaskPhase} == {"Pending", "Running", "Completed", "Failed"}


def test_asyncapi_document_is_current():
    from tools.asyncapi import render

    checked_in = (ROOT / "docs" / "asyncapi.yaml").read_text()
    assert checked_in == render(), "run: make docs"
