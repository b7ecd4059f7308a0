"""Job records (§4.3): a job appears, changes its spec, or goes.

A job's first appearance adopts the status it carries (statemachines/following.py)
and settles its tasks' phases; a later record compares the recorded status with
vcbus's and follows its version; a spec change re-derives the task phases and
runs one OutOfSync pass. A job bigger than the engine's `max_pods` is refused
before anything changes (`statemachines.admission.bounds`).
"""

from __future__ import annotations

from typing import Any

from statemachines import outputs as o
from statemachines.admission.bounds import check_job_spec
from statemachines.cache import JobEntry
from statemachines.following import adopt, compare, follow_version
from statemachines.model.objects import Job, job_key
from statemachines.model.status import JobStatus, copy_status
from statemachines.model.vocabulary import Event
from statemachines.policies import Request
from statemachines.task.handlers import resettle
from statemachines.timers.scheduling import cancel_all
from statemachines.worker import handle


def on_job(engine: Any, rtype: str, job: Job, raw: bytes | None) -> None:
    meta = job.metadata
    key = job_key(meta.namespace, meta.name)
    entry = engine.jobs.get(key)
    # before any change: the record is set aside whole. A spec the entry already holds
    # (the same object: replay decodes a job's unchanged spec once) passed this check.
    if rtype != "DELETED" and (entry is None or entry.job is None or entry.job.spec is not job.spec):
        check_job_spec(job.spec, engine.max_pods)
    if entry is None:
        entry = engine.entry(meta.namespace, meta.name)
    if rtype == "DELETED":
        if entry.job is not None:
            entry.job = None
            entry.deleted = True
            engine.emit(o.JobDeleted, entry, uid=meta.uid)
            cancel_all(engine, entry, "job deleted")
        forget_if_empty(engine, entry)
        return
    old = entry.job
    if old is not None and old.metadata.resource_version == meta.resource_version and meta.resource_version:
        return
    if raw is not None and engine.renders:
        entry.raw = raw
    recorded = job.status
    if old is None or old.metadata.uid != meta.uid:
        first_sight(engine, entry, job)
        return
    entry.job = job
    if recorded is not None:
        # `compare`'s and `follow_version`'s own first tests, made here as well: most job records
        # only write a status vcbus has already seen (a third of a replay's records), and then
        # neither has anything to do
        phase = recorded.state.phase
        retry = recorded.retry_count
        if phase and entry.recorded != (phase, retry):
            compare(engine, entry, phase, retry, meta.resource_version)
        version = recorded.version
        status = entry.status
        if status is not None and version != status.version and (phase, version) not in entry.versions:
            follow_version(entry, version, recorded=phase)
    if old is None or (old.spec is not job.spec and old.spec != job.spec):
        resettle(engine, entry)
        engine.spec_changed = True
        try:
            handle(engine, entry, Request(event=Event.OUT_OF_SYNC, source="job"))
        finally:
            engine.spec_changed = False


def forget_if_empty(engine: Any, entry: JobEntry) -> None:
    """Like Volcano's cache: a deleted job's entry goes once its last pod is gone."""
    if entry.job is None and not entry.pods:
        engine.jobs.pop(entry.key, None)


def first_sight(engine: Any, entry: JobEntry, job: Job) -> None:
    entry.job = job
    entry.pvcs = set()
    entry.deleted = False
    entry.followup = False
    recorded = job.status
    if recorded is not None and recorded.state.phase:
        entry.status = adopt(recorded)
        entry.recorded = (recorded.state.phase, recorded.retry_count)
        entry.trail = [(recorded.state.phase, recorded.retry_count)]
    else:
        entry.status = JobStatus()
        entry.recorded = None
        entry.trail = []
    entry.versions = {(entry.status.state.phase, entry.status.version)}  # what the log showed is no news
    engine.emit(
        o.JobObserved,
        entry,
        uid=job.metadata.uid,
        adopted_phase=entry.status.state.phase,
        retry_count=entry.status.retry_count,
        version=entry.status.version,
        status=copy_status(entry.status) if entry.recorded is not None else None,
    )
    resettle(engine, entry)
    handle(engine, entry, Request(event=Event.OUT_OF_SYNC, source="job"))
