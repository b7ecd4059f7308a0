"""The engine: a log of watch records in, domain events and commands out.

`Engine.apply(seq, record)` is the whole controller as a pure function of the
log. It only routes: it takes the record's time, fires the timers that time
has reached, hands the record to the module for its kind, which updates the
job's aggregate (`JobEntry`, statemachines/cache.py) and turns the change into
requests, and returns the outputs they produced, every one stamped with `seq`.
No clock, no I/O, no randomness: time comes from the records (`time`, else
when the object was written, `model.record_time.object_time`), ids from `seq`. The same
log in gives the same outputs, always.

A record's path, top-down:

- statemachines/intake/: jobs, pods, podgroups, commands: the record updates
  the job's aggregate and becomes a request;
- statemachines/worker.py: the request is resolved to an action (§5) and run in
  the job's phase by the job machine and its controller (statemachines/job/, §2,
  §6, §7), with one more pass after a phase change; the task machine
  (statemachines/task/) steps on pod changes;
- statemachines/timers/: delayed actions, fired when the log's time passes them;
- statemachines/intake/refusals.py: a command the API server refused (a REFUSED
  record the actuator appends): a refused pod create is dropped from the cache
  and the job's sync requeued with backoff, as Volcano's handleJobError;
- statemachines/following.py: recorded statuses (someone else's writes) are
  adopted, compared with ours (`Divergence`) and their versions followed; they
  never drive decisions.

Volcano's other controllers (statemachines/queues/, garbagecollector.py,
statemachines/podgroups/: PodGroups for pods no vcjob made, statemachines/cronjobs/:
CronJobs, with their vcjob records and their timers on the same heap, statemachines/jobflows/:
JobFlows and JobTemplates, with their vcjob records) fold the same records beside it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from statemachines import outputs as o
from statemachines.admission.bounds import DEFAULT_MAX_PODS
from statemachines.cache import JobEntry
from statemachines.cronjobs.controller import CronJobController
from statemachines.following import final_divergences
from statemachines.garbagecollector import GarbageCollector
from statemachines.hosted import JobLister
from statemachines.intake.commands import on_command
from statemachines.intake.jobs import on_job
from statemachines.intake.podgroups import on_podgroup
from statemachines.intake.pods import on_pod
from statemachines.intake.refusals import on_refusal
from statemachines.job.causes import phase_cause
from statemachines.jobflows.controller import JobFlowController
from statemachines.model.cronjob import CronJobRecord
from statemachines.model.jobflow import FlowRecord, JobFlow, JobTemplate
from statemachines.model.objects import OWNER_KINDS, Command, Job, Pod, PodGroup, Queue, job_key
from statemachines.model.record_time import object_time
from statemachines.model.records import Decoded, Observed, RefusalRecord, TimerRecord
from statemachines.model.status import JobStatus
from statemachines.model.timefmt import ZERO_TIME, normalize
from statemachines.podgroups.controller import SCHEDULER_NAMES, PodGroupController
from statemachines.queues.controller import QueueController
from statemachines.queues.elsewhere import QueuesElsewhere
from statemachines.timers.heap import TimerHeap
from statemachines.timers.rules import Timer
from statemachines.worker import run_timer


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
    - `max_pods`: a job whose tasks ask for more pods in all (or with a policy
      timeout Go's ParseDuration refuses) is refused with `BoundsProblem` before
      anything changes, so the decider poisons the record
      (`statemachines.admission.bounds`; the webhook denies such a job).
    - `queue_controller`: False leaves Volcano's queue controller out (no `_/<queue>`
      outputs, no queue state): the bus's partition deciders with N > 1, where the
      queue role runs it (`vcbus.bus.queueing`). The job controller's
      decisions are the same either way.
    - `scheduler_names`: the pods Volcano's podgroup controller gives a PodGroup when they have
      none (`spec.schedulerName`; statemachines/podgroups/).
    - `cronjobs`: False leaves Volcano's cronjob controller out (CronJob records are counted as
      ignored): the bus's partition deciders with N > 1, none of which sees every vcjob record a
      CronJob's runs make.
    - `jobflows`: False leaves Volcano's jobflow and jobtemplate controllers out (their records are
      counted as ignored), for the same reason.
    - `job_controller`: False folds only what the controllers beside the job controller read (the
      queue controller's PodGroups, Queues and Commands; the CronJob, JobFlow and JobTemplate records
      and every vcjob into their lister; TIMER records), with no job controller, garbage collector or
      podgroup controller: the bus's role with N > 1 partitions that runs the queue, cronjob and
      jobflow controllers over every partition (`vcbus.bus.queueing`), and the domain tests of
      those controllers. Their decisions, timers included, are the whole engine's.
    """

    def __init__(
        self,
        *,
        explain: bool = False,
        timers: str = "by-time",
        strict_queues: bool | None = None,
        render_pod: Callable[..., dict[str, Any]] | None = None,
        render_podgroup: Callable[..., dict[str, Any]] | None = None,
        max_pods: int = DEFAULT_MAX_PODS,
        queue_controller: bool = True,
        scheduler_names: tuple[str, ...] = SCHEDULER_NAMES,
        cronjobs: bool = True,
        jobflows: bool = True,
        job_controller: bool = True,
    ) -> None:
        if timers not in ("by-time", "recorded"):
            raise ValueError(f"timers must be 'by-time' or 'recorded', not {timers!r}")
        self.explain = explain
        self.timer_mode = timers
        self.by_time = timers == "by-time"
        self.strict_queues = strict_queues
        self._render_pod = render_pod
        self._render_podgroup = render_podgroup
        self.renders = render_pod is not None  # keep each job's raw record to render its pods from
        self.max_pods = max_pods  # a job asking for more pods is refused (poisoned), as admission refuses it
        self.jobs: dict[str, JobEntry] = {}  # the per-job aggregates
        self.queues: dict[str, Queue] = {}
        self.queues_seen = False
        self.timers = TimerHeap()
        self.now = ZERO_TIME
        self.seq = 0
        self.out: list[o.Output] = []
        self.ignored = 0
        self.spec_changed = False  # the request being handled comes from a change of the job spec
        self.executing: object = None  # what is being executed: (Request, Resolution), a Timer or a text
        # Volcano's other controllers, folds of the same log (statemachines/queues/, garbagecollector.py)
        self.queue_controller_on = queue_controller
        self.queue_controller = QueueController(self) if queue_controller else QueuesElsewhere()
        self.gc = GarbageCollector(self)
        self.podgroup_controller = PodGroupController(self, scheduler_names)
        self.job_lister = JobLister()  # the vcjob lister of the controllers beside the job controller
        self.cronjob_controller = CronJobController(self, self.job_lister) if cronjobs else None
        self.jobflow_controller = JobFlowController(self, self.job_lister) if jobflows else None
        self._hosted = tuple(c for c in (self.cronjob_controller, self.jobflow_controller) if c is not None)
        self.job_controller_on = job_controller

    # ------------------------------------------------------------------ what the controllers use

    def emit(self, cls: type, entry: JobEntry, /, **fields: Any) -> None:
        """`JobContext.emit`: for the outputs few records make (the others are built by their keywords)."""
        # `/`: the keywords need no check against the parameters' names; the stamp goes into `fields`:
        # one dict passed on, not a second one merged from two (each is about a quarter of the call)
        fields["job"] = entry.key
        fields["seq"] = self.seq
        fields["time"] = self.now
        self.out.append(cls(**fields))

    def entry(self, namespace: str, name: str) -> JobEntry:
        """The job's aggregate, created on first mention (a pod may come before its job)."""
        key = job_key(namespace, name)
        e = self.jobs.get(key)
        if e is None:
            e = self.jobs[key] = JobEntry(key, namespace, name)
        return e

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
        return phase_cause(self.executing, entry, guard, spec_changed=self.spec_changed)

    # ------------------------------------------------------------------ input

    def apply(self, seq: int, record: Decoded, *, raw: bytes | None = None) -> list[o.Output]:
        """Fold one record; return what was decided because of it."""
        self.seq = seq
        out: list[o.Output] = []
        self.out = out
        # exact classes (mypy narrows on them): a failed isinstance on a Struct class is slow
        if type(record) is Observed:  # nearly every record
            if self.job_controller_on:
                self._observed(record, raw)
            else:
                self._beside(record, raw)
        elif type(record) is TimerRecord:
            if record.time:
                self._advance(normalize(record.time))
            timer = self.timers.take(record.timer.id)
            if timer is not None:
                run_timer(self, timer)
        elif type(record) is RefusalRecord:
            self._refusal(record)
        elif type(record) is CronJobRecord:
            self._cronjob(record)
        elif type(record) is FlowRecord:
            self._flow(record)
        else:  # Ignored
            self.ignored += 1
        return out

    def _observed(self, record: Observed, raw: bytes | None) -> None:
        """A watch event: the log's time moves (due timers fire first), the object goes to the controllers
        of its kind, then timers due at once fire."""
        obj = record.object
        # the object's time, when the decoder has not worked it out already (`Observed.at`)
        self._reach(record.time or record.at or object_time(obj))
        rtype = record.type
        if type(obj) is Pod:
            on_pod(self, rtype, obj)
            if rtype == "ADDED":
                self.podgroup_controller.pod_added(obj)
            elif rtype == "DELETED" and self.podgroup_controller.waiting:
                self.podgroup_controller.pod_deleted(obj)
        elif type(obj) is Job:
            on_job(self, rtype, obj, raw)
            self.gc.job(rtype, obj)
            if self._hosted and self.job_lister.list(rtype, obj):  # listed once, for every controller
                for controller in self._hosted:
                    controller.on_job(rtype, obj)
        elif type(obj) is PodGroup:
            on_podgroup(self, rtype, obj)
            self.queue_controller.podgroup(rtype, obj)
            self.podgroup_controller.podgroup(rtype, obj)
        elif type(obj) is Queue:
            self._queue(rtype, obj)
        elif type(obj) is Command:
            on_command(self, rtype, obj)
            self.queue_controller.command(rtype, obj)
        elif isinstance(obj, OWNER_KINDS):
            self.podgroup_controller.owner(rtype, obj)
        self._fire_at_once()

    def _beside(self, record: Observed, raw: bytes | None) -> None:
        """`_observed` with the job controller elsewhere (`job_controller=False`): the log's time moves
        (due timers fire first), then only the controllers beside the job controller take the object."""
        obj = record.object
        self._reach(record.time or record.at or object_time(obj))
        rtype = record.type
        if type(obj) is Job:
            if self._hosted and self.job_lister.list(rtype, obj):
                for controller in self._hosted:
                    controller.on_job(rtype, obj)
        elif type(obj) is PodGroup:
            self.queue_controller.podgroup(rtype, obj)
        elif type(obj) is Queue:
            self._queue(rtype, obj)
        elif type(obj) is Command:
            self.queue_controller.command(rtype, obj)
        self._fire_at_once()

    def _queue(self, rtype: str, obj: Queue) -> None:
        self.queues_seen = True
        if rtype == "DELETED":
            self.queues.pop(obj.metadata.name, None)
        else:
            self.queues[obj.metadata.name] = obj
        self.queue_controller.queue(rtype, obj)

    def _refusal(self, record: RefusalRecord) -> None:
        """A command the API server refused (statemachines/intake/refusals.py): the log's time moves (due
        timers fire first), the refusal goes to the job controller, then timers due at once fire."""
        if not self.job_controller_on:
            self.ignored += 1
            return
        self._reach(record.time)
        on_refusal(self, record.refusal)
        self._fire_at_once()

    def _cronjob(self, record: CronJobRecord) -> None:
        """A CronJob record: the log's time moves (due timers fire first), then the CronJob controller syncs."""
        if self.cronjob_controller is None:
            self.ignored += 1
            return
        self._reach(record.time or object_time(record.object))
        self.cronjob_controller.cronjob(record.type, record.object, record.zones)
        self._fire_at_once()

    def _flow(self, record: FlowRecord) -> None:
        """A JobFlow or JobTemplate record: the log's time moves (due timers fire first), then its controller."""
        if self.jobflow_controller is None:
            self.ignored += 1
            return
        self._reach(record.time or object_time(record.object))
        obj = record.object
        if type(obj) is JobFlow:
            self.jobflow_controller.jobflow(record.type, obj)
        elif type(obj) is JobTemplate:
            self.jobflow_controller.template(record.type, obj)
        self._fire_at_once()

    def finish(self, until: str | None = None) -> list[o.Output]:
        """End of input: fire timers due by `until` (by-time mode); later ones stay pending."""
        self.out = []
        if until is not None and self.timer_mode == "by-time":
            self._reach(until)
            self.fire_due(self.now)
        return self.out

    def final_divergences(self, *, cut: bool = False) -> list[o.Output]:
        """At the end of a log: jobs whose last recorded status is not where vcbus ended
        (`statemachines.following.final_divergences`)."""
        self.out = []
        final_divergences(self, cut=cut)
        return self.out

    def fire_due(self, until: str) -> None:
        """Fire the timers due by `until`, in order, each at its own due time (the log's time moves to it)."""
        for timer in self.timers.pop_due(until):
            if timer.due > self.now:
                self.now = timer.due
            run_timer(self, timer)

    def pending_timers(self) -> list[Timer]:
        return self.timers.pending()

    def _reach(self, when: str | None) -> None:
        """The log's time moves to a record's (if later); in by-time mode the timers it passes fire first,
        each at its own due time."""
        if when and when != self.now:  # most records come at the time of the one before: nothing moves
            when = normalize(when)
            if when > self.now:
                heap = self.timers.heap
                if self.by_time and heap and heap[0][0] <= when:
                    self.fire_due(when)
                self.now = when

    def _fire_at_once(self) -> None:
        """In by-time mode, after a record: a timer set with a delay <= 0 fires at once, right after the
        request that set it."""
        heap = self.timers.heap  # firing may have replaced the list (`TimerHeap.take` rebuilds it)
        if self.by_time and heap and heap[0][0] <= self.now:
            self.fire_due(self.now)

    def _advance(self, when: str) -> None:
        if when > self.now:
            self.now = when
