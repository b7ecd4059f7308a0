"""One scheduling session: open, actions, close (`pkg/scheduler/framework/framework.go`, reference §2.1).

`run_session(snapshot, config, seq=, number=, time=)` is pure: the same snapshot and config
give the same `SessionResult` (no clock, no randomness; where Volcano is random vcbus breaks
ties by name, see docs/scheduler.md). The snapshot's facts are shared, never mutated: the
session builds its own mutable overlay (`statemachines.scheduler.state`).
"""

from __future__ import annotations

import uuid

from msgspec import Struct

from statemachines import outputs as out
from statemachines.scheduler import close
from statemachines.scheduler.accounting import NodeState, QueueState
from statemachines.scheduler.actions import allocate, backfill, enqueue, preempt, reclaim
from statemachines.scheduler.config import SchedulerConfig
from statemachines.scheduler.emitted import condition_due, condition_key, group_key
from statemachines.scheduler.framework import Session
from statemachines.scheduler.model import COMPLETED_STATUS
from statemachines.scheduler.plugins import OPENERS
from statemachines.scheduler.reasons import job_fit_error
from statemachines.scheduler.reports import JobReport, job_report
from statemachines.scheduler.snapshot import Snapshot
from statemachines.scheduler.state import JobState, TaskState

ACTIONS = {
    "enqueue": enqueue.execute,
    "allocate": allocate.execute,
    "backfill": backfill.execute,
    "preempt": preempt.execute,
    "reclaim": reclaim.execute,
}
COMPONENT = "vc-scheduler"
PODGROUP_API = "scheduling.volcano.sh/v1beta1"
_UID_NAMESPACE = uuid.UUID("5f1c7a52-9d0e-4c53-8f0b-76636275735f")  # "vcbus" session UIDs


class Bind(Struct, frozen=True, gc=False):
    namespace: str
    name: str
    node: str
    uid: str = ""


class Eviction(Struct, frozen=True, gc=False):
    namespace: str
    name: str
    uid: str = ""


class SessionResult(Struct, gc=False):
    uid: str
    outputs: list[out.Output]
    binds: list[Bind]
    evictions: list[Eviction]
    podgroups: list[dict]
    queues: list[dict]
    reports: dict[str, JobReport]


def session_uid(seq: int, number: int) -> str:
    """The session UID (the conditions' transitionID), derived from the cut and the number."""
    return str(uuid.uuid5(_UID_NAMESPACE, f"{seq}:{number}"))


def open_session(snapshot: Snapshot, config: SchedulerConfig, *, uid: str, number: int, seq: int, time: str) -> Session:
    ssn = Session(snapshot, config, uid=uid, number=number, seq=seq, time=time)
    for name in sorted(snapshot.queues):
        ssn.queues[name] = QueueState(snapshot.queues[name])
    classes = snapshot.priority_classes
    for key in sorted(snapshot.groups):
        group = snapshot.groups[key]
        if group.queue not in ssn.queues:
            continue
        priority = classes.get(group.priority_class, snapshot.default_priority)
        ssn.jobs[key] = JobState(group, priority)
    node: NodeState | None  # a node made here, then one looked up (or none)
    for index, name in enumerate(sorted(snapshot.nodes)):
        node = NodeState(snapshot.nodes[name], index, ssn.node_changes)
        ssn.nodes[name] = node
        ssn.node_list.append(node)
        ssn.node_facts.append(node.fact)
        ssn.total.add(node.alloc)
    for key in sorted(snapshot.tasks):
        fact = snapshot.tasks[key]
        job = ssn.jobs.get(fact.group) if fact.group else None
        task = TaskState(fact, job)
        if job is not None:
            job.add_task(task)
        else:
            ssn.orphans.append(task)
        if task.node and task.status not in COMPLETED_STATUS:
            node = ssn.nodes.get(task.node)
            if node is not None:
                node.add_task(task)
                node.pod_added(task)
    for tier in config.tiers:
        for option in tier.plugins:
            OPENERS[option.name](ssn, option)
    ssn.finish_open()
    return ssn


def run_session(
    snapshot: Snapshot,
    config: SchedulerConfig,
    *,
    seq: int,
    number: int,
    time: str,
    index_nodes: bool = True,
    cache_predicates: bool = True,
) -> SessionResult:
    """Run one session over `snapshot`; see the module docstring. `index_nodes=False` places every
    task by scanning the nodes (the node index gives the same answers faster; tests compare them).
    `cache_predicates=False` also evaluates every stable filter and node score afresh for each task
    and node instead of once per (pod signature, node) and session: the same answers, slower (the
    benchmark's "uncached" session; tests compare them)."""
    uid = session_uid(seq, number)
    ssn = open_session(snapshot, config, uid=uid, number=number, seq=seq, time=time)
    ssn.use_indexes = index_nodes and cache_predicates
    ssn.cache_predicates = cache_predicates
    if ssn.filters is not None:
        ssn.filters.keep = cache_predicates
    for action in config.actions:
        ACTIONS[action](ssn)
    return _close(ssn)


def _job_of(job: JobState | None, task: TaskState) -> str:
    if job is not None:
        return job.fact.owner
    return f"{task.namespace}/{task.name}"


def _volume_bindings(ssn: Session, task: TaskState) -> list[out.VolumeBinding]:
    """The static PVs VolumeBinding's Reserve assumed for the task's unbound claims (its PreBind writes them)."""
    binder = ssn.volume_binder
    bindings = binder.bindings.get(task.uid, ()) if binder is not None else ()
    return [out.VolumeBinding(claim=claim.name, claim_uid=claim.uid, volume=pv.name) for claim, pv in bindings]


def _close(ssn: Session) -> SessionResult:
    seq, time, number = ssn.seq, ssn.time, ssn.number
    snapshot = ssn.snapshot
    outputs: list[out.Output] = []
    binds: list[Bind] = []
    evictions: list[Eviction] = []

    for name, weight, reclaimable in (("default", 1, True), ("root", 1, False)):
        if name not in snapshot.queues:
            outputs.append(out.CreateQueue(job=f"_/{name}", seq=seq, time=time, queue=name, weight=weight, reclaimable=reclaimable))

    job: JobState | None  # an enqueued job, then a task's or a bound pod's (or none)
    for job in ssn.enqueued:
        outputs.append(out.JobEnqueued(job=job.fact.owner, seq=seq, time=time, session=number, podgroup=job.name, queue=job.queue))

    for kind, task, action, preemptor in ssn.committed:
        job = task.job
        owner = _job_of(job, task)
        podgroup = job.name if job is not None else ""
        if kind == "bind":
            outputs.append(out.PodAllocated(job=owner, seq=seq, time=time, session=number, podgroup=podgroup, pod=task.name,
                                            uid=task.uid, node=task.node, task=task.role, action=action))
            outputs.append(out.BindPod(job=owner, seq=seq, time=time, name=task.name, uid=task.uid, node=task.node,
                                       volumes=_volume_bindings(ssn, task)))
            binds.append(Bind(task.namespace, task.name, task.node, task.uid))
        else:
            outputs.append(out.PodEvicted(job=owner, seq=seq, time=time, session=number, podgroup=podgroup, pod=task.name,
                                          uid=task.uid, node=task.node, action=action, preemptor=preemptor))
            outputs.append(out.EvictPod(job=owner, seq=seq, time=time, name=task.name, uid=task.uid, reason=action))
            evictions.append(Eviction(task.namespace, task.name, task.uid))

    for key in sorted(snapshot.bound):
        fact = snapshot.tasks.get(key)
        if fact is None:
            continue
        job = ssn.jobs.get(fact.group)
        owner, node = job.fact.owner if job else key, snapshot.bound[key]
        outputs.append(out.PodBound(job=owner, seq=seq, time=time, session=number,
                                    podgroup=job.name if job else "", pod=fact.name, uid=fact.uid, node=node))
        # the binder's event once the bind went through (`SchedulerCache.Bind`, pkg/scheduler/cache/cache.go)
        outputs.append(out.RecordEvent(job=owner, seq=seq, time=time, event_type="Normal", reason="Scheduled",
                                       message=f"Successfully assigned {fact.namespace}/{fact.name} to {node}",
                                       kind="Pod", name=fact.name, api_version="v1", component=COMPONENT))

    emitted = snapshot.emitted
    session_events: dict[str, list[tuple[str, str, str]]] = {}
    for group, event_type, reason, message, _channel in ssn.events:
        session_events.setdefault(group, []).append((event_type, reason, message))
    podgroups = []
    reports: dict[str, JobReport] = {}
    for job in ssn.jobs.values():
        close.gang_conditions(ssn, job)
    for job in ssn.jobs.values():
        old_unschedulable = _condition(job.fact.conditions, close.UNSCHEDULABLE)
        job.phase = close.phase(ssn, job)
        changed = close.status_changed(job)
        owner = job.fact.owner
        status = close.status_dict(job)
        if changed:
            outputs.append(out.UpdatePodGroupStatus(job=owner, seq=seq, time=time, name=job.name, status=status,
                                                    uid=job.fact.uid, resource_version=job.fact.resource_version))
            new_unschedulable = _condition(job.conditions, close.UNSCHEDULABLE)
            if new_unschedulable is not None and (
                old_unschedulable is None or (old_unschedulable.reason, old_unschedulable.message)
                != (new_unschedulable.reason, new_unschedulable.message)
            ):
                outputs.append(out.JobUnschedulable(job=owner, seq=seq, time=time, session=number, podgroup=job.name,
                                                    reason=new_unschedulable.reason, message=new_unschedulable.message))
        for event_type, reason, message in session_events.get(job.key, ()):
            _event(outputs, emitted, job, "enqueue", event_type, reason, message, seq, time)
        fit_error = job_fit_error(job)
        if job.phase in ("Pending", "Inqueue", "Unknown"):
            message = f"{job.count('Pending')}/{len(job.tasks)} tasks in gang unschedulable: {fit_error}"
            _event(outputs, emitted, job, "gang", "Warning", close.UNSCHEDULABLE, message, seq, time)
        elif changed:
            _event(outputs, emitted, job, "gang", "Normal", close.SCHEDULED, "pod group is ready", seq, time)
        pod_lines = close.pod_conditions(ssn, job, fit_error)
        for task, reason, message, nominated in pod_lines:
            previous = emitted.get(condition_key(f"{task.namespace}/{task.name}"))
            if not condition_due(previous, task.fact.scheduled_condition, task.fact.nominated, reason, message,
                                 nominated):
                continue
            outputs.append(out.UpdatePodCondition(job=owner, seq=seq, time=time, name=task.name, uid=task.uid,
                                                  status="False", reason=reason, message=message, nominated_node=nominated))
            outputs.append(out.RecordEvent(job=owner, seq=seq, time=time, event_type="Warning", reason="FailedScheduling",
                                           message=message, kind="Pod", name=task.name, api_version="v1", component=COMPONENT))
        podgroups.append({
            "namespace": job.namespace,
            "name": job.name,
            "phase": job.phase,
            "conditions": [
                {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message} for c in job.conditions
            ],
        })
        reports[job.key] = job_report(ssn, job, fit_error, pod_lines)

    queues = []
    allocated = close.queue_allocated(ssn)
    for name, queue in ssn.queues.items():
        quantities = close.allocated_quantities(allocated[name])
        if close.queue_status_changed(queue.fact.allocated, quantities):
            outputs.append(out.UpdateQueueStatus(job=f"_/{name}", seq=seq, time=time, queue=name, allocated=quantities,
                                                 uid=queue.fact.uid, resource_version=queue.fact.resource_version))
        queues.append({
            "name": name,
            "state": queue.state,
            "allocated": quantities,
            "deserved": close.allocated_quantities(queue.deserved) if queue.has_attr else {},
        })

    outputs.append(out.SchedulingSession(job="_/scheduler", seq=seq, time=time, session=number, uid=ssn.uid,
                                         actions=list(ssn.config.actions), jobs=len(ssn.jobs), nodes=len(ssn.nodes),
                                         binds=len(binds), evictions=len(evictions)))
    return SessionResult(ssn.uid, outputs, binds, evictions, podgroups, queues, reports)


def _condition(conditions, kind: str):
    for c in conditions:
        if c.type == kind:
            return c
    return None


def _event(outputs: list, emitted: dict, job: JobState, channel: str, event_type: str, reason: str, message: str,
           seq: int, time: str) -> None:
    key = group_key(job.key, channel)
    content = (event_type, reason, message)
    if tuple(emitted.get(key, ())) == content:
        return
    outputs.append(out.RecordEvent(job=job.fact.owner, seq=seq, time=time, event_type=event_type, reason=reason,
                                   message=message, kind="PodGroup", name=job.name, api_version=PODGROUP_API,
                                   component=COMPONENT))
