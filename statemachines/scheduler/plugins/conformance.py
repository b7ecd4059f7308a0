"""conformance plugin (`pkg/scheduler/plugins/conformance/conformance.go`): never evict critical pods
(priorityClassName system-cluster-critical / system-node-critical) or pods in kube-system."""

from __future__ import annotations

from statemachines.scheduler.config import PluginOption
from statemachines.scheduler.framework import PERMIT, Session
from statemachines.scheduler.state import TaskState

NAME = "conformance"
CRITICAL = frozenset({"system-cluster-critical", "system-node-critical"})


def evictable(evictor: TaskState, evictees: list[TaskState]) -> tuple[list[TaskState], int]:
    return [t for t in evictees if t.fact.priority_class not in CRITICAL and t.namespace != "kube-system"], PERMIT


def open_plugin(ssn: Session, option: PluginOption) -> None:
    ssn.add("preemptable", NAME, evictable)
    ssn.add("reclaimable", NAME, evictable)
