"""allocate action (`pkg/scheduler/actions/allocate/allocate.go`, reference §5).

Work list: Inqueue (or later) jobs that are valid, have a queue and have Pending,
non-best-effort, non-gated tasks. Main loop: pop a queue (QueueOrder); an Overused queue is
dropped; pop its best job (JobOrder) and try its tasks (TaskOrder) in one statement until the
job is ready. A ready job's statement is committed (binds) and the job goes back if it has
tasks left; a merely pipelined job keeps its tentative placements for the rest of the
session, uncommitted; otherwise the statement is discarded (all-or-nothing). The queue goes
back with its share re-read.
"""

from __future__ import annotations

from statemachines.scheduler.accounting import NodeState, QueueState
from statemachines.scheduler.actions.heap import KeyHeap
from statemachines.scheduler.actions.nodeindex import NodeIndex
from statemachines.scheduler.actions.placement import Search, best_node, fits_future, fits_idle
from statemachines.scheduler.config import arg_bool
from statemachines.scheduler.fiterrors import ERROR, FitError, FitErrors, fit_error
from statemachines.scheduler.framework import DynamicFilters, Session
from statemachines.scheduler.model import PENDING
from statemachines.scheduler.state import JobState, TaskState
from statemachines.scheduler.statement import Statement

ERROR_CACHE_KEY = "predicateErrorCacheEnable"


def execute(ssn: Session) -> None:
    cache_enabled = arg_bool(ssn.config.action_arguments("allocate"), ERROR_CACHE_KEY, True)
    queues: KeyHeap[QueueState] = KeyHeap(ssn.queue_key)
    jobs_by_queue: dict[str, KeyHeap[JobState]] = {}
    tasks_by_job: dict[str, KeyHeap[TaskState]] = {}
    enqueue_on = "enqueue" in ssn.actions_configured
    for job in ssn.jobs.values():
        if job.is_pending():
            if enqueue_on:
                continue
            job.phase = "Inqueue"
        if ssn.job_valid(job) is not None:
            continue
        queue = ssn.queues.get(job.queue)
        if queue is None:
            continue
        tasks: KeyHeap[TaskState] = KeyHeap(ssn.task_key)
        for task in (job.index.get(PENDING) or {}).values():
            fact = task.fact
            if fact.gated and not fact.only_volcano_gate:
                continue
            if fact.best_effort:
                continue
            tasks.push(task)
        if not tasks:
            continue
        heap = jobs_by_queue.get(queue.uid)
        if heap is None:
            heap = jobs_by_queue[queue.uid] = KeyHeap(ssn.job_key)
            queues.push(queue)
        heap.push(job)
        tasks_by_job[job.key] = tasks

    while queues:
        queue = queues.pop()
        if ssn.overused(queue):
            continue
        jobs = jobs_by_queue.get(queue.uid)
        if not jobs:
            continue
        job = jobs.pop()
        tasks = tasks_by_job[job.key]
        stmt = allocate_tasks(ssn, queue, job, tasks, cache_enabled)
        if stmt is not None and ssn.job_ready(job):
            stmt.commit()
            if tasks:
                jobs.push(job)
        queues.push(queue)


def allocate_tasks(
    ssn: Session, queue: QueueState, job: JobState, tasks: KeyHeap[TaskState], cache_enabled: bool
) -> Statement | None:
    """`allocateResourcesForTasks`: one statement for one job attempt."""
    nodes = ssn.node_list
    if not nodes:
        return None
    stmt = Statement(ssn)
    search = Search(ssn, cache_enabled)
    node: NodeState | None
    while tasks:
        task = tasks.pop()
        if not ssn.allocatable(queue, task):
            continue
        if task.fact.gated:
            continue
        if task.role and task.role in job.failed_roles():
            fe = FitErrors()
            fe.err = f"Task {task.name} with role spec {task.role} has already predicated failed, skip"
            job.fit_errors[task.uid] = fe
            continue
        err = ssn.pre_predicate(task)
        if err:
            fe = FitErrors()
            for node in nodes:
                fe.set_node(node.name, _error(err))
            job.fit_errors[task.uid] = fe
            if job.need_continue_allocating():
                continue
            break
        node = None
        nominated = task.fact.nominated
        if not nominated and ssn.use_indexes:
            fact = task.fact
            if not ssn.batch_scored(fact):
                if ssn.dynamic is None or not ssn.dynamic.applies(fact):
                    node = _indexed_choice(ssn, task)
                else:
                    node = _masked_choice(ssn, ssn.dynamic, task, search)
            elif ssn.spread_scored_only(fact):
                if ssn.dynamic is None or not ssn.dynamic.applies(fact):
                    node = _spread_choice(ssn, task)
                else:
                    node = _masked_choice(ssn, ssn.dynamic, task, search, spread=True)
        if node is None:
            candidates: list = []
            fit_errors: FitErrors | None = None
            if nominated:
                target = ssn.nodes.get(nominated)
                if target is not None and fits_future(task, target):
                    candidates, fit_errors = search.predicate_nodes(task, [target])
            if not candidates:
                candidates, fit_errors = search.predicate_nodes(task, nodes)
            if not candidates:
                job.fit_errors[task.uid] = fit_errors or FitErrors()
                if job.need_continue_allocating():
                    continue
                break
            node = best_node(ssn, task, candidates)
            if node is None:
                continue
        if fits_idle(task, node):
            stmt.allocate(task, node)
        elif fits_future(task, node):
            stmt.pipeline(task, node)
        if ssn.job_ready(job):
            break
    if ssn.job_ready(job) or ssn.job_pipelined(job):
        return stmt
    stmt.discard()
    return None


def _index(ssn: Session, task: TaskState) -> NodeIndex | None:
    """The node index of the task's signature, made on the signature's second use."""
    sig = (task.fact.score_sig, task.fact.placement.key)
    index = ssn.indexes.get(sig)
    if index is None:
        uses = ssn.signature_uses.get(sig, 0) + 1
        ssn.signature_uses[sig] = uses
        if uses < 2:
            return None
        index = ssn.indexes[sig] = NodeIndex(ssn, task)
    return index


def _indexed_choice(ssn: Session, task: TaskState):
    """The node index's answer for tasks whose signature was seen before (see actions/nodeindex.py);
    None when there is no index yet or nothing fits (the caller then scans, for the messages)."""
    index = _index(ssn, task)
    return index.choose() if index is not None else None


def _spread_choice(ssn: Session, task: TaskState):
    """The same for a task whose one score normalized over the candidates is PodTopologySpread's
    (`NodeIndex.choose_spread`)."""
    index = _index(ssn, task)
    return index.choose_spread(task.fact, ssn.spread_scorer) if index is not None else None


def _masked_choice(ssn: Session, dynamic: DynamicFilters, task: TaskState, search: Search, *, spread: bool = False):
    """The same for a task whose filters depend on the pods placed so far: the index's answer without
    the nodes those filters fail and the nodes the error cache holds for the task's role; the
    failures among the nodes the scan would have examined go to the error cache as the scan puts
    them. None when the failing nodes cannot be listed (host ports, pod affinity), there is no
    index yet or nothing fits: the caller scans. `spread`: the task's one normalized score is
    PodTopologySpread's (`NodeIndex.choose_spread`)."""
    failing = dynamic.failing(task.fact)
    if failing is None:
        return None
    index = _index(ssn, task)
    if index is None:
        return None
    run, masked = failing
    group = search.group(task)
    cached = search.errors.get(group) if group else None
    excluded = set(masked)
    nodes = ssn.nodes
    if cached:
        excluded.update(nodes[name].index for name in cached)
    node = index.choose_spread(task.fact, ssn.spread_scorer, excluded) if spread else index.choose(excluded)
    if node is None or not group:
        return node
    start, count = index.processed
    n = len(ssn.node_list)
    static = search.static(task)
    for i in masked:
        target = ssn.node_list[i]
        if (i - start) % n < count and (cached is None or target.name not in cached):
            error = search.node_error(task, target, static, run, ssn.check_pod_count, True, False)
            if error is not None:
                search.record(task, target, error)
    return node


def _error(message: str) -> FitError:
    """A node's failure from a PrePredicate error (status Error, the error's text)."""
    return fit_error(((ERROR, message),))
