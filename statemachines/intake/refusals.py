"""REFUSED records: a command the API server refused for good, as the actuator appends it to the log.

Volcano's syncJob (`pkg/controllers/job/job_controller_actions.go`) creates every pod its cache
lacks; a create that fails (not AlreadyExists) records a Warning `FailedCreate` Event on the job,
the sync returns an error and `handleJobError` (`pkg/controllers/job/job_controller.go`) requeues
the request with the rate limiter's backoff, or, after `--max-requeue-num` (15) requeues, records
`Job failed on action SyncJob for retry limit reached` and runs TerminateJob.

vcbus caches a created pod at once (docs/fidelity.md "The cache reflects our own writes at once"),
so the refusal has to reach the decider: a refused CreatePod's record takes its pod out of the
cache (the log will never show it), the task counts follow, `SyncFailed` and the `FailedCreate`
Event say why, and the sync is requeued with backoff (a timer of policy `backoff`,
statemachines.hosted.backoff; fired in statemachines/worker.py). That sync, or any earlier one (the
job's next record), creates the pod again. The pods of one decision refused together are one failed
sync. A requeue already pending is the one chain the refusals extend (Volcano's first failed request
is requeued 15 times before any later one); a create that lands resets the count
(statemachines/intake/pods.py). One `FailedCreate` Event per failed sync, naming its first refused
pod (Volcano's lists them all); a `SyncFailed` for each. Refusals of other commands are counted as
ignored: the actuator records those as its `CommandRefused` Event.
"""

from __future__ import annotations

from typing import Any

from statemachines import outputs as o
from statemachines.hosted import BACKOFF_POLICY, backoff
from statemachines.model.records import RefusalSpec
from statemachines.model.timefmt import add
from statemachines.model.vocabulary import Action
from statemachines.task.handlers import step_task
from statemachines.task.machine import PODS_CHANGED
from statemachines.timers.rules import Timer
from statemachines.worker import follow_up, sync_failed

MAX_REQUEUE = 15  # Volcano's --max-requeue-num default
FAILED_CREATE = "FailedCreate"  # Volcano's FailedCreatePodReason


def on_refusal(engine: Any, refusal: RefusalSpec) -> None:
    if refusal.command != "CreatePod":
        engine.ignored += 1
        return
    entry = engine.jobs.get(refusal.job)
    job = entry.job if entry is not None else None
    if job is None or entry.status is None or (refusal.job_uid and job.metadata.uid != refusal.job_uid):
        engine.ignored += 1  # the job is gone, or this was for an earlier incarnation of its name
        return
    pod = entry.find_pod(refusal.task, refusal.name)
    if pod is not None and not pod.observed:  # our own create, which the log will never show
        entry.drop_pod(refusal.task, refusal.name)
        entry.idle = None
        step_task(engine, entry, refusal.task, PODS_CHANGED, refusal.name)
    answer = f"{refusal.code} {refusal.reason}: {refusal.message}" if refusal.reason else f"{refusal.code} {refusal.message}"
    error = f"failed to create pod {refusal.name}, err: {answer.strip()}"
    same_sync = bool(refusal.seq) and refusal.seq == entry.refused_seq
    entry.refused_seq = refusal.seq
    if not same_sync:  # one Event per failed sync, as Volcano's (which lists every pod it could not create)
        engine.emit(o.RecordEvent, entry, event_type="Warning", reason=FAILED_CREATE,
                    message=f"Error creating pods: [{error}]"[:1024])
    timer = entry.requeue
    if same_sync or (timer is not None and not timer.cancelled):
        engine.emit(o.SyncFailed, entry, message=error)
        return  # another pod of the same sync (one failure), or the chain's requeue is pending: it tries again
    if entry.requeues >= MAX_REQUEUE:
        entry.requeues = 0
        sync_failed(engine, entry, Action.SYNC_JOB.value, error)  # SyncFailed, ExecuteAction, TerminateJob
        follow_up(engine, entry)
        return
    engine.emit(o.SyncFailed, entry, message=error)
    requeue(engine, entry, add(engine.now, backoff(entry.requeues)))
    entry.requeues += 1


def requeue(engine: Any, entry: Any, due: str) -> None:
    """The job's sync again at `due` (`AddRateLimited`): a timer of the heap, in no delayed-action registry."""
    heap = engine.timers
    order = heap.next_order()
    timer = Timer(id=f"{engine.seq}.{order}", job=entry.key, key="", action=Action.SYNC_JOB.value, due=due,
                  policy=BACKOFF_POLICY, order=order)
    heap.push(timer)
    entry.requeue = timer
    engine.emit(o.TimerScheduled, entry, timer=timer.id, action=timer.action, due=due, policy=BACKOFF_POLICY)
