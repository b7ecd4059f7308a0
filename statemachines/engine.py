"""The engine: a log of watch records in, domain events and commands out.

`Engine.apply(seq, record)` is the whole controller as a pure function of the
log: it updates the cache (§4), turns the change into requests, resolves each
request to an action (§5), executes it in the job's phase (§2, §6, §7) and
returns what it decided, every output stamped with `seq`. No clock, no I/O, no
randomness: time comes from the records (`time`, else the latest timestamp in
the object), ids from `seq`. The same log in gives the same outputs, always.

Like Volcano, a status write that changes the phase is followed by one more
pass in the new phase (Volcano gets it from its own write's watch event). So
status changes recorded in the log are *someone else's* writes: they are
compared with ours (`Divergence`) and never drive decisions.
"""

from __future__ import annotations

import heapq
from typing import Any, Callable


from statemachines import outputs as o
from statemachines.cache import (
    OUT_OF_SYNC,
    PARTITION_ID,
    JobEntry,
    PodGroupState,
    PodState,
    first_exit_code,
    object_time,
    pod_identity,
)
from statemachines.garbagecollector import GarbageCollector
from statemachines.job.causes import combine, policy_text, request_text
from statemachines.job.controller import SyncError, Target, kill_job, kill_target, sync_job
from statemachines.job.handling import PodOp
from statemachines.job.machine import handling
from statemachines.objects import Command, Job, Pod, PodGroup, Queue, job_key
from statemachines.policies import Request, Resolution, resolve
from statemachines.queues.controller import QueueController
from statemachines.records import Decoded, Ignored, TimerRecord
from statemachines.status import JobCondition, JobState, JobStatus, copy_status
from statemachines.timefmt import ZERO_TIME, add, go_duration, normalize
from statemachines.timers import RULE_A_EVENTS, Timer, cancels_on_execute, rule_a_cancels, rule_b_cancels
from statemachines.vocabulary import Action, Event

MAX_FOLLOWUPS = 16  # a phase change triggers one more pass; no chain in Volcano's graph is longer
JOB_TARGETS = {Action.RESTART_TASK: "task", Action.RESTART_POD: "pod", Action.RESTART_PARTITION: "partition"}


class Engine:
    """The job controller's decisions as a fold over a log of watch records.

    Options:
    - `explain`: attach to each resolution why the other policies did not match.
    - `timers`: "by-time" fires delayed actions when the log's time passes them
      (replaying kubectl logs); "recorded" fires them only on TIMER records
      (the bus, where the decider appends those records).
    - `strict_queues`: None (default) checks a job's queue only once the log has
      shown a Queue; True always; False never.
    - `render_pod` / `render_podgroup`: build full manifests into CreatePod /
      CreatePodGroup (the cluster side needs them; replay does not).
    """

    def __init__(
        self,
        *,
        explain: bool = False,
        timers: str = "by-time",
        strict_queues: bool | None = None,
        render_pod: Callable[..., dict[str, Any]] | None = None,
        render_podgroup: Callable[..., dict[str, Any]] | None = None,
    ) -> None:
        if timers not in ("by-time", "recorded"):
            raise ValueError(f"timers must be 'by-time' or 'recorded', not {timers!r}")
        self.explain = explain
        self.timer_mode = timers
        self.strict_queues = strict_queues
        self._render_pod = render_pod
        self._render_podgroup = render_podgroup
        self.jobs: dict[str, JobEntry] = {}
        self.queues: dict[str, Queue] = {}
        self.queues_seen = False
        self.timers: list[tuple[str, int, Timer]] = []  # heap by (due, order)
        self.timer_index: dict[str, Timer] = {}
        self._timer_order = 0
        self.now = ZERO_TIME
        self.seq = 0
        self.out: list[o.Output] = []
        self.ignored = 0
        self.spec_changed = False  # the request being handled comes from a change of the job spec
        self._why: object = None  # what is being executed: (Request, Resolution), a Timer or a text
        # Volcano's other controllers, folds of the same log (statemachines/queues/, garbagecollector.py)
        self.queue_controller = QueueController(self)
        self.gc = GarbageCollector(self)

    # ------------------------------------------------------------------ plumbing

    def emit(self, cls: type, entry: JobEntry, **fields: Any) -> None:
        self.out.append(cls(job=entry.key, seq=self.seq, time=self.now, **fields))

    def queue_exists(self, name: str) -> bool:
        strict = self.queues_seen if self.strict_queues is None else self.strict_queues
        return not strict or name in self.queues

    def job_forwarding(self, entry: JobEntry) -> bool:
        """The job's queue has `extendClusters`: Volcano's syncJob marks the job and its pods forwarded."""
        queue = self.queues.get(entry.job.spec.queue) if entry.job is not None else None
        return queue is not None and bool(queue.spec.extend_clusters)

    def render_pod(self, entry: JobEntry, task: str, index: int, status: JobStatus) -> dict | None:
        if self._render_pod is None or entry.raw is None:
            return None
        return self._render_pod(entry.raw, task, index, status, job_forwarding=self.job_forwarding(entry))

    def render_podgroup(self, entry: JobEntry) -> dict | None:
        if self._render_podgroup is None or entry.raw is None:
            return None
        return self._render_podgroup(entry.raw, job_forwarding=self.job_forwarding(entry))

    def cause(self, entry: JobEntry, guard: str) -> str:
        """`PhaseChanged.cause`: the guard that held and the request being executed, in words."""
        why = self._why
        if isinstance(why, Timer):
            request = (
                f"timeout expired: {request_text(why.event, why.task, why.pod, 0)}, "
                f"policy {policy_text(entry.job, why.policy) or why.policy}"
            )
        elif isinstance(why, str):
            request = why
        elif isinstance(why, tuple):
            req, res = why
            if req.source == "command":
                request = f"command {req.action}"
            elif req.source == "self":
                request = ""  # the pass after our own status write: the guard says it all
            elif req.source == "podgroup":
                request = f"PodGroup {entry.pg.name} phase changed to {entry.pg.phase}" if entry.pg else ""
            elif req.source == "job":
                request = "job spec changed" if self.spec_changed else ""
            else:
                request = request_text(req.event, req.task, req.pod, req.exit_code)
                if res.policy != "default":
                    request += f", policy {policy_text(entry.job, res.policy) or res.policy}"
        else:
            request = ""
        return combine(guard, request)

    def entry(self, namespace: str, name: str) -> JobEntry:
        key = job_key(namespace, name)
        e = self.jobs.get(key)
        if e is None:
            e = self.jobs[key] = JobEntry(key, namespace, name)
        return e

    # ------------------------------------------------------------------ input

    def apply(self, seq: int, record: Decoded, *, raw: bytes | None = None) -> list[o.Output]:
        """Fold one record; return what was decided because of it."""
        self.seq = seq
        self.out = out = []
        rcls = record.__class__
        if rcls is Ignored:
            self.ignored += 1
            return out
        if rcls is TimerRecord:
            if record.time:  # type: ignore[union-attr]
                self._advance(normalize(record.time))  # type: ignore[union-attr]
            self._fire(record.timer.id)  # type: ignore[union-attr]
            return out
        obj = record.object  # type: ignore[union-attr]
        kind = obj.__class__
        when = record.time or (object_time(obj) if kind is Pod else self._object_time(obj))  # type: ignore
        if when:
            when = normalize(when)
            if when > self.now:
                self.now = when
        by_time = self.timer_mode == "by-time"
        timers = self.timers
        if by_time and timers and timers[0][0] <= self.now:
            self.fire_due(self.now)
        if kind is Pod:
            self._pod(record.type, obj)  # type: ignore[union-attr]
        elif isinstance(obj, Job):
            self._job(record.type, obj, raw)
            self.gc.job(record.type, obj)
        elif isinstance(obj, PodGroup):
            self._podgroup(record.type, obj)
            self.queue_controller.podgroup(record.type, obj)
        elif isinstance(obj, Queue):
            self.queues_seen = True
            if record.type == "DELETED":
                self.queues.pop(obj.metadata.name, None)
            else:
                self.queues[obj.metadata.name] = obj
            self.queue_controller.queue(record.type, obj)
        elif isinstance(obj, Command):
            self._command(record.type, obj)
            self.queue_controller.command(record.type, obj)
        timers = self.timers  # fire_due may have replaced the list (`_fire` rebuilds it)
        if by_time and timers and timers[0][0] <= self.now:
            self.fire_due(self.now)  # a delay <= 0 fires at once, right after the request that set it
        return out

    def finish(self, until: str | None = None) -> list[o.Output]:
        """End of input: fire timers due by `until` (by-time mode); later ones stay pending."""
        self.out = []
        if until is not None and self.timer_mode == "by-time":
            self._advance(normalize(until))
            self.fire_due(self.now)
        return self.out

    def _advance(self, when: str) -> None:
        if when > self.now:
            self.now = when

    @staticmethod
    def _object_time(obj: Any) -> str | None:
        if isinstance(obj, Pod):
            return object_time(obj)
        meta = obj.metadata
        best = meta.deletion_timestamp or meta.creation_timestamp
        if isinstance(obj, Job) and obj.status is not None:
            ltt = obj.status.state.last_transition_time
            if ltt and (best is None or ltt > best):
                best = ltt
        return best

    # ------------------------------------------------------------------ jobs (§4.3)

    def _job(self, rtype: str, job: Job, raw: bytes | None) -> None:
        meta = job.metadata
        entry = self.entry(meta.namespace, meta.name)
        if rtype == "DELETED":
            if entry.job is not None:
                entry.job = None
                entry.deleted = True
                self.emit(o.JobDeleted, entry, uid=meta.uid)
                for timer in list(entry.timers.values()):
                    self._cancel(entry, timer, "job deleted")  # type: ignore[arg-type]
            self._forget_if_empty(entry)
            return
        old = entry.job
        if old is not None and old.metadata.resource_version == meta.resource_version and meta.resource_version:
            return
        if raw is not None and self._render_pod is not None:
            entry.raw = raw
        recorded = job.status
        if old is None or old.metadata.uid != meta.uid:
            self._first_sight(entry, job)
            return
        entry.job = job
        if recorded is not None:
            self._compare(entry, recorded.state.phase, recorded.retry_count, meta.resource_version)
        if old is None or old.spec != job.spec:
            self.spec_changed = True
            try:
                self._handle(entry, Request(event=Event.OUT_OF_SYNC, source="job"))
            finally:
                self.spec_changed = False

    def _forget_if_empty(self, entry: JobEntry) -> None:
        """Like Volcano's cache: a deleted job's entry goes once its last pod is gone."""
        if entry.job is None and not entry.pods:
            self.jobs.pop(entry.key, None)

    def _first_sight(self, entry: JobEntry, job: Job) -> None:
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
        self.emit(
            o.JobObserved,
            entry,
            uid=job.metadata.uid,
            adopted_phase=entry.status.state.phase,
            retry_count=entry.status.retry_count,
            version=entry.status.version,
            status=copy_status(entry.status) if entry.recorded is not None else None,
        )
        self._handle(entry, Request(event=Event.OUT_OF_SYNC, source="job"))

    def _compare(self, entry: JobEntry, phase: str, retry: int, rv: str) -> None:
        """A recorded status is someone else's write: fine if it is a state we passed through.

        Writes reach the log after the events that caused them, so the recorded
        status may lag behind ours. It diverges when it is not on the trail of
        states vcbus went through since the last recorded one.
        """
        if not phase or entry.recorded == (phase, retry):
            return
        entry.recorded = (phase, retry)
        trail = entry.trail
        if (phase, retry) in trail:
            del trail[: trail.index((phase, retry))]
            return
        ours = entry.status
        assert ours is not None
        self._diverged(entry, phase, retry, rv)
        entry.trail = [(ours.state.phase, ours.retry_count)]

    def _diverged(self, entry: JobEntry, phase: str, retry: int, rv: str, *, final: bool = False) -> None:
        ours = entry.status
        assert ours is not None
        suffix = " (end of log)" if final else ""
        if phase != ours.state.phase:
            self.emit(
                o.Divergence,
                entry,
                field="phase" + suffix,
                recorded=phase,
                decided=ours.state.phase,
                resource_version=rv,
            )
        if retry != ours.retry_count:
            self.emit(
                o.Divergence,
                entry,
                field="retryCount" + suffix,
                recorded=str(retry),
                decided=str(ours.retry_count),
                resource_version=rv,
            )

    def final_divergences(self, *, cut: bool = False) -> list[o.Output]:
        """At the end of a log: jobs whose last recorded status is not where vcbus ended.

        `cut`: the log was cut short (`--until`), so a status write that was still to
        come is no divergence: a recorded status on the trail of states vcbus went
        through since (a cut in mid-transition) is left out."""
        self.out = []
        for entry in self.jobs.values():
            if entry.recorded is None or entry.status is None or entry.job is None:
                continue
            phase, retry = entry.recorded
            if (phase, retry) != (entry.status.state.phase, entry.status.retry_count):
                if cut and (phase, retry) in entry.trail:
                    continue
                self._diverged(entry, phase, retry, "", final=True)
        return self.out

    # ------------------------------------------------------------------ pods (§4.2)

    def _pod(self, rtype: str, pod: Pod) -> None:
        ident = pod_identity(pod)
        if ident is None:
            self.ignored += 1
            return
        meta = pod.metadata
        entry = self.entry(meta.namespace, ident.job_name)
        cached = entry.find_pod(ident.task, meta.name)
        req = Request(
            task=ident.task,
            pod=meta.name,
            pod_uid=meta.uid,
            job_uid=ident.job_uid,
            job_version=ident.version,
            source="pod",
        )
        if rtype == "DELETED":
            gone = entry.drop_pod(ident.task, meta.name)
            if entry.job is None:  # the job is gone: nothing to decide, maybe nothing left to hold
                self._forget_if_empty(entry)
                return
            req.partition = gone.partition if gone is not None else (meta.labels or {}).get(PARTITION_ID, "")
            if gone is None or gone.out_of_sync or OUT_OF_SYNC in (meta.annotations or {}):
                req.event = Event.OUT_OF_SYNC
            else:
                req.event = Event.POD_EVICTED
        else:
            if cached is None or (cached.uid and cached.uid != meta.uid):
                cached = PodState(meta.name, ident.task)
                entry.put_pod(cached)
                old_phase = ""
            elif not cached.observed:
                old_phase = ""  # only our own CreatePod so far
            else:
                if rtype == "MODIFIED" and cached.resource_version == meta.resource_version:
                    return  # an informer resync: ignored, as Volcano does
                old_phase = cached.phase
            cached.refresh(pod, ident.version)
            req.partition = cached.partition
            if rtype == "ADDED":
                req.event = Event.OUT_OF_SYNC if cached.out_of_sync else Event.POD_PENDING
            else:
                req.event = self._update_event(entry, cached, old_phase)
                if req.event == Event.POD_FAILED:
                    req.exit_code = first_exit_code(pod)
        self._handle(entry, req)

    def _update_event(self, entry: JobEntry, pod: PodState, old_phase: str) -> str:
        if pod.out_of_sync:
            return Event.OUT_OF_SYNC
        phase = pod.phase
        if phase == "Failed":
            return Event.POD_FAILED if old_phase != "Failed" else Event.OUT_OF_SYNC
        if phase == "Succeeded":
            if old_phase != "Succeeded" and self._task_completed(entry, pod.task):
                return Event.TASK_COMPLETED
            return Event.OUT_OF_SYNC
        if phase == "Running":
            if old_phase != "Running":
                return Event.POD_RUNNING
            return Event.TASK_FAILED if self._task_failed(entry, pod.task) else Event.OUT_OF_SYNC
        if phase == "Pending":
            if old_phase != "Pending":
                return Event.POD_PENDING
            return Event.TASK_FAILED if self._task_failed(entry, pod.task) else Event.OUT_OF_SYNC
        return Event.OUT_OF_SYNC

    def _task_spec(self, entry: JobEntry, task: str):
        if entry.job is None:
            return None
        for t in entry.job.spec.tasks:
            if t.name == task:
                return t
        return None

    def _task_completed(self, entry: JobEntry, task: str) -> bool:
        spec = self._task_spec(entry, task)
        if spec is None or spec.replicas == 0:
            return False
        pods = entry.pods.get(task) or {}
        succeeded = sum(1 for p in pods.values() if p.phase == "Succeeded")
        return succeeded >= spec.replicas

    def _task_failed(self, entry: JobEntry, task: str) -> bool:
        spec = self._task_spec(entry, task)
        if spec is None or spec.replicas == 0:
            return False
        max_retry = spec.max_retry or 3
        if max_retry == -1:
            return False
        pods = entry.pods.get(task) or {}
        restarts = sum(p.restarts for p in pods.values() if p.phase in ("Running", "Pending"))
        return restarts >= max_retry

    # ------------------------------------------------------------------ podgroups (§4.4)

    def _podgroup(self, rtype: str, pg: PodGroup) -> None:
        meta = pg.metadata
        job_name = meta.name
        for ref in meta.owner_references or ():
            if ref.kind == "Job":
                job_name = ref.name
        entry = self.entry(meta.namespace, job_name)
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
        if rtype == "MODIFIED" and phase != old_phase:
            event = Event.JOB_UNKNOWN if phase == "Unknown" else ""
            self._handle(entry, Request(event=event, source="podgroup"))

    # ------------------------------------------------------------------ commands (§3.3)

    def _command(self, rtype: str, cmd: Command) -> None:
        target = cmd.target
        if rtype != "ADDED" or target is None:
            return
        if target.api_version != "batch.volcano.sh/v1alpha1" or target.kind != "Job":
            return
        entry = self.entry(cmd.metadata.namespace, target.name)
        if cmd.metadata.uid and cmd.metadata.uid in entry.consumed:
            return
        entry.consumed.add(cmd.metadata.uid)
        self.emit(o.DeleteBusCommand, entry, name=cmd.metadata.name, namespace=cmd.metadata.namespace)
        if entry.job is not None:  # recordJobEvent: no job in the cache, no event
            self.emit(
                o.RecordEvent,
                entry,
                reason="CommandIssued",
                message=f"Start to execute command {cmd.action}, and clean it up to make sure executed not more than once.",
            )
        self._handle(entry, Request(event=Event.COMMAND_ISSUED, action=cmd.action, source="command"))

    # ------------------------------------------------------------------ the worker loop (§0.2)

    def _handle(self, entry: JobEntry, req: Request) -> None:
        self._process(entry, req)
        self._follow_up(entry)

    def _follow_up(self, entry: JobEntry) -> None:
        """Our status write changed the phase: one more OutOfSync pass, as Volcano's watch gives it."""
        rounds = 0
        while entry.followup and rounds < MAX_FOLLOWUPS:
            entry.followup = False
            rounds += 1
            self._process(entry, Request(event=Event.OUT_OF_SYNC, source="self"))

    def _process(self, entry: JobEntry, req: Request) -> None:
        if req.event in RULE_A_EVENTS and req.source == "pod":
            timer = entry.timers.get(req.pod)
            if timer is not None and rule_a_cancels(timer, req.event, req.pod_uid):  # type: ignore[arg-type]
                self._cancel(entry, timer, f"{req.event} of pod {req.pod}")  # type: ignore[arg-type]
        if entry.job is None or entry.status is None:
            return
        res = resolve(entry.job, req, version=entry.status.version, explain=self.explain)
        phase = entry.status.state.phase
        self._why = (req, res)
        self.emit(
            o.ActionResolved,
            entry,
            event=req.event,
            exit_code=req.exit_code,
            task=req.task,
            pod=req.pod,
            action=res.action,
            policy=res.policy,
            delay=res.delay_text,
            phase=phase,
            reason=res.reason,
            explain=res.explain,
            policy_text=policy_text(entry.job, res.policy) if res.policy[:1] in ("j", "t") else "",
        )
        if res.delay != 0:  # Volcano registers any non-zero delay; a negative one fires at once
            self._schedule(entry, req, res)
            return
        if res.action != Action.SYNC_JOB:
            self.emit(o.RecordEvent, entry, reason="ExecuteAction", message=f"Start to execute action {res.action} ")
        ok = self.execute(entry, res.action, _target(res.action, req.task, req.pod, req.partition))
        if ok and cancels_on_execute(res.action):  # only after a successful Execute (processNextReq)
            self._rule_b(entry, res.action, task=req.task, pod=req.pod, partition=req.partition)

    def execute(self, entry: JobEntry, action: str, target: Target | None) -> bool:
        """Run `action` in the job's current phase (Volcano's state.Execute); False if it failed."""
        assert entry.status is not None
        h = handling(entry.status.state.phase, action)
        try:
            if h.op is PodOp.SYNC:
                sync_job(self, entry, h, action)
            elif h.op is PodOp.KILL_JOB:
                kill_job(self, entry, h, action)
            else:
                kill_target(self, entry, h, action, target)
        except SyncError as err:
            # Volcano requeues the request with backoff and, after --max-requeue-num (15)
            # failures, forces TerminateJob. Nothing in the log can change the outcome
            # of those retries, so vcbus takes that path at once (docs/fidelity.md).
            self.emit(o.SyncFailed, entry, message=str(err))
            self._why = f"sync failed ({err}), retry limit reached -> TerminateJob"
            self.emit(
                o.RecordEvent,
                entry,
                reason="ExecuteAction",
                message=f"Job failed on action {action} for retry limit reached",
            )
            h = handling(entry.status.state.phase, Action.TERMINATE_JOB)
            if h.op is PodOp.KILL_JOB:
                kill_job(self, entry, h, Action.TERMINATE_JOB)
            return False
        return True

    # ------------------------------------------------------------------ timers (§5.2, §5.3)

    def _schedule(self, entry: JobEntry, req: Request, res: Resolution) -> None:
        self.emit(
            o.RecordEvent,
            entry,
            reason="ExecuteAction",
            message=f"Execute action {res.action} after {go_duration(res.delay)}",
        )
        existing = entry.timers.get(req.pod)
        if existing is not None and existing.action == res.action:  # type: ignore[attr-defined]
            return
        self._timer_order += 1
        timer = Timer(
            id=f"{self.seq}.{self._timer_order}",
            job=entry.key,
            key=req.pod,
            action=res.action,
            due=add(self.now, res.delay),
            event=req.event,
            task=req.task,
            pod=req.pod,
            pod_uid=req.pod_uid,
            partition=req.partition,
            policy=res.policy,
            order=self._timer_order,
        )
        entry.timers[req.pod] = timer  # a replaced timer is not cancelled: it still fires (QUIRK)
        heapq.heappush(self.timers, (timer.due, timer.order, timer))
        self.timer_index[timer.id] = timer
        self.emit(
            o.TimerScheduled,
            entry,
            timer=timer.id,
            action=timer.action,
            due=timer.due,
            event=timer.event,
            task=timer.task,
            pod=timer.pod,
            pod_uid=timer.pod_uid,
            partition=timer.partition,
            policy=timer.policy,
        )

    def _cancel(self, entry: JobEntry, timer: Timer, reason: str) -> None:
        if entry.timers.get(timer.key) is timer:
            del entry.timers[timer.key]
        if not timer.cancelled:
            timer.cancelled = True
            self.timer_index.pop(timer.id, None)
            self.emit(o.TimerCancelled, entry, timer=timer.id, reason=reason)

    def _rule_b(self, entry: JobEntry, action: str, *, task: str, pod: str, partition: str) -> None:
        for timer in list(entry.timers.values()):
            if rule_b_cancels(timer, action, task=task, pod=pod, partition=partition):  # type: ignore[arg-type]
                self._cancel(entry, timer, f"{action} executed")  # type: ignore[arg-type]

    def add_timer(self, timer: Timer) -> None:
        """Put another controller's timer on the heap (the garbage collector's ttl timers)."""
        heapq.heappush(self.timers, (timer.due, timer.order, timer))
        self.timer_index[timer.id] = timer

    def next_timer_order(self) -> int:
        self._timer_order += 1
        return self._timer_order

    def pending_timers(self) -> list[Timer]:
        return sorted((t for _, _, t in self.timers if not t.cancelled), key=lambda t: (t.due, t.order))

    def fire_due(self, now: str) -> None:
        while self.timers and self.timers[0][0] <= now:
            _, _, timer = heapq.heappop(self.timers)
            if not timer.cancelled:
                self._run_timer(timer)

    def _fire(self, timer_id: str) -> None:
        timer = self.timer_index.get(timer_id)
        if timer is None or timer.cancelled:
            return
        self.timers = [t for t in self.timers if t[2] is not timer]
        heapq.heapify(self.timers)
        self._run_timer(timer)

    def _run_timer(self, timer: Timer) -> None:
        self.timer_index.pop(timer.id, None)
        timer.cancelled = True  # fired: it cannot fire again
        if self.gc.timers.get(timer.job) is timer:
            self.gc.fire(timer)
            return
        entry = self.jobs.get(timer.job)
        if entry is None or entry.job is None or entry.status is None:
            return
        self.emit(o.TimerFired, entry, timer=timer.id, action=timer.action)
        self.emit(
            o.ActionResolved,
            entry,
            event=timer.event,
            task=timer.task,
            pod=timer.pod,
            action=timer.action,
            policy=f"timer:{timer.policy}",
            phase=entry.status.state.phase,
            policy_text=policy_text(entry.job, timer.policy),
        )
        self._why = timer
        self.execute(entry, timer.action, _target(timer.action, timer.task, timer.pod, timer.partition))
        self._rule_b(entry, timer.action, task=timer.task, pod=timer.pod, partition=timer.partition)
        self._follow_up(entry)


def _target(action: str, task: str, pod: str, partition: str) -> Target | None:
    kind = JOB_TARGETS.get(action)  # type: ignore[call-overload]
    if kind is None:
        return None
    return Target(kind=kind, task=task, pod=pod, partition=partition)


def adopt(recorded: Any) -> JobStatus:
    """A status found on a job's first appearance becomes ours (a restarted controller)."""
    return JobStatus(
        state=JobState(
            phase=recorded.state.phase,
            reason=recorded.state.reason,
            message=recorded.state.message,
            last_transition_time=recorded.state.last_transition_time,
        ),
        min_available=recorded.min_available,
        task_status_count=recorded.task_status_count,
        pending=recorded.pending,
        running=recorded.running,
        succeeded=recorded.succeeded,
        failed=recorded.failed,
        terminating=recorded.terminating,
        unknown=recorded.unknown,
        version=recorded.version,
        retry_count=recorded.retry_count,
        running_duration=recorded.running_duration,
        controlled_resources=recorded.controlled_resources,
        conditions=[
            JobCondition(status=c.get("status") or "", last_transition_time=c.get("lastTransitionTime"))
            for c in recorded.conditions or ()
        ]
        or None,
    )

