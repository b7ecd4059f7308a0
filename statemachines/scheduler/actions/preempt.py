"""preempt action (`pkg/scheduler/actions/preempt/preempt.go`, reference §8.2): starving jobs evict
lower-priority tasks of their own queue (phase A, between jobs), then of themselves (phase B).

Per preemptor task: candidate nodes are those not UnschedulableAndUnresolvable for it, tried
best score first; on each, the Preemptable vote picks victims (Bound/Running, preemptable,
same queue, other job), which are evicted in victim order until the preemptor fits
(Allocatable, FutureIdle, predicates); then the preemptor is pipelined there.
"""

from __future__ import annotations

from statemachines.scheduler.accounting import NodeState, QueueState
from statemachines.scheduler.actions.allocate import ERROR_CACHE_KEY
from statemachines.scheduler.actions.heap import KeyHeap
from statemachines.scheduler.actions.placement import Search, fits_future, score_nodes
from statemachines.scheduler.actions.victims import enough, unresolvable_filtered, victim_order
from statemachines.scheduler.config import arg_bool
from statemachines.scheduler.fiterrors import NODE_POD_NUMBER_EXCEEDED, UNSCHEDULABLE
from statemachines.scheduler.framework import Session
from statemachines.scheduler.model import PENDING, PREEMPTABLE_STATUS
from statemachines.scheduler.resources import Res
from statemachines.scheduler.state import JobState, TaskState
from statemachines.scheduler.statement import Statement


def execute(ssn: Session) -> None:
    cache_enabled = arg_bool(ssn.config.action_arguments("preempt"), ERROR_CACHE_KEY, True)
    preemptors: dict[str, KeyHeap[JobState]] = {}
    tasks_of: dict[str, KeyHeap[TaskState]] = {}
    under: dict[str, list[JobState]] = {}
    for job in ssn.jobs.values():
        if job.is_pending() or ssn.job_valid(job) is not None:
            continue
        if job.queue not in ssn.queues or not ssn.job_starving(job):
            continue
        heap = preemptors.get(job.queue)
        if heap is None:
            heap = preemptors[job.queue] = KeyHeap(ssn.job_key)
        heap.push(job)
        under.setdefault(job.queue, []).append(job)
        tasks: KeyHeap[TaskState] = KeyHeap(ssn.task_key)
        for task in (job.index.get(PENDING) or {}).values():
            if not task.fact.gated:
                tasks.push(task)
        tasks_of[job.key] = tasks
    queues: KeyHeap[QueueState] = KeyHeap(ssn.queue_key)
    for name in sorted(preemptors):
        queues.push(ssn.queues[name])
    search = Search(ssn, cache_enabled)
    while queues:
        queue = queues.pop()
        heap = preemptors[queue.uid]
        while heap:
            job = heap.pop()
            stmt = Statement(ssn)
            while ssn.job_starving(job) and tasks_of[job.key]:
                preemptor = tasks_of[job.key].pop()

                def between(t: TaskState, p: TaskState = preemptor, j: JobState = job) -> bool:
                    return _eligible(t, p) and t.job is not None and t.job.queue == j.queue and t.job is not j

                preempt(ssn, stmt, preemptor, between, search)
            if ssn.job_pipelined(job):
                stmt.commit()
            else:
                stmt.discard()
        for job in under.get(queue.uid, []):
            intra: KeyHeap[TaskState] = KeyHeap(ssn.task_key)
            for task in (job.index.get(PENDING) or {}).values():
                if not task.fact.gated:
                    intra.push(task)
            while intra:
                preemptor = intra.pop()
                stmt = Statement(ssn)

                def within(t: TaskState, p: TaskState = preemptor) -> bool:
                    return _eligible(t, p) and t.job is p.job

                if not preempt(ssn, stmt, preemptor, within, search):
                    stmt.discard()
                    break
                stmt.commit()


def _eligible(task: TaskState, preemptor: TaskState) -> bool:
    if task.status not in PREEMPTABLE_STATUS:
        return False
    if preemptor.fact.best_effort and not task.fact.best_effort:
        return False
    return task.fact.preemptable and task.job is not None


def _fits(ssn: Session, queue: QueueState, task: TaskState, node: NodeState) -> bool:
    if not ssn.allocatable(queue, task) or not fits_future(task, node):
        return False
    return not node_predicate(ssn, task, node)


def node_predicate(ssn: Session, task: TaskState, node: NodeState) -> tuple:
    """The predicates plugin on one node: its failure statuses ((code, reason), ...), empty if it passes."""
    statuses: tuple = ()
    if ssn.check_pod_count and node.fact.max_pods <= node.npods:
        statuses = ((UNSCHEDULABLE, NODE_POD_NUMBER_EXCEEDED),)
    if ssn.filters is not None:
        st = ssn.filters.static(task.fact.placement, ssn.node_facts)[node.index]
        if st is not None:
            statuses = statuses + (st,)
    return statuses


def eligible_to_preempt(ssn: Session, task: TaskState) -> bool:
    """`taskEligibleToPreempt` (pods terminating because of an earlier preemption are not modelled)."""
    if task.fact.preemption_never:
        return False
    nominated = task.fact.nominated
    if nominated:
        node = ssn.nodes.get(nominated)
        if node is None:
            return False
        if not node_predicate(ssn, task, node):
            return False
    return True


def preempt(ssn: Session, stmt: Statement, preemptor: TaskState, keep, search: Search) -> bool:
    if not eligible_to_preempt(ssn, preemptor) or ssn.pre_predicate(preemptor):
        return False
    nodes = unresolvable_filtered(ssn, preemptor)
    candidates, _ = search.predicate_nodes(preemptor, nodes, preempt=True)
    job = preemptor.job
    assert job is not None
    queue = ssn.queues[job.queue]
    for _, node in score_nodes(ssn, preemptor, candidates):
        preemptees = [t for t in sorted(node.tasks.values(), key=lambda t: t.uid) if keep(t)]
        victims = ssn.preemptable(preemptor, preemptees)
        if not enough(preemptor, node, victims):
            continue
        node_stmt = Statement(ssn)
        preempted = Res()
        fits = _fits(ssn, queue, preemptor, node)
        for victim in victim_order(ssn, victims, preemptor):
            if fits:
                break
            node_stmt.evict(victim, "preempt", f"{preemptor.namespace}/{preemptor.name}")
            preempted.add(victim.req)
            fits = _fits(ssn, queue, preemptor, node)
        if fits:
            node_stmt.pipeline(preemptor, node, not preempted.is_empty())
            stmt.merge(node_stmt)
            return True
        node_stmt.discard()
    return False
