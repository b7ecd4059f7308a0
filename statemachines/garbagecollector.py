"""Volcano's garbage collector as a fold: finished vcjobs with `ttlSecondsAfterFinished` are deleted.

Volcano: `pkg/controllers/garbagecollector/garbagecollector.go`. On every vcjob add
or update, a job that is not being deleted, has `spec.ttlSecondsAfterFinished` and
is finished (`status.state.phase` Completed, Failed or Terminated; **not** Aborted)
expires at `status.state.lastTransitionTime` + ttl. Expired: it is deleted at once;
otherwise it is looked at again when the ttl is up, and deleted then if the job
(as it is then) is still expired. No lastTransitionTime: Volcano errors and retries;
nothing is decided here until the job changes.

The status read is the one in the log (the object the API server holds: Volcano's
gc reads its informer, not the job controller), and time is the log's time, so a
replay decides the same deletions. The wait is a timer of the engine's (policy
`ttlSecondsAfterFinished`, action `DeleteJob`): in replay it fires when the log's
time passes it, on the bus the decider appends its TIMER record (statemachines/
timers/). One timer per job; a changed expiry replaces it; the job's deletion
(or its deletionTimestamp, or its ttl being removed) cancels it. Expiry emits
`JobExpired` then `DeleteJob` with the job's uid as precondition (Volcano deletes
with propagation Foreground); once per job uid.
"""

from __future__ import annotations

from typing import Any

from statemachines import outputs as o
from statemachines.model.objects import Job, job_key
from statemachines.model.timefmt import add, normalize
from statemachines.model.vocabulary import FINISHED_PHASES
from statemachines.timers.rules import Timer

GC_ACTION = "DeleteJob"  # a timer with this action is the garbage collector's
GC_POLICY = "ttlSecondsAfterFinished"


def needs_cleanup(job: Job) -> bool:
    """Volcano's needsCleanup: a ttl is set and the job is finished (Completed, Failed, Terminated)."""
    status = job.status
    return (
        job.spec.ttl_seconds_after_finished is not None
        and status is not None
        and status.state.phase in FINISHED_PHASES
    )


def expiry(job: Job) -> tuple[str, str] | None:
    """(finish time, expiry time) of a job that needs cleanup; None without a lastTransitionTime."""
    ltt = job.status.state.last_transition_time if job.status is not None else None
    if not ltt:
        return None
    finished = normalize(ltt)
    return finished, add(finished, job.spec.ttl_seconds_after_finished or 0)


class GarbageCollector:
    """TTL deletion of finished vcjobs; timers live on `host` (the engine), outputs go to `host.out`."""

    def __init__(self, host: Any) -> None:
        self.host = host
        self.timers: dict[str, Timer] = {}  # job key -> its pending ttl timer
        self.expired: dict[str, str] = {}  # job key -> uid already deleted

    def emit(self, cls: type, key: str, /, **fields: Any) -> None:
        host = self.host
        fields["job"] = key  # the stamp goes into `fields`: one dict passed on (`Engine.emit`)
        fields["seq"] = host.seq
        fields["time"] = host.now
        host.out.append(cls(**fields))

    def job(self, rtype: str, job: Job) -> None:
        """A vcjob record (addJob / updateJob; a deletion only cancels)."""
        if job.spec.ttl_seconds_after_finished is None and not self.timers and not self.expired:
            return  # the common case, kept cheap: no ttl here, nothing pending or deleted anywhere
        meta = job.metadata
        key = job_key(meta.namespace, meta.name)
        if rtype == "DELETED":
            self.expired.pop(key, None)
            self._cancel(key, "job deleted")
            return
        if job.spec.ttl_seconds_after_finished is None and key not in self.timers:
            return  # the common case, kept cheap
        if meta.deletion_timestamp is not None:
            self._cancel(key, "job being deleted")
            return
        if not needs_cleanup(job):
            self._cancel(key, "job not finished or no ttlSecondsAfterFinished")
            return
        self._process(key, job)

    def _process(self, key: str, job: Job) -> None:
        """processTTL: expired now, or a timer for when it will be."""
        times = expiry(job)
        if times is None:
            self._cancel(key, "no lastTransitionTime")
            return
        finished, due = times
        if due <= self.host.now:
            self._cancel(key, "expired")
            self._expire(key, job, finished)
            return
        timer = self.timers.get(key)
        if timer is not None and timer.due == due and not timer.cancelled:
            return
        self._cancel(key, "expiry changed")
        self._schedule(key, due)

    def _expire(self, key: str, job: Job, finished: str) -> None:
        uid = job.metadata.uid
        if self.expired.get(key) == uid:
            return  # DeleteJob already sent for this job
        self.expired[key] = uid
        ttl = job.spec.ttl_seconds_after_finished or 0
        self.emit(o.JobExpired, key, uid=uid, finished=finished, ttl_seconds=ttl)
        self.emit(o.DeleteJob, key, uid=uid)

    # ------------------------------------------------------------------ timers (the engine's heap)

    def _schedule(self, key: str, due: str) -> None:
        host = self.host
        order = host.timers.next_order()
        timer = Timer(id=f"{host.seq}.{order}", job=key, key="", action=GC_ACTION, due=due, policy=GC_POLICY,
                      order=order)
        self.timers[key] = timer
        host.timers.push(timer)
        self.emit(o.TimerScheduled, key, timer=timer.id, action=GC_ACTION, due=due, policy=GC_POLICY)

    def _cancel(self, key: str, reason: str) -> None:
        timer = self.timers.pop(key, None)
        if timer is None or timer.cancelled:
            return
        timer.cancelled = True
        self.host.timers.discard(timer)
        self.emit(o.TimerCancelled, key, timer=timer.id, reason=reason)

    def fire(self, timer: Timer) -> None:
        """The ttl is up: look at the job as it is now (Volcano's fresh GET) and delete it if expired."""
        key = timer.job
        if self.timers.get(key) is timer:
            del self.timers[key]
        self.emit(o.TimerFired, key, timer=timer.id, action=timer.action)
        entry = self.host.jobs.get(key)
        job = entry.job if entry is not None else None
        if job is None or job.metadata.deletion_timestamp is not None or not needs_cleanup(job):
            return
        self._process(key, job)
