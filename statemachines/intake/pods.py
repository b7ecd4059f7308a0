"""Pod records (§4.2): the job's pod cache and task counts updated, then updatePod's request.

A pod belongs to the job its labels and annotations name (`pod_identity`);
others are ignored. Its cached state (`PodState`) is refreshed, the task's
counts follow, and the task machine steps when they moved
(statemachines/task/handlers.py); TaskCompleted and TaskFailed come from that
step. The request carries Volcano's event for the change (PodPending,
PodRunning, PodFailed with the exit code, PodEvicted, OutOfSync...).
A pod above vcbus's job version makes vcbus follow that version.
"""

from __future__ import annotations

from typing import Any

from statemachines.cache import OUT_OF_SYNC, PARTITION_ID, JobEntry, PodState, first_exit_code, identity_fields
from statemachines.following import follow_version
from statemachines.intake.jobs import forget_if_empty
from statemachines.model.objects import Pod
from statemachines.model.vocabulary import Event
from statemachines.policies import Request
from statemachines.task.handlers import step_task
from statemachines.task.machine import POD_SUCCEEDED, POD_UPDATED, PODS_CHANGED
from statemachines.worker import handle

_QUIET_TASK_PHASES = (None, "Pending", "Running")  # task phases in which retries_exhausted does not hold
# The events as plain str: a StrEnum member is slow to look up, hash and compare (Python-level
# dunders), and these are compared and hashed a few times per pod record.
OUT_OF_SYNC_EVENT = Event.OUT_OF_SYNC.value
POD_EVICTED = Event.POD_EVICTED.value
POD_PENDING = Event.POD_PENDING.value
POD_FAILED = Event.POD_FAILED.value
POD_RUNNING = Event.POD_RUNNING.value
# on_pod makes its Request with positional arguments: these, in this order
assert Request.__struct_fields__ == (
    "event", "exit_code", "task", "pod", "pod_uid", "job_uid", "partition", "job_version", "action", "source"
), Request.__struct_fields__


def on_pod(engine: Any, rtype: str, pod: Pod) -> None:
    ident = identity_fields(pod)  # `pod_identity`'s fields
    if ident is None:
        engine.ignored += 1
        return
    job_name, task, version, job_uid = ident
    meta = pod.metadata
    name = meta.name
    entry = engine.entry(meta.namespace, job_name)
    cached = entry.find_pod(task, name)
    exit_code = 0
    if rtype == "DELETED":
        gone = entry.drop_pod(task, name)
        if entry.job is None:  # the job is gone: nothing to decide, maybe nothing left to hold
            forget_if_empty(engine, entry)
            return
        step_task(engine, entry, task, PODS_CHANGED, name)
        partition = gone.partition if gone is not None else (meta.labels or {}).get(PARTITION_ID, "")
        if gone is None or gone.out_of_sync or OUT_OF_SYNC in (meta.annotations or {}):
            event = OUT_OF_SYNC_EVENT
        else:
            event = POD_EVICTED
    else:
        if cached is None or (cached.uid and cached.uid != meta.uid):
            fresh = True
            cached = PodState(name, task)
            entry.put_pod(cached)  # counted as it starts (Pending, no restarts); a replaced one's taken out
            old_phase = ""
        else:
            fresh = False
            if not cached.observed:
                old_phase = ""  # only our own CreatePod so far: it landed
                if entry.creating:
                    entry.creating.pop(name, None)
                entry.requeues = 0  # a create went through: the rate limiter forgets the job's failures
            elif rtype == "MODIFIED" and cached.resource_version == meta.resource_version:
                return  # an informer resync: ignored, as Volcano does
            else:
                old_phase = cached.phase
        phase0, restarts0, flagged0 = cached.phase, cached.restarts, cached.deleting or cached.out_of_sync
        cached.refresh(pod, version)
        # the task counts follow the refresh (statemachines/task/counts.py). An `if`, not a
        # `changed = ...` value: CPython specializes a comparison only when a jump follows it.
        if (phase0 != cached.phase or restarts0 != cached.restarts
                or flagged0 != (cached.deleting or cached.out_of_sync)):
            entry.tasks.recount(cached, phase0, restarts0, flagged0)
            counted = False
        else:
            counted = not fresh  # the task's counts are what its last step saw
        partition = cached.partition
        if version > (entry.status.version if entry.status is not None else version):
            follow_version(entry, version)
        if rtype == "ADDED":
            if not counted:
                step_task(engine, entry, task, PODS_CHANGED, name)
            event = OUT_OF_SYNC_EVENT if cached.out_of_sync else POD_PENDING
        else:
            event = update_event(engine, entry, cached, old_phase, counted)
            if event == POD_FAILED:
                exit_code = first_exit_code(pod)
    # positional arguments, in the order checked above (keywords are matched by name, field by
    # field: a few hundred instructions more on every pod record)
    handle(engine, entry, Request(event, exit_code, task, name, meta.uid, job_uid, partition, version, "", "pod"))


def update_event(engine: Any, entry: JobEntry, pod: PodState, old_phase: str, counted: bool) -> str:
    """updatePod's event; TaskCompleted and TaskFailed come from the task machine's transition.

    `counted`: the change left the task's counts as they were. The task's phase, derived
    from them, cannot move then; and unless it is Completed or Failed no TaskFailed row
    can fire either (had `retries_exhausted` held, the phase would be one of those). Such
    a step is skipped: it would change nothing."""
    phase = pod.phase
    if phase == "Succeeded" and old_phase != "Succeeded":
        trigger = POD_SUCCEEDED
    elif old_phase == phase and (phase == "Running" or phase == "Pending"):
        trigger = POD_UPDATED
    else:
        trigger = PODS_CHANGED
    if counted and (trigger == PODS_CHANGED or entry.tasks.phases.get(pod.task) in _QUIET_TASK_PHASES):
        task_event = None
    else:
        task_event = step_task(engine, entry, pod.task, trigger, pod.name)
    if pod.out_of_sync:
        return OUT_OF_SYNC_EVENT
    if phase == "Failed":
        return POD_FAILED if old_phase != "Failed" else OUT_OF_SYNC_EVENT
    if phase == "Succeeded":
        return task_event or OUT_OF_SYNC_EVENT
    if phase == "Running":
        return POD_RUNNING if old_phase != "Running" else task_event or OUT_OF_SYNC_EVENT
    if phase == "Pending":
        return POD_PENDING if old_phase != "Pending" else task_event or OUT_OF_SYNC_EVENT
    return OUT_OF_SYNC_EVENT
