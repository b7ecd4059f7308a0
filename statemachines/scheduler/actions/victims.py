"""Eviction helpers shared by preempt and reclaim (`pkg/scheduler/util/scheduler_helper.go`
ValidateVictims, `framework/session_plugins.go` BuildVictimsPriorityQueue, reference §8.2)."""

from __future__ import annotations

from functools import cmp_to_key

from statemachines.scheduler.accounting import NodeState
from statemachines.scheduler.framework import Session
from statemachines.scheduler.resources import less_equal
from statemachines.scheduler.state import TaskState


def enough(preemptor: TaskState, node: NodeState, victims: list[TaskState]) -> bool:
    """`ValidateVictims`: FutureIdle plus the victims' requests covers the preemptor."""
    future = node.future_idle()
    for v in victims:
        future.add(v.req)
    return less_equal(preemptor.req, future)


def _cmp(a: tuple, b: tuple) -> int:
    return (a > b) - (a < b)


def victim_order(ssn: Session, victims: list[TaskState], preemptor: TaskState) -> list[TaskState]:
    """Victims in eviction order: reverse TaskOrder within a job, orphaned tasks first, reverse
    QueueOrder across queues, reverse JobOrder (plugins only) then reverse TaskOrder across jobs."""

    def task_cmp(a: TaskState, b: TaskState) -> int:
        return -_cmp(ssn.task_key(a), ssn.task_key(b))

    def job_cmp(lj, rj) -> int:
        plugins = len(ssn._job_order)
        return _cmp(ssn.job_key(lj)[:plugins], ssn.job_key(rj)[:plugins])

    def compare(a: TaskState, b: TaskState) -> int:
        if a.job is b.job:
            return task_cmp(a, b)
        lj, rj = a.job, b.job
        if lj is None or rj is None:
            if lj is None and rj is None:
                return task_cmp(a, b)
            return -1 if lj is None else 1
        if preemptor.job is not None and lj.queue != rj.queue:
            lq, rq = ssn.queues.get(lj.queue), ssn.queues.get(rj.queue)
            if lq is not None and rq is not None:
                return -_cmp(ssn.queue_key(lq), ssn.queue_key(rq))
        c = job_cmp(lj, rj)
        if c != 0:
            return -c
        return task_cmp(a, b)

    return sorted(victims, key=cmp_to_key(compare))


def unresolvable_filtered(ssn: Session, task: TaskState) -> list[NodeState]:
    """`FilterOutUnschedulableAndUnresolvableNodesForTask`."""
    job = task.job
    fe = job.fit_errors.get(task.uid) if job is not None else None
    if fe is None:
        return ssn.node_list
    skip = fe.unresolvable_nodes()
    if not skip:
        return ssn.node_list
    return [n for n in ssn.node_list if n.name not in skip]
