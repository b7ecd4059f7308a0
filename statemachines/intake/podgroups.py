"""PodGroup records (§4.4): the job's PodGroup phase, and a pass when it changes.

A PodGroup belongs to the vcjob that owns it (its ownerReference of kind Job in
the batch.volcano.sh group), else to the key of its own name, as any PodGroup no
vcjob owns: a batch/v1 Job `x`'s PodGroup is never vcjob `x`'s. The pass a phase
change runs is for the job Volcano's `updatePodGroup`
(pkg/controllers/job/job_controller_handler.go) queues: the last owner of kind
Job whatever its group, so vcjob `x` syncs when batch Job `x`'s PodGroup changes
phase, and decides with its own PodGroup, as Volcano's sync reads the job's
PodGroup by its name (`<job>-<uid>`). A change of its phase seen in a MODIFIED record (the scheduler's write)
runs one pass of the job, with JobUnknown when the phase is Unknown. A
PodGroup vcbus deleted (`pg_gone`) is ignored until its DELETED record. Its latest
condition is kept for the job's PodGroupPending event (`latest_pending`). A DELETED
record of a job already gone (Kubernetes' garbage collector deletes the PodGroup
after its vcjob) leaves nothing behind: the job's entry, if it still has one, goes
once it holds no pods (as a job's DELETED record and its last pod's do).
"""

from __future__ import annotations

from typing import Any

from statemachines.cache import PodGroupState
from statemachines.intake.jobs import forget_if_empty
from statemachines.model.objects import PodGroup, is_vcjob_ref, job_key
from statemachines.model.vocabulary import Event
from statemachines.policies import Request
from statemachines.worker import handle


def latest_pending(pg: PodGroup) -> tuple[str, str] | None:
    """What `recordPodGroupEvent` reads (pkg/controllers/job/job_controller_actions.go): the True
    condition with the latest lastTransitionTime (the first of equals), as (type, message) unless
    it is Scheduled."""
    latest = None
    for cond in pg.status.conditions or ():
        if cond.status == "True" and (latest is None or (cond.last_transition_time or "") > (latest.last_transition_time or "")):
            latest = cond
    if latest is None or latest.type == "Scheduled":
        return None
    return latest.type, latest.message


def on_podgroup(engine: Any, rtype: str, pg: PodGroup) -> None:
    meta = pg.metadata
    owner = requested = meta.name
    for ref in meta.owner_references or ():
        if ref.kind == "Job":  # updatePodGroup's jobNameKey: the last owner of kind Job, of any group
            requested = ref.name
            if is_vcjob_ref(ref):
                owner = ref.name
    if rtype == "DELETED":
        entry = engine.jobs.get(job_key(meta.namespace, owner))
        if entry is None:
            return  # its job gone and forgotten (Kubernetes' garbage collector deletes the PodGroup after it)
        if meta.uid in entry.pg_gone:
            entry.pg_gone.discard(meta.uid)
        else:
            current = entry.pg
            if current is not None and current.uid in ("", meta.uid) and current.name == meta.name:
                entry.pg = None
        forget_if_empty(engine, entry)
        return
    entry = engine.entry(meta.namespace, owner)
    if meta.uid in entry.pg_gone:
        return
    current = entry.pg
    phase = pg.status.phase
    if current is None or current.name != meta.name or (current.uid and current.uid != meta.uid):
        entry.pg = current = PodGroupState(meta.name, meta.uid, "")
        old_phase = "" if rtype == "MODIFIED" else phase
    else:
        old_phase = current.phase
        current.uid = meta.uid
    current.phase = phase
    current.spec = (pg.spec.min_member, dict(pg.spec.min_task_member or {}), pg.spec.priority_class_name)
    current.pending = latest_pending(pg)
    if rtype == "MODIFIED" and phase != old_phase:
        if requested != owner:  # Volcano's request for the vcjob of that name, if there is one
            entry = engine.jobs.get(job_key(meta.namespace, requested))
            if entry is None:
                return
        event = Event.JOB_UNKNOWN if phase == "Unknown" else ""
        handle(engine, entry, Request(event=event, source="podgroup"))
