"""Volcano's cronjob controller as a fold: CronJob and vcjob records and timers in, decisions out.

Volcano: `pkg/controllers/cronjob/cronjob_controller.go` (sync, syncCronJob),
`cronjob_controller_handler.go` (what enqueues a sync; processFinishedJobs,
processCtlJobAndActiveJob, processConcurrencyPolicy, createJob), `cronjob_controller_util.go`
(the schedule: statemachines/cronjobs/schedule.py). A sync runs on a CronJob ADDED or
MODIFIED record (a changed schedule or time zone waits for its next time instead), on any
record of a vcjob the CronJob controls, and when its timer fires. A sync's requeue is the
CronJob's one timer (the engine's TimerHeap, action `SyncCronJob`): an earlier time replaces
a later one, as Volcano's delaying work queue keeps the earliest.

A sync that fails (an invalid schedule or zone, a failed Get) writes no status and is requeued
as Volcano's `AddRateLimited` requeues it: after 5 ms doubled per failure in a row, at most
1000 s, without end (statemachines.hosted.backoff; the timer's policy `backoff`); a sync that
requeues for a schedule time resets the count (`Forget`).

Where vcbus differs: the created vcjob's uid is only known from its first record, so the
status write Volcano makes after creating (the run in `status.active`, `lastScheduleTime`)
is made when that record comes (until then the run counts as scheduled); a vcjob vcbus asked
to delete counts as gone at once.
"""

from __future__ import annotations

from typing import Any

import msgspec

from statemachines.cronjobs import machine as m
from statemachines.cronjobs import schedule as sch
from statemachines.hosted import HostedController, JobLister, owner_key
from statemachines.model.cronjob import API_VERSION, FORBID, REPLACE, CronJob, CronJobStatus, ObjectReference
from statemachines.model.objects import Job
from statemachines.model.timefmt import fmt, parse
from statemachines.model.zone import Zone
from statemachines.outputs import (
    CreateCronJobRun,
    CronJobRunChanged,
    CronJobStateChanged,
    DeleteCronJobRun,
    UpdateCronJobStatus,
)
from statemachines.timers.rules import Timer

ACTION = "SyncCronJob"
KIND_KEY = "cronjob"  # its outputs' key: `<namespace>/cronjob:<name>` (statemachines.hosted.owner_key)
POLICY = "schedule"
SCHEDULED_ANNOTATION = "volcano.sh/cronjob-scheduled-timestamp"
FINISHED = {"Completed": "succeed", "Failed": "fail", "Terminated": "terminate"}
_spec_decoder = msgspec.json.Decoder()


def controller_ref(job: Job) -> Any:
    for ref in job.metadata.owner_references or ():
        if ref.controller:
            return ref
    return None


class CronEntry:
    __slots__ = ("key", "cronjob", "zones", "status", "trail", "state", "timer", "failures", "pending", "runs",
                 "warned")

    def __init__(self, key: str, cronjob: CronJob, zones: dict[str, Zone]) -> None:
        self.key = key
        self.cronjob = cronjob
        self.zones = zones
        self.status = cronjob.status  # as we believe it: the record's, overlaid by our writes
        self.trail: list[CronJobStatus] = [cronjob.status]
        self.state = m.NEW
        self.timer: Timer | None = None
        self.failures = 0  # failed syncs since the last that requeued for a schedule time (the rate limiter's)
        self.pending: dict[str, int] = {}  # run name -> scheduled time, created but not seen yet
        self.runs: dict[str, str] = {}  # run name -> its state
        self.warned: set[int] = set()  # scheduled times reported missed


class CronJobController(HostedController):
    """Outputs go to `host.out` stamped with `host.seq`/`host.now`; timers on `host.timers`."""

    KIND = "CronJob"
    API_VERSION = API_VERSION
    ACTION = ACTION
    KIND_KEY = KIND_KEY

    def __init__(self, host: Any, lister: JobLister | None = None) -> None:
        super().__init__(host, lister)
        self.cronjobs: dict[str, CronEntry] = {}

    # ------------------------------------------------------------------ output

    def event(self, e: CronEntry, event_type: str, reason: str, message: str) -> None:
        self.event_on(e.key, e.cronjob.metadata.name, event_type, reason, message)

    def run(self, e: CronEntry, name: str, scheduled: int | None, trigger: str, cause: str) -> None:
        before = e.runs.get(name)
        due = trigger in ("create", "skip", "miss")
        if before is None or due and before in m.ENDED_RUNS:
            before = m.DUE if due else m.ACTIVE
        after = m.fire_run(before, trigger)
        if after == before:
            return
        e.runs[name] = after
        when = fmt(scheduled) if scheduled is not None else ""
        self.emit(CronJobRunChanged, e.key, run=name, scheduled=when, from_state=before, to_state=after, cause=cause)

    # ------------------------------------------------------------------ input

    def cronjob(self, rtype: str, cj: CronJob, zones: dict[str, Zone]) -> None:
        meta = cj.metadata
        if self.keep(rtype, (meta.namespace, meta.name), 0, self.cronjob, cj, zones):
            return  # held: statemachines.hosted
        key = owner_key(KIND_KEY, meta.namespace, meta.name)
        e = self.cronjobs.get(key)
        if rtype == "DELETED":
            if e is not None:
                self._cancel(e, "CronJob deleted")
                self._move(e, m.DELETE, m.Check(), "CronJob deleted")
                del self.cronjobs[key]
            return
        if e is None or e.cronjob.metadata.uid != meta.uid:
            e = self.cronjobs[key] = CronEntry(key, cj, zones)
            self.sync(e)
            return
        old = e.cronjob
        if old.metadata.resource_version == meta.resource_version:
            return
        e.cronjob, e.zones = cj, zones
        if cj.status in e.trail:
            del e.trail[: e.trail.index(cj.status)]  # our write, lagging or caught up
        else:
            e.status, e.trail = cj.status, [cj.status]  # someone else's: adopted
        if old.spec.schedule != cj.spec.schedule or old.spec.time_zone != cj.spec.time_zone:
            spec, _ = sch.format_schedule(cj.spec.schedule, cj.spec.time_zone, zones)
            try:
                schedule = sch.parse_standard(spec, zones)
            except sch.ScheduleError:
                self.event(e, "Warning", "UnParseableCronJobSchedule",
                           f"unparseable schedule for cronjob: {cj.spec.schedule}")
                return
            self._requeue(e, self._next_due(e, schedule, self._now()))
            return
        self.sync(e)

    def on_job(self, rtype: str, job: Job) -> None:
        if self.held is not None:
            return  # listed; synced when started
        if rtype == "DELETED":
            self.deleting.discard(job.metadata.uid)
        e = self._controlled_by(job)
        if e is not None:
            self.sync(e)

    def entry(self, key: str) -> CronEntry | None:
        return self.cronjobs.get(key)

    # ------------------------------------------------------------------ the sync

    def _now(self) -> int:
        return parse(self.host.now)

    def _controlled_by(self, job: Job) -> CronEntry | None:
        ref = controller_ref(job)
        if ref is None or ref.api_version != API_VERSION or ref.kind != "CronJob":
            return None
        e = self.cronjobs.get(owner_key(KIND_KEY, job.metadata.namespace, ref.name))
        return e if e is not None and e.cronjob.metadata.uid == ref.uid else None

    def _owned(self, e: CronEntry) -> list[Job]:
        meta = e.cronjob.metadata
        out = []
        for job in self.jobs.values():
            ref = controller_ref(job)
            if (job.metadata.namespace == meta.namespace and ref is not None and ref.kind == "CronJob"
                    and ref.name == meta.name and ref.uid == meta.uid and job.metadata.uid not in self.deleting):
                out.append(job)
        return sorted(out, key=lambda j: j.metadata.name)

    def _last_schedule(self, e: CronEntry, status: CronJobStatus) -> int | None:
        times = [parse(status.last_schedule_time)] if status.last_schedule_time else []
        times.extend(e.pending.values())
        return max(times) if times else None

    def sync(self, e: CronEntry) -> None:
        cj = e.cronjob
        if cj.metadata.deletion_timestamp is not None:
            self._move(e, m.SYNC, m.Check(terminating=True), "the CronJob is being deleted")
            return
        now = self._now()
        active = list(e.status.active or [])
        status = {"last_schedule": e.status.last_schedule_time, "last_successful": e.status.last_successful_time}
        owned = self._owned(e)
        changed = self._adopt_pending(e, owned, active, status)
        changed = self._finished(e, owned, active, status) or changed
        changed = self._ctl_and_active(e, owned, active) or changed
        spec = cj.spec
        if spec.suspend:
            self._write(e, active, status, changed)
            self._move(e, m.SYNC, m.Check(suspended=True), "spec.suspend is true")
            return
        try:
            if spec.time_zone is not None:
                try:
                    sch.load_location(spec.time_zone, e.zones)
                except sch.ScheduleError as err:
                    self.event(e, "Warning", "InvalidTimeZone", f'Invalid time zone "{spec.time_zone}": {err}')
                    raise
            text, warn = sch.format_schedule(spec.schedule, spec.time_zone, e.zones)
            if warn:
                self.event(e, "Warning", "UnsupportedSchedule",
                           f'CRON_TZ or TZ in the schedule "{spec.schedule}" is not officially supported. '
                           "If set, the TimeZone field will be ignored during execution.")
            schedule = sch.parse_standard(text, e.zones)
        except sch.ScheduleError as err:
            self._move(e, m.SYNC, m.Check(invalid=True), str(err))
            self.requeue_failed(e)
            return
        created = parse(cj.metadata.creation_timestamp or fmt(0))
        last = self._last_schedule(e, CronJobStatus(last_schedule_time=status["last_schedule"]))
        recent = sch.next_schedule_time(created=created, last_schedule=last,
                                        starting_deadline=spec.starting_deadline_seconds, now=now, schedule=schedule)
        if recent.missed == sch.MANY_MISSED:
            self.event(e, "Warning", "TooManyMissedTimes",
                       "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew")
        if recent.error:
            self.event(e, "Warning", "InvalidSchedule", f"Error getting schedule time: {recent.error}")
            self._move(e, m.SYNC, m.Check(invalid=True), recent.error)
            self.requeue_failed(e)
            return
        self._move(e, m.SYNC, m.Check(), "waiting for the next scheduled time")
        scheduled = recent.most_recent
        if scheduled is None:
            self._report_missed(e, schedule, created, last, now)
            self._finish(e, schedule, active, status, changed, now)
            return
        name = sch.job_name(cj.metadata.name, scheduled)
        if any(r.name == name for r in active) or name in e.pending or last == scheduled:
            self._finish(e, schedule, active, status, changed, now)
            return
        if spec.concurrency_policy == FORBID and active:
            self.event(e, "Warning", "ForbidConcurrent", "Skipping job creation because another job is already running")
            self.run(e, name, scheduled, "skip", f"concurrencyPolicy Forbid: {active[0].name} is still active")
            self._finish(e, schedule, active, status, changed, now)
            return
        if spec.concurrency_policy == REPLACE and active:
            self.event(e, "Warning", "ReplaceConcurrent", "Replacing active job for CronJob")
            for ref in list(active):
                job = self.jobs.get(f"{ref.namespace}/{ref.name}")
                if job is None or job.metadata.uid in self.deleting:
                    self.event(e, "Warning", "FailedGet", f'Get job: jobs.batch.volcano.sh "{ref.name}" not found')
                    self._move(e, m.SYNC, m.Check(), f"Get job {ref.name} failed")
                    self.requeue_failed(e)
                    return
                self._delete(e, job, active, "replace", f"concurrencyPolicy Replace: run {name} is due")
                changed = True
        existing = self.jobs.get(f"{cj.metadata.namespace}/{name}")
        if existing is not None and existing.metadata.uid not in self.deleting:
            ref = controller_ref(existing)
            if ref is None or ref.uid != cj.metadata.uid:
                owner = ref.name if ref is not None else "none"
                self.event(e, "Warning", "ForeignJob",
                           f"Job {name} exists but is not owned by this CronJob (current owner: {owner})")
            self._finish(e, schedule, active, status, changed, now)
            return
        self._create(e, name, scheduled)
        self._finish(e, schedule, active, status, changed, now)

    # ------------------------------------------------------------------ the parts of a sync

    def _adopt_pending(self, e: CronEntry, owned: list[Job], active: list, status: dict) -> bool:
        """A created run's first record: it joins `status.active`, with `lastScheduleTime` (Volcano's write)."""
        changed = False
        for job in owned:
            scheduled = e.pending.pop(job.metadata.name, None)
            if scheduled is None:
                continue
            meta = job.metadata
            active.append(ObjectReference(kind="Job", namespace=meta.namespace, name=meta.name, uid=meta.uid,
                                          api_version=API_VERSION, resource_version=meta.resource_version))
            if status["last_schedule"] is None or parse(status["last_schedule"]) < scheduled:
                status["last_schedule"] = fmt(scheduled)
            self.run(e, meta.name, scheduled, "observe", "its vcjob was created")
            changed = True
        return changed

    def _finished(self, e: CronEntry, owned: list[Job], active: list, status: dict) -> bool:
        """processFinishedJobs: finished runs leave `status.active`; lastSuccessfulTime; the history limits."""
        changed = False
        succeeded: list[Job] = []
        failed: list[Job] = []
        for job in owned:
            phase = job.status.state.phase if job.status is not None else ""
            if phase not in FINISHED:
                continue
            if any(r.uid == job.metadata.uid for r in active):
                active[:] = [r for r in active if r.uid != job.metadata.uid]
                self.event(e, "Normal", "SawCompletedJob", f"Saw completed job: {job.metadata.name} in active, remove")
                changed = True
            if e.runs.get(job.metadata.name, m.ACTIVE) in (m.CREATED, m.ACTIVE):  # a run from before: Active
                self.run(e, job.metadata.name, None, FINISHED[phase], f"its vcjob is {phase}")
            if phase == "Completed":
                finish = job.status.state.last_transition_time if job.status is not None else None
                if status["last_successful"] is None or finish and parse(finish) > parse(status["last_successful"]):
                    status["last_successful"] = finish
                    changed = True
                succeeded.append(job)
            elif phase == "Failed":
                failed.append(job)
        spec = e.cronjob.spec
        for jobs, limit in ((succeeded, spec.successful_jobs_history_limit), (failed, spec.failed_jobs_history_limit)):
            if limit is None or len(jobs) <= limit:
                continue
            jobs.sort(key=lambda j: (j.metadata.creation_timestamp is None, j.metadata.creation_timestamp or "",
                                     j.metadata.name))
            for job in jobs[: len(jobs) - limit]:
                self._delete(e, job, active, "prune", f"history limit {limit} reached")
                changed = True
        return changed

    def _ctl_and_active(self, e: CronEntry, owned: list[Job], active: list) -> bool:
        """processCtlJobAndActiveJob: orphaned vcjobs warned about, stale references removed."""
        uids = {j.metadata.uid for j in owned}
        for job in owned:
            phase = job.status.state.phase if job.status is not None else ""
            if phase not in FINISHED and not any(r.uid == job.metadata.uid for r in active):
                self.event(e, "Warning", "OrphanedJob", "Detected orphaned job forgotten or not managed by "
                           f"controller: {job.metadata.name} (UID: {job.metadata.uid})")
        changed = False
        for ref in list(active):
            if ref.uid in uids:
                continue
            named = self.jobs.get(f"{ref.namespace}/{ref.name}")
            if named is None or named.metadata.uid in self.deleting:
                self.event(e, "Warning", "StaleReference", f'Active job "{ref.name}" no longer exists (UID: {ref.uid})')
            elif named.metadata.uid != ref.uid:
                self.event(e, "Warning", "StaleReference", f'Active job reference "{ref.name}" points to a '
                           f"different UID (expected: {ref.uid}, actual: {named.metadata.uid})")
            else:
                continue
            active[:] = [r for r in active if r.uid != ref.uid]
            if ref.name in e.runs:
                self.run(e, ref.name, None, "vanish", "its vcjob is gone")
            changed = True
        return changed

    def _delete(self, e: CronEntry, job: Job, active: list, trigger: str, cause: str) -> None:
        meta = job.metadata
        self.deleting.add(meta.uid)
        self.emit(DeleteCronJobRun, e.key, name=meta.name, uid=meta.uid)
        active[:] = [r for r in active if r.uid != meta.uid]
        self.event(e, "Normal", "SuccessfulDelete", f'Deleted job "{meta.name}"')
        self.run(e, meta.name, None, trigger, cause)

    def _create(self, e: CronEntry, name: str, scheduled: int) -> None:
        cj = e.cronjob
        template = cj.spec.job_template
        annotations = dict(template.metadata.annotations or {})
        zone = sch.load_location(cj.spec.time_zone or "", e.zones)
        annotations[SCHEDULED_ANNOTATION] = sch.scheduled_timestamp(scheduled, zone)
        self.emit(CreateCronJobRun, e.key, name=name, cronjob=cj.metadata.name, cronjob_uid=cj.metadata.uid,
                  labels=dict(template.metadata.labels or {}), annotations=annotations,
                  spec=_spec_decoder.decode(template.spec))
        self.event(e, "Normal", "SuccessfulCreate", f"Created job {name} for CronJob {cj.metadata.namespace}/{cj.metadata.name}")
        e.pending[name] = scheduled
        self.run(e, name, scheduled, "create", f"scheduled at {fmt(scheduled)}")

    def _report_missed(self, e: CronEntry, schedule: Any, created: int, last: int | None, now: int) -> None:
        """A time the deadline cut: without it, mostRecentScheduleTime would have given one."""
        if e.cronjob.spec.starting_deadline_seconds is None:
            return
        plain = sch.most_recent_schedule_time(created=created, last_schedule=last, starting_deadline=None, now=now,
                                              schedule=schedule, include_deadline=False)
        t = plain.most_recent
        if t is None or t in e.warned or (last is not None and t <= last):
            return
        e.warned.add(t)
        name = sch.job_name(e.cronjob.metadata.name, t)
        self.run(e, name, t, "miss", f"startingDeadlineSeconds {e.cronjob.spec.starting_deadline_seconds} "
                 f"passed at {fmt(t + e.cronjob.spec.starting_deadline_seconds)}")

    def _finish(self, e: CronEntry, schedule: Any, active: list, status: dict, changed: bool, now: int) -> None:
        """A sync that ends with its next schedule time: Volcano's `Forget` (the failures count again from 0),
        the status write, then `AddAfter`."""
        e.failures = 0
        self._write(e, active, status, changed)
        self._requeue(e, self._next_due(e, schedule, now))

    def _next_due(self, e: CronEntry, schedule: Any, now: int) -> int:
        cj = e.cronjob
        created = parse(cj.metadata.creation_timestamp or fmt(0))
        return sch.next_due(created=created, last_schedule=self._last_schedule(e, e.status), now=now,
                            schedule=schedule)

    def _write(self, e: CronEntry, active: list, status: dict, changed: bool) -> None:
        if not changed:
            return
        new = CronJobStatus(active=active or None, last_schedule_time=status["last_schedule"],
                            last_successful_time=status["last_successful"])
        e.status = new
        e.trail.append(new)
        meta = e.cronjob.metadata
        self.emit(UpdateCronJobStatus, e.key, name=meta.name, status=new, uid=meta.uid,
                  resource_version=meta.resource_version)

    # ------------------------------------------------------------------ machine and timers

    def _move(self, e: CronEntry, trigger: str, check: m.Check, cause: str) -> None:
        after = m.fire_cronjob(e.state, trigger, check)
        if after != e.state:
            self.emit(CronJobStateChanged, e.key, from_state=e.state, to_state=after, cause=cause)
            e.state = after

    def _requeue(self, e: CronEntry, due_unix: int) -> None:
        if due_unix != sch.ZERO:
            self.requeue(e, fmt(due_unix), POLICY)

    def _cancel(self, e: CronEntry, reason: str) -> None:
        timer, e.timer = e.timer, None
        self.cancel(timer, reason)
