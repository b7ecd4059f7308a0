"""syncJob (§6): the pod work behind SyncJob, in any phase, then the phase's status function.

`sync_job` reads the cache entry, emits the commands that carry the work out
(CreatePod, DeletePod, PodGroup commands, UpdateJobStatus...), records those
writes in the cache at once, and applies the phase's status function
(`writes.py`). `ctx` is the engine, seen through `context.JobContext`: it
provides `now`, `emit()` and the job-independent knowledge (queues, the pod
renderer). killJob and killTarget are in `kill.py`.
"""

from __future__ import annotations

import msgspec

from statemachines import outputs as o
from statemachines.cache import JobEntry, PodGroupState, PodState
from statemachines.job.context import JobContext
from statemachines.job.handling import Handling
from statemachines.job.podnames import LAZY_FROM, PodNames
from statemachines.job.writes import (
    SpecFacts,
    bookkeep_plugins,
    bookkeep_volumes,
    ensure_podgroup,
    job_volumes,
    last_retry_spent,
    record_podgroup_event,
    spec_facts,
    status_function,
    write_status,
)
from statemachines.model.objects import TaskSpec
from statemachines.model.status import POD_PHASES, JobStatus, copy_status, set_counts, set_transition
from statemachines.model.timefmt import add
from statemachines.model.vocabulary import Phase
from statemachines.task.handlers import step_task
from statemachines.task.machine import PODS_CHANGED

_PENDING = Phase.PENDING.value  # plain str: a StrEnum member is slow to compare and hash
IDLE_MEMO = True  # remember when the reconciliation had nothing to do (`JobEntry.idle`); off: tests compare
# A CreatePod the log has shown neither the pod of nor a refusal for after this many seconds of the log's
# time counts as lost: the next sync creates the pod again (an AlreadyExists if it landed after all).
# Volcano never caches its own creates, so it has no such state (docs/fidelity.md).
LOST_CREATE_AFTER = 60


class SyncError(Exception):
    """The sync cannot proceed (Volcano would retry and finally force TerminateJob)."""


class SyncMemo(msgspec.Struct, gc=False):
    """What a sync last found nothing to do with (`JobEntry.idle`): the same again gives the same answer.

    `epoch` None: the status function alone (the PodGroup not scheduled yet), a pure function of
    the status, the spec and the handling. Otherwise the pod reconciliation too, at that
    `TaskBook.epoch` with that PodGroup in that phase (`pg_phase`: a pod flag changes the counts, so
    the epoch). Status, spec, PodGroup and handling are compared by identity: a change replaces the
    object. Most pod records that change no count skip the sync by it. A Struct, built in C (a
    class with an `__init__` costs about three times as much, a NamedTuple four), and not tracked by
    the garbage collector: nothing it refers to refers back to it."""

    status: JobStatus
    spec: object
    handling: Handling
    epoch: int | None = None
    pg: PodGroupState | None = None
    pg_phase: str | None = None

    def holds(self, status: JobStatus, spec: object, handling: Handling, epoch: int | None = None,
              pg: PodGroupState | None = None) -> bool:
        return (self.status is status and self.spec is spec and self.handling is handling and self.epoch == epoch
                and self.pg is pg and (pg is None or self.pg_phase == pg.phase))


class _Survey(msgspec.Struct, gc=False):
    """The pod reconciliation's count of a job's pods against the pods its spec expects (a Struct,
    as `SyncMemo`)."""

    exact: bool  # every task has exactly its expected pods, none deleting or out of sync
    terminating: int
    per_task: dict[str, dict[str, int]]  # task -> pod phase -> pods
    to_create: list[tuple[TaskSpec, int, str]]  # (task, index, pod name)
    to_delete: list[tuple[PodState, str]]  # (pod, why)


def sync_job(ctx: JobContext, entry: JobEntry, handling: Handling, action: str) -> None:
    """Volcano's syncJob: the job's PodGroup and plugins first, then its status alone (PodGroup not
    scheduled yet) or its pods reconciled and the status that follows."""
    job = entry.job
    assert job is not None and entry.status is not None
    if job.metadata.deletion_timestamp is not None:
        return
    if job.spec.queue not in ctx.queues and not ctx.queue_exists(job.spec.queue):  # a known queue: at once
        raise SyncError(f'queues.scheduling.volcano.sh "{job.spec.queue}" not found')
    facts = spec_facts(entry)
    status = entry.status  # copied before anything changes it (emitted outputs hold it)
    if status.state.phase in (_PENDING, ""):
        status = _prepare_pending(ctx, entry, facts, status, action)
    else:
        _prepare_started(ctx, entry, facts, status, handling)
    pg = entry.pg
    if pg is not None and pg.pending is not pg.pending_said:  # (no tuples compared on the usual sync)
        record_podgroup_event(ctx, entry, pg)
    if pg is None or pg.phase in ("", "Pending"):
        _sync_status(ctx, entry, facts, status, handling, action)
    else:
        _reconcile_pods(ctx, entry, facts, status, pg, handling, action)


def _prepare_pending(ctx: JobContext, entry: JobEntry, facts: SpecFacts, status: JobStatus, action: str) -> JobStatus:
    """A Pending (or new) job: its first status, plugins and volumes booked, its PodGroup ensured.
    The status to go on with (a copy once anything is booked in it)."""
    job = entry.job
    assert job is not None
    if status.state.phase == "":
        status = copy_status(status)
        status.state.phase = _PENDING
        status.min_available = job.spec.min_available
        set_transition(status, ctx.now)
        write_status(ctx, entry, status, action, "new job: first sync")
        status = copy_status(status)
    if facts.plugins and status.controlled_resources is not facts.plugins_booked:  # else booked, as found before
        status = _book_plugins(ctx, entry, facts, status)
    if facts.volumes if facts.volumes_read else job_volumes(entry):  # else there is nothing to book
        if status is entry.status:
            status = copy_status(status)
        bookkeep_volumes(ctx, entry, status)
    pg = entry.pg
    if pg is None or pg.spec is not facts.wanted:  # else it is the one this spec asked for
        ensure_podgroup(ctx, entry)
    return status


def _book_plugins(ctx: JobContext, entry: JobEntry, facts: SpecFacts, status: JobStatus) -> JobStatus:
    """The plugins' controlled resources booked in the status, and OnJobAdd when one is missing."""
    resources = status.controlled_resources or {}
    added = stale = False
    for key, name in facts.plugin_resources:
        have = resources.get(key)
        if have is None:
            added = True
        elif have != name:
            stale = True
    if not (added or stale):
        facts.plugins_booked = resources  # `SpecFacts.plugins_booked`
    else:  # booking them again would leave an equal map
        if status is entry.status:
            status = copy_status(status)
        bookkeep_plugins(status, facts.plugins, add=True)
    if added:  # OnJobAdd runs on every Pending sync; it only creates what is missing (built by keywords: `JobContext.emit`)
        ctx.out.append(o.PluginHook(job=entry.key, seq=ctx.seq, time=ctx.now, hook="OnJobAdd", plugins=facts.plugins))
    return status


def _prepare_started(ctx: JobContext, entry: JobEntry, facts: SpecFacts, status: JobStatus,
                     handling: Handling) -> None:
    """A job past Pending: OnJobUpdate when its spec changed, its PodGroup ensured unless its last retry is spent."""
    if facts.plugins and ctx.spec_changed:  # OnJobUpdate only has work when the spec changed
        ctx.emit(o.PluginHook, entry, hook="OnJobUpdate", plugins=facts.plugins)
    pg = entry.pg
    if pg is not None and pg.spec is facts.wanted:
        return  # the PodGroup is the one this spec asked for: nothing to create or update
    if not last_retry_spent(entry, status, handling):
        ensure_podgroup(ctx, entry)


def _sync_status(ctx: JobContext, entry: JobEntry, facts: SpecFacts, status: JobStatus, handling: Handling,
                 action: str) -> None:
    """The PodGroup not scheduled yet: the phase's status function alone, written when it changes the status."""
    job = entry.job
    assert job is not None
    idle = entry.idle
    if idle is not None and idle.holds(status, job.spec, handling):
        return  # the status function left this very status as it was last time
    baseline = status
    status = copy_status(status)
    guard = status_function(entry, status, handling, facts)
    if status == baseline:
        if IDLE_MEMO and not handling.retry:
            entry.idle = SyncMemo(baseline, job.spec, handling)
        return
    set_transition(status, ctx.now)
    write_status(ctx, entry, status, action, guard)


def _reconcile_pods(ctx: JobContext, entry: JobEntry, facts: SpecFacts, status: JobStatus, pg: PodGroupState,
                    handling: Handling, action: str) -> None:
    """Pod reconciliation (§6.1 step 8): the missing pods created, the surplus ones deleted, the
    status counted from the pods, and the phase's status function."""
    job = entry.job
    assert job is not None
    tasks = entry.tasks
    lost = _forget_lost(ctx, entry) if entry.creating else None
    idle = entry.idle
    if idle is not None and idle.holds(status, job.spec, handling, tasks.epoch, pg):
        return  # nothing the rest reads has changed since it last found nothing to do
    survey = _survey(entry)
    if survey.to_create:
        _create(ctx, entry, survey.to_create, survey.per_task, status)
    if lost:
        for name in lost:  # the task machine sees the counts without the lost pods (again with them, if re-created)
            step_task(ctx, entry, name, PODS_CHANGED)
    terminating = survey.terminating
    for pod, why in survey.to_delete:
        if not pod.deleting:
            ctx.emit(o.DeletePod, entry, name=pod.name, uid=pod.uid, task=pod.task, mark_out_of_sync=False, reason=why)
            entry.tasks.forget(pod)
            pod.deleting = True
            entry.tasks.count(pod)
        terminating += 1
    new = JobStatus(
        state=msgspec.structs.replace(status.state),
        version=status.version,
        min_available=job.spec.min_available,
        controlled_resources=status.controlled_resources,
        conditions=status.conditions,
        retry_count=status.retry_count,
        terminating=terminating,
    )
    set_counts(new, survey.per_task)
    guard = status_function(entry, new, handling, facts)
    settled = survey.exact and not survey.to_create  # the same pods again would find nothing to do
    if new == status:
        if settled and IDLE_MEMO:
            entry.idle = SyncMemo(status, job.spec, handling, tasks.epoch, pg, pg.phase)
        return
    set_transition(new, ctx.now)
    write_status(ctx, entry, new, action, guard)
    if settled and guard is None and not handling.retry and IDLE_MEMO:
        entry.idle = SyncMemo(new, job.spec, handling, tasks.epoch, pg, pg.phase)  # the same counts give this status again


def _forget_lost(ctx: JobContext, entry: JobEntry) -> list[str]:
    """Our CreatePods that the log has not shown within `LOST_CREATE_AFTER`: out of the cache, so the
    survey finds them missing and creates them again. The tasks they were of."""
    now = ctx.now
    lost: list[tuple[str, str]] = []
    for name, (task, due) in entry.creating.items():
        if due > now:
            break  # oldest first: the rest are later still
        lost.append((name, task))
    tasks: dict[str, None] = {}
    for name, task in lost:
        pod = entry.find_pod(task, name)
        if pod is not None and not pod.observed:
            entry.drop_pod(task, name)
            tasks[task] = None
        else:
            entry.creating.pop(name, None)
    return list(tasks)


def _survey(entry: JobEntry) -> _Survey:
    """Each task's pods against its expected names: counted by phase, the missing and the surplus ones."""
    job = entry.job
    assert job is not None
    exact = True
    terminating = 0
    per_task: dict[str, dict[str, int]] = {}
    to_create: list[tuple[TaskSpec, int, str]] = []
    to_delete: list[tuple[PodState, str]] = []
    expected_names = expected_pod_names(entry)
    book = entry.tasks.counts
    all_pods = entry.pods
    for task in job.spec.tasks:
        task_name = task.name
        names, name_set = expected_names[task_name]
        pods = all_pods.get(task_name)
        if not pods:
            to_create.extend((task, i, n) for i, n in enumerate(names))
            continue
        counts = book.get(task_name)
        if counts is not None and not counts.flagged and pods.keys() == name_set:
            # exactly the expected pods, none deleting or out of sync: the task's counts say it all
            counter = counts.by_phase(pods)
            if counter:
                per_task[task_name] = counter
            continue
        exact = False
        counter = {}
        found = 0
        for pod_name, pod in pods.items():
            if pod_name not in name_set:
                to_delete.append((pod, "scale-down"))
                continue
            found += 1
            if pod.deleting:
                terminating += 1
                continue
            if pod.out_of_sync:
                to_delete.append((pod, "out-of-sync"))
            phase = pod.phase if pod.phase in POD_PHASES else "Unknown"
            counter[phase] = counter.get(phase, 0) + 1
        if counter:
            per_task[task_name] = counter
        if found < len(names):
            to_create.extend((task, i, n) for i, n in enumerate(names) if n not in pods)
    return _Survey(exact, terminating, per_task, to_create, to_delete)


def _create(ctx: JobContext, entry: JobEntry, to_create: list[tuple[TaskSpec, int, str]],
            per_task: dict[str, dict[str, int]], status: JobStatus) -> None:
    """The missing pods of syncJob's reconciliation: CreatePod for each whose dependencies are ready."""
    job = entry.job
    assert job is not None
    blocked: dict[str, bool] = {}
    created: list[str] = []
    creating = entry.creating
    lost_at = ""
    for task, index, pod_name in to_create:
        if task.depends_on is not None:
            if task.name not in blocked:
                blocked[task.name] = not dependencies_ready(entry, task)
            if blocked[task.name]:
                continue
        ctx.out.append(o.CreatePod(  # one per pod created: built by its keywords (`JobContext.emit`)
            job=entry.key, seq=ctx.seq, time=ctx.now, name=pod_name, task=task.name, index=index,
            job_version=status.version, retry_count=status.retry_count, job_uid=job.metadata.uid,
            pod=ctx.render_pod(entry, task.name, index, status),
        ))
        placeholder = PodState(pod_name, task.name, version=status.version)
        entry.put_pod(placeholder)
        lost_at = lost_at or add(ctx.now, LOST_CREATE_AFTER)
        creating.pop(pod_name, None)  # (re-)inserted last: the oldest stay first
        creating[pod_name] = (task.name, lost_at)
        created.append(task.name)
        counter = per_task.setdefault(task.name, {})
        counter["Pending"] = counter.get("Pending", 0) + 1
    if created:
        for name in dict.fromkeys(created):  # the task machine sees the created pods, once per task
            step_task(ctx, entry, name, PODS_CHANGED)


def expected_pod_names(entry: JobEntry) -> dict[str, tuple[list[str] | PodNames, frozenset[str] | PodNames]]:
    """`<job>-<task>-<i>` for every task, cached until the spec changes."""
    job = entry.job
    assert job is not None
    cached = entry.names
    if cached is not None and cached[0] is job.spec:
        return cached[1]
    name = job.metadata.name
    names: dict[str, tuple[list[str] | PodNames, frozenset[str] | PodNames]] = {}
    for t in job.spec.tasks:
        if t.replicas >= LAZY_FROM:  # O(1) memory for a huge task (statemachines/job/podnames.py)
            lazy = PodNames(f"{name}-{t.name}-", t.replicas)
            names[t.name] = (lazy, lazy)
            continue
        listed = [f"{name}-{t.name}-{i}" for i in range(t.replicas)]
        names[t.name] = (listed, frozenset(listed))
    entry.names = (job.spec, names)
    return names


def dependencies_ready(entry: JobEntry, task: TaskSpec) -> bool:
    """§6.5: `any` with several names needs one ready dependency, otherwise all."""
    job = entry.job
    assert job is not None and task.depends_on is not None
    names = task.depends_on.name or []
    by_name = {t.name: t for t in job.spec.tasks}
    ready = [_task_ready(entry, by_name.get(n), n) for n in names]
    if len(names) > 1 and task.depends_on.iteration == "any":
        return any(ready)
    return all(ready)


def _task_ready(entry: JobEntry, dep: TaskSpec | None, name: str) -> bool:
    if dep is None or dep.min_available is None:
        return True
    count = 0
    pods = entry.pods.get(name) or {}
    job_name = entry.job.metadata.name  # type: ignore[union-attr]  # an entry being synced has its job
    for i in range(dep.replicas):
        pod = pods.get(f"{job_name}-{name}-{i}")
        if pod is None or not pod.observed:
            continue
        if pod.phase == "Succeeded" or (pod.phase == "Running" and pod.ready):
            count += 1
    return count >= dep.min_available
