"""backfill action (`pkg/scheduler/actions/backfill/backfill.go`, reference §8.1): place best-effort
tasks (empty requests) that allocate skipped.

Candidates: Pending (ungated) and Pipelined best-effort tasks (un-pipelined first) of valid,
non-Pending jobs, ordered queue -> job -> task. Each is placed directly (no statement) on
the only feasible node or the best-scored one; the predicate chain is the predicates
plugin's (pod count and stable filters; no resource check). Once the job is ready, all its
Allocated tasks are dispatched (bound).
"""

from __future__ import annotations

from statemachines.scheduler.accounting import QueueState
from statemachines.scheduler.actions.allocate import ERROR_CACHE_KEY, _error
from statemachines.scheduler.actions.heap import KeyHeap
from statemachines.scheduler.actions.placement import Search, _highest
from statemachines.scheduler.config import arg_bool
from statemachines.scheduler.fiterrors import FitErrors
from statemachines.scheduler.framework import Session
from statemachines.scheduler.model import ALLOCATED, BINDING, PENDING, PIPELINED
from statemachines.scheduler.state import JobState, TaskState
from statemachines.scheduler.statement import allocate, unpipeline


def pending_tasks(ssn: Session) -> list[TaskState]:
    queues: KeyHeap[QueueState] = KeyHeap(ssn.queue_key)
    jobs: dict[str, KeyHeap[JobState]] = {}
    tasks: dict[str, KeyHeap[TaskState]] = {}
    for job in ssn.jobs.values():
        if job.is_pending() or ssn.job_valid(job) is not None:
            continue
        queue = ssn.queues.get(job.queue)
        if queue is None:
            continue
        heap: KeyHeap[TaskState] | None = None
        for task in list((job.index.get(PENDING) or {}).values()):
            if not task.fact.best_effort or task.fact.gated:
                continue
            heap = heap or KeyHeap(ssn.task_key)
            heap.push(task)
        for task in list((job.index.get(PIPELINED) or {}).values()):
            if not task.fact.best_effort:
                continue
            unpipeline(ssn, task)
            heap = heap or KeyHeap(ssn.task_key)
            heap.push(task)
        if heap is None:
            continue
        tasks[job.key] = heap
        if queue.uid not in jobs:
            queues.push(queue)
            jobs[queue.uid] = KeyHeap(ssn.job_key)
        jobs[queue.uid].push(job)
    out: list[TaskState] = []
    while queues:
        queue = queues.pop()
        job_heap = jobs[queue.uid]
        while job_heap:
            job = job_heap.pop()
            heap = tasks[job.key]
            while heap:
                out.append(heap.pop())
    return out


def execute(ssn: Session) -> None:
    cache_enabled = arg_bool(ssn.config.action_arguments("backfill"), ERROR_CACHE_KEY, True)
    for task in pending_tasks(ssn):
        job = task.job
        assert job is not None
        err = ssn.pre_predicate(task)
        if err:
            fe = FitErrors()
            for node in ssn.node_list:
                fe.set_node(node.name, _error(err))
            job.fit_errors[task.uid] = fe
            continue
        search = Search(ssn, cache_enabled)
        candidates, fit_errors = search.predicate_nodes(task, ssn.node_list, resource_check=False)
        if not candidates:
            job.fit_errors[task.uid] = fit_errors
            continue
        node = candidates[0] if len(candidates) == 1 else _highest(ssn, task, candidates)
        allocate(ssn, task, node)
        if ssn.job_ready(job):
            for ready in sorted((job.index.get(ALLOCATED) or {}).values(), key=lambda t: t.uid):
                job.set_status(ready, BINDING)
                ssn.binds.append((ready, "backfill"))
                ssn.committed.append(("bind", ready, "backfill", ""))
