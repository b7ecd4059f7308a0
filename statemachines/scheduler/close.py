"""Session close: what the session writes back (reference §2.9, §3.5, §3.7, §6.6).

1. gang's conditions (`pkg/scheduler/plugins/gang/gang.go` OnSessionClose): for every job
   with tasks, upsert `Scheduled` (ready) or `Unschedulable` with the FitError message;
2. the PodGroup status (`framework/session.go` jobStatus/getPodGroupPhase), written only
   when it differs from the status at open, ignoring lastTransitionTime and transitionID;
3. events and pod conditions (`cache/cache.go` RecordJobStatusEvent, taskUnschedulable);
4. each queue's `status.allocated` (`framework/session.go` updateQueueStatus), on change.

Events and pod conditions are emitted only when their content differs from what vcbus last
said for that object (the snapshot's `emitted` memory, else the pod's recorded condition); a pod's
condition as Volcano's `taskUnschedulable` writes it (`emitted.condition_due`: an empty nominated
node changes nothing).
"""

from __future__ import annotations

from typing import Any

from statemachines.scheduler import objects as o
from statemachines.scheduler.fiterrors import ALL_NODES_UNAVAILABLE
from statemachines.scheduler.framework import Session
from statemachines.scheduler.model import (
    ALLOCATED,
    ALLOCATED_STATUS,
    COMPLETED_STATUS,
    PENDING,
    PIPELINED,
    RUNNING,
    condition_dump,
)
from statemachines.scheduler.reasons import job_fit_error, task_reason
from statemachines.scheduler.resources import Res, quantities_key, to_quantities
from statemachines.scheduler.state import JobState

SCHEDULED, UNSCHEDULABLE = "Scheduled", "Unschedulable"
READY_REASON = "tasks in gang are ready to be scheduled"
NOT_ENOUGH_RESOURCES = "NotEnoughResources"


def gang_conditions(ssn: Session, job: JobState) -> None:
    if not job.tasks:
        return
    if job.is_ready():
        _upsert(job, o.PodGroupCondition(type=SCHEDULED, status="True", transition_id=ssn.uid,
                                          last_transition_time=ssn.time, reason=READY_REASON, message=""))
        return
    releasing = job.releasing_scheduled()
    if (
        releasing
        and not job.count(PENDING)
        and not job.count(PIPELINED)
        and job.scheduled_num() + releasing >= job.min_available
    ):
        return
    schedulable = job.ready_num()
    for task in (job.index.get(PENDING) or {}).values():
        status = task.last_tx[0] if task.last_tx is not None else task.status
        if status in ALLOCATED_STATUS:
            schedulable += 1
    unready = job.min_available - schedulable
    message = f"{unready}/{len(job.tasks)} tasks in gang unschedulable: {job_fit_error(job)}"
    _upsert(job, o.PodGroupCondition(type=UNSCHEDULABLE, status="True", transition_id=ssn.uid,
                                      last_transition_time=ssn.time, reason=NOT_ENOUGH_RESOURCES, message=message))


def _upsert(job: JobState, cond: o.PodGroupCondition) -> None:
    for i, c in enumerate(job.conditions):
        if c.type == cond.type:
            job.conditions[i] = cond
            return
    job.conditions.append(cond)


def phase(ssn: Session, job: JobState) -> str:
    """`getPodGroupPhase`."""
    unschedulable = any(
        c.type == UNSCHEDULABLE and c.status == "True" and c.transition_id == ssn.uid for c in job.conditions
    )
    if job.count(RUNNING) and unschedulable:
        return "Unknown"
    scheduled = job.scheduled_num() + job.releasing_scheduled()
    completed = sum(len(b) for s, b in job.index.items() if s in COMPLETED_STATUS)
    if scheduled >= job.min_available:
        return "Completed" if scheduled == completed else "Running"
    if job.phase != "Inqueue":
        return "Pending"
    return job.phase


def status_dict(job: JobState) -> dict[str, Any]:
    out: dict[str, Any] = {"phase": job.phase}
    if job.conditions:
        out["conditions"] = [condition_dump(c) for c in job.conditions]
    for name, status in (("running", RUNNING), ("succeeded", "Succeeded"), ("failed", "Failed")):
        n = job.count(status)
        if n:
            out[name] = n
    return out


def _cond_key(c: o.PodGroupCondition) -> tuple:
    return (c.type, c.status, c.reason, c.message)


def status_changed(job: JobState) -> bool:
    """`isPodGroupStatusUpdated` against the status at open."""
    fact = job.fact
    if (job.phase, job.count(RUNNING), job.count("Succeeded"), job.count("Failed")) != (
        fact.phase,
        fact.running,
        fact.succeeded,
        fact.failed,
    ):
        return True
    old = fact.conditions
    if len(old) != len(job.conditions):
        return True
    return any(_cond_key(a) != _cond_key(b) for a, b in zip(job.conditions, old, strict=True))  # equal lengths, above


def pod_conditions(ssn: Session, job: JobState, fit_error: str) -> list[tuple[Any, str, str, str]]:
    """(task, reason, message, nominated node) for each Allocated, Pending or Pipelined, ungated task."""
    base = fit_error or ALL_NODES_UNAVAILABLE
    out = []
    for status in (ALLOCATED, PENDING, PIPELINED):
        for task in sorted((job.index.get(status) or {}).values(), key=lambda t: t.uid):
            if task.fact.gated:
                continue
            reason, message, nominated = task_reason(job, task)
            out.append((task, reason, message or base, nominated))
    return out


def queue_allocated(ssn: Session) -> dict[str, Res]:
    """Σ requests of AllocatedStatus tasks per queue, also added to every ancestor when `root` exists."""
    allocated = {name: Res() for name in ssn.queues}
    has_root = "root" in ssn.queues
    for job in ssn.jobs.values():
        if job.queue not in allocated:
            continue
        for status, bucket in job.index.items():
            if status not in ALLOCATED_STATUS:
                continue
            for task in bucket.values():
                allocated[job.queue].add(task.req)
                if not has_root:
                    continue
                queue = ssn.queues[job.queue]
                seen = set()
                while True:
                    parent = queue.fact.parent or "root"
                    if parent not in allocated or parent in seen:
                        break
                    seen.add(parent)
                    allocated[parent].add(task.req)
                    if parent == "root":
                        break
                    queue = ssn.queues[parent]
    return allocated


def queue_status_changed(old: dict[str, str], new: dict[str, str]) -> bool:
    return quantities_key(old) != quantities_key(new)


def allocated_quantities(res: Res) -> dict[str, str]:
    return to_quantities(res)
