"""PodGroup records (§4.4): the job's PodGroup phase, and a pass when it changes.

A PodGroup belongs to the job that owns it (its owner reference, else its
name). A change of its phase seen in a MODIFIED record (the scheduler's write)
runs one pass of the job, with JobUnknown when the phase is Unknown. A
PodGroup vcbus deleted (`pg_gone`) is ignored until its DELETED record. Its latest
condition is kept for the job's PodGroupPending event (`latest_pending`).
"""

from __future__ import annotations

from typing import Any

from statemachines.cache import PodGroupState
from statemachines.model.objects import PodGroup
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
    job_name = meta.name
    for ref in meta.owner_references or ():
        if ref.kind == "Job":
            job_name = ref.name
    entry = engine.entry(meta.namespace, job_name)
    if meta.uid in entry.pg_gone:
        if rtype == "DELETED":
            entry.pg_gone.discard(meta.uid)
        return
    current = entry.pg
    if rtype == "DELETED":
        if current is not None and current.uid in ("", meta.uid) and current.name == meta.name:
            entry.pg = None
        return
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
        event = Event.JOB_UNKNOWN if phase == "Unknown" else ""
        handle(engine, entry, Request(event=event, source="podgroup"))
