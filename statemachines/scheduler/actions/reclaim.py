"""reclaim action (`pkg/scheduler/actions/reclaim/reclaim.go`, reference §8.3): starving jobs of queues
under their deserved share take resources back from Running, preemptable tasks of other,
reclaimable queues. The first feasible node where the Reclaimable vote's victims free enough
is used; the task is pipelined there after the evictions."""

from __future__ import annotations

from statemachines.scheduler.accounting import QueueState
from statemachines.scheduler.actions.allocate import ERROR_CACHE_KEY
from statemachines.scheduler.actions.heap import KeyHeap
from statemachines.scheduler.actions.placement import Search
from statemachines.scheduler.actions.victims import enough, unresolvable_filtered, victim_order
from statemachines.scheduler.config import arg_bool
from statemachines.scheduler.framework import Session
from statemachines.scheduler.model import PENDING, RUNNING
from statemachines.scheduler.resources import less_equal
from statemachines.scheduler.state import JobState, TaskState
from statemachines.scheduler.statement import Statement


def execute(ssn: Session) -> None:
    cache_enabled = arg_bool(ssn.config.action_arguments("reclaim"), ERROR_CACHE_KEY, True)
    queues: KeyHeap[QueueState] = KeyHeap(ssn.queue_key)
    seen: set[str] = set()
    preemptors: dict[str, KeyHeap[JobState]] = {}
    tasks_of: dict[str, KeyHeap[TaskState]] = {}
    for job in ssn.jobs.values():
        if job.is_pending() or ssn.job_valid(job) is not None:
            continue
        queue = ssn.queues.get(job.queue)
        if queue is None:
            continue
        if queue.uid not in seen:
            seen.add(queue.uid)
            queues.push(queue)
        if ssn.job_starving(job):
            heap = preemptors.get(job.queue)
            if heap is None:
                heap = preemptors[job.queue] = KeyHeap(ssn.job_key)
            heap.push(job)
            tasks: KeyHeap[TaskState] = KeyHeap(ssn.task_key)
            for task in (job.index.get(PENDING) or {}).values():
                if not task.fact.gated:
                    tasks.push(task)
            tasks_of[job.key] = tasks
    while queues:
        queue = queues.pop()
        if ssn.overused(queue):
            continue
        while True:
            jobs = preemptors.get(queue.uid)
            if not jobs:
                break
            job = jobs.pop()
            stmt = Statement(ssn)
            while ssn.job_starving(job):
                pending = tasks_of.get(job.key)
                if not pending:
                    break
                task = pending.pop()
                if task.fact.preemption_never:
                    continue
                if not ssn.preemptive(queue, [task]):
                    continue
                if ssn.pre_predicate(task):
                    continue
                reclaim_for_task(ssn, stmt, task, job, cache_enabled)
            if ssn.job_pipelined(job):
                stmt.commit()
            else:
                stmt.discard()
            if jobs:
                queues.push(queue)


def reclaim_for_task(ssn: Session, stmt: Statement, task: TaskState, job: JobState, cache_enabled: bool) -> None:
    nodes = unresolvable_filtered(ssn, task)
    candidates, _ = Search(ssn, cache_enabled).predicate_nodes(task, nodes, preempt=True)
    for node in candidates:
        reclaimees = []
        for t in sorted(node.tasks.values(), key=lambda t: t.uid):
            if t.status != RUNNING or not t.fact.preemptable or t.job is None:
                continue
            if t.job.queue != job.queue:
                q = ssn.queues.get(t.job.queue)
                if q is None or not q.reclaimable:
                    continue
                reclaimees.append(t)
        if not reclaimees:
            continue
        victims = ssn.reclaimable(task, reclaimees)
        if not enough(task, node, victims):
            continue
        available = node.future_idle()
        node_stmt = Statement(ssn)
        evicted = False
        for victim in victim_order(ssn, victims, task):
            if less_equal(task.req, available):
                break
            node_stmt.evict(victim, "reclaim", f"{task.namespace}/{task.name}")
            available.add(victim.req)
            evicted = True
        if not less_equal(task.req, available):
            node_stmt.discard()
            continue
        node_stmt.pipeline(task, node, evicted)
        stmt.merge(node_stmt)
        break
