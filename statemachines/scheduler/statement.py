"""Statements: ordered, undoable operations on the session (`pkg/scheduler/framework/statement.go`, §2.8).

Each operation applies to the session at once. `commit()` makes allocations binds (task ->
Binding, a BindPod later) and evictions real (an EvictPod later); pipelines persist nothing.
`discard()` undoes in reverse order and stamps each task's `last_tx` (status, node,
eviction occurred), which drives the gang message and the pod's `Schedulable` reason.
"""

from __future__ import annotations

from statemachines.scheduler.accounting import NodeState
from statemachines.scheduler.framework import Session
from statemachines.scheduler.model import ALLOCATED, BINDING, PENDING, PIPELINED, RELEASING, RUNNING
from statemachines.scheduler.state import TaskState

EVICT, PIPELINE, ALLOCATE = "evict", "pipeline", "allocate"


def allocate(ssn: Session, task: TaskState, node: NodeState) -> None:
    """Task -> Allocated on `node` (the in-session part of `Statement.Allocate`)."""
    job = task.job
    if job is not None:
        job.set_status(task, ALLOCATED)
    else:
        task.status = ALLOCATED
    task.node = node.name
    node.add_task(task)
    node.pod_added(task)
    ssn.fire_allocate(task)


def unallocate(ssn: Session, task: TaskState) -> None:
    node = ssn.nodes.get(task.node)
    status = task.status
    if task.job is not None:
        task.job.set_status(task, PENDING)
    else:
        task.status = PENDING
    if node is not None:
        node.remove_task(task, status)
        node.pod_removed(task)
    ssn.fire_deallocate(task)
    task.node = ""


def pipeline(ssn: Session, task: TaskState, node: NodeState, evicted: bool) -> None:
    job = task.job
    if job is not None:
        job.set_status(task, PIPELINED)
    else:
        task.status = PIPELINED
    task.node = node.name
    task.evicted = evicted
    node.add_task(task)
    node.pod_added(task)
    ssn.fire_allocate(task)


def unpipeline(ssn: Session, task: TaskState) -> None:
    unallocate(ssn, task)


def evict(ssn: Session, task: TaskState) -> None:
    """Task -> Releasing (its node keeps it, as releasing); DeallocateFunc fires."""
    node = ssn.nodes.get(task.node)
    old = task.status
    if task.job is not None:
        task.job.set_status(task, RELEASING)
    else:
        task.status = RELEASING
    if node is not None:
        node.remove_task(task, old)
        node.add_task(task)
        node.pod_removed(task)
    ssn.fire_deallocate(task)


def unevict(ssn: Session, task: TaskState) -> None:
    node = ssn.nodes.get(task.node)
    if task.job is not None:
        task.job.set_status(task, RUNNING)
    else:
        task.status = RUNNING
    if node is not None:
        node.remove_task(task, RELEASING)
        node.add_task(task)
        node.pod_added(task)
    ssn.fire_allocate(task)


class Statement:
    __slots__ = ("ssn", "ops")

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.ops: list[tuple[str, TaskState, str, str]] = []  # (op, task, action, preemptor)

    def allocate(self, task: TaskState, node: NodeState, action: str = "allocate") -> None:
        allocate(self.ssn, task, node)
        self.ops.append((ALLOCATE, task, action, ""))

    def pipeline(self, task: TaskState, node: NodeState, evicted: bool = False) -> None:
        pipeline(self.ssn, task, node, evicted)
        self.ops.append((PIPELINE, task, "", ""))

    def evict(self, task: TaskState, action: str, preemptor: str) -> None:
        evict(self.ssn, task)
        self.ops.append((EVICT, task, action, preemptor))

    def merge(self, other: Statement) -> None:
        self.ops.extend(other.ops)
        other.ops = []

    def discard(self) -> None:
        for op, task, _, _ in reversed(self.ops):
            task.last_tx = (task.status, task.node, task.evicted)
            if op == EVICT:
                unevict(self.ssn, task)
            elif op == PIPELINE:
                unpipeline(self.ssn, task)
            else:
                unallocate(self.ssn, task)
        self.ops = []

    def commit(self) -> None:
        ssn = self.ssn
        for op, task, action, preemptor in self.ops:
            task.last_tx = None
            if op == EVICT:
                ssn.evictions.append((task, action, preemptor))
                ssn.committed.append(("evict", task, action, preemptor))
            elif op == ALLOCATE:
                if task.job is not None:
                    task.job.set_status(task, BINDING)
                else:
                    task.status = BINDING
                ssn.binds.append((task, action))
                ssn.committed.append(("bind", task, action, ""))
        self.ops = []
