"""What the controllers that fold beside the job engine share: outputs stamped from their host.

Volcano's cronjob and jobflow controllers (statemachines/cronjobs/, statemachines/jobflows/) run
inside `Engine.apply` on the records of their kinds. Their outputs go to the host's `out`, stamped
with the record's `seq` and the log's `now`, and their Kubernetes Events are the controller
manager's, on the object of their kind. Their timers (a sync requeued after a delay: Volcano's
`AddAfter` and `AddRateLimited`) are on the host's heap, with ids of their own (`<seq>.h<order>`):
with N > 1 partitions the role that runs these controllers (`vcbus.bus.queueing`) keeps a heap
apart from the partition's decider that reads the same TIMER records, and one id must never name
two timers.

A controller can be **held** (`hold`): Volcano's controller not running yet, on a log whose records
came while it did not run (a bus whose queue role ran only the queue controller: the layout before
4 December 2026 with N > 1 partitions ran neither the cronjob nor the jobflow controller). Held, it
decides nothing and keeps the latest record of each of its objects (the informer's cache; the vcjob
lister is the engine's and fills as always). Its start is a timer of its own, `start:<kind>` (the
TIMER record the bus appended when it started the controller: `vcbus.bus.queueing`); when it fires,
the controller gets each kept object as ADDED, JobTemplates before JobFlows, as Volcano's controller
starting after `WaitForCacheSync` syncs every object its informers list.
"""

from __future__ import annotations

from typing import Any

from statemachines import outputs as o
from statemachines.model.objects import Job
from statemachines.model.timefmt import add
from statemachines.timers.rules import Timer

COMPONENT = "vc-controller-manager"
# A failed sync is requeued as client-go's DefaultTypedControllerRateLimiter does (Volcano's cronjob and
# jobflow work queues: `AddRateLimited`): 5 ms doubled per failure since the last success, at most 1000 s
# (its 10-per-second bucket binds only past 100 requeues at once, and is left out). The log's times are
# whole seconds, so a delay is rounded up to one (a timer never fires early: `timefmt.add`).
BACKOFF_BASE = 0.005
BACKOFF_MAX = 1000.0
BACKOFF_POLICY = "backoff"


def backoff(failures: int) -> float:
    """The delay of the requeue after `failures` failed syncs in a row (0: the first failure)."""
    return BACKOFF_MAX if failures >= 40 else min(BACKOFF_BASE * 2**failures, BACKOFF_MAX)


KINDS = ("cronjob", "jobflow", "jobtemplate")  # the kinds of the keys below, as in their records' subjects
START_POLICY = "start"  # the policy of a held controller's start timer (`HostedController.hold`)


def owner_key(kind: str, namespace: str, name: str) -> str:
    """The key of a CronJob's, JobFlow's or JobTemplate's outputs: `<namespace>/<kind>:<name>` (`kind` of
    `KINDS`). A Kubernetes name never holds a `:`, so no vcjob, and no object of another kind, has it."""
    return f"{namespace}/{kind}:{name}"


def start_timer_id(kind: str) -> str:
    """The id of the start timer of the controller whose keys are of `kind` (`HostedController.hold`)."""
    return f"start:{kind}"


def split_owner_key(key: str) -> tuple[str, str, str] | None:
    """(kind, namespace, name) of an `owner_key`; None for any other key (a vcjob's, a queue's)."""
    namespace, _, rest = key.partition("/")
    kind, colon, name = rest.partition(":")
    return (kind, namespace, name) if colon and kind in KINDS and namespace and name else None


class JobLister:
    """Volcano's vcjob lister: every vcjob by namespace/name, at its last version. The engine keeps one for
    all the controllers beside it (each record listed once)."""

    __slots__ = ("jobs",)

    def __init__(self) -> None:
        self.jobs: dict[str, Job] = {}

    def list(self, rtype: str, job: Job) -> bool:
        """A vcjob record into the lister; False when it brings nothing new (the version already listed)."""
        meta = job.metadata
        key = f"{meta.namespace}/{meta.name}"
        if rtype == "DELETED":
            self.jobs.pop(key, None)
            return True
        old = self.jobs.get(key)
        if old is not None and old.metadata.resource_version == meta.resource_version:
            return False
        self.jobs[key] = job
        return True


class HostedController:
    """`KIND`/`API_VERSION`: the object the controller's Events are about. `lister`: the engine's shared
    one (the engine lists each vcjob record, then calls `on_job`), else the controller's own (`job`)."""

    KIND = ""
    API_VERSION = ""
    ACTION = ""  # its timers' action (a sync)
    KIND_KEY = ""  # the kind of its keys (`owner_key`)

    def __init__(self, host: Any, lister: JobLister | None = None) -> None:
        self.host = host
        self.lister = lister or JobLister()
        self.jobs = self.lister.jobs
        self.deleting: set[str] = set()  # uids of the vcjobs the controller asked to delete
        # held (`hold`): object -> (rank, its input method, its arguments), the latest record of each
        self.held: dict[tuple[str, str], tuple[int, Any, tuple]] | None = None
        self.start_timer: Timer | None = None

    # ------------------------------------------------------------------ held until started

    def hold(self, due: str) -> None:
        """Not started: nothing decided, the objects kept, until the start timer (due at `due`) fires."""
        self.held = {}
        heap = self.host.timers
        order = heap.next_order()
        self.start_timer = Timer(id=start_timer_id(self.KIND_KEY), job=owner_key(self.KIND_KEY, "_", "start"),
                                 key="", action=self.ACTION, due=due, policy=START_POLICY, order=order)
        heap.push(self.start_timer)

    def keep(self, rtype: str, name: tuple[str, str], rank: int, method: Any, *args: Any) -> bool:
        """While held, the object's record is kept for the start (a DELETED one forgets it) and True is
        returned; `rank` orders the kinds at the start (lower first), `method(rtype, *args)` takes it then."""
        if self.held is None:
            return False
        if rtype == "DELETED":
            self.held.pop(name, None)
        else:
            self.held[name] = (rank, method, args)
        return True

    def start(self) -> None:
        """The start timer fired: each kept object as ADDED, by rank, each rank in the order first kept."""
        held, self.held, self.start_timer = self.held or {}, None, None
        for _, method, args in sorted(held.values(), key=lambda kept: kept[0]):  # a stable sort
            method("ADDED", *args)

    def job(self, rtype: str, job: Job) -> None:
        """A vcjob record, for a controller with a lister of its own (the domain tests' folds)."""
        if self.lister.list(rtype, job):
            self.on_job(rtype, job)

    def on_job(self, rtype: str, job: Job) -> None:
        """A vcjob record that brought something new, once listed."""
        raise NotImplementedError

    def emit(self, cls: type, key: str, /, **fields: Any) -> None:
        fields["job"] = key
        fields["seq"] = self.host.seq
        fields["time"] = self.host.now
        self.host.out.append(cls(**fields))

    def event_on(self, key: str, name: str, event_type: str, reason: str, message: str) -> None:
        self.emit(o.RecordEvent, key, event_type=event_type, reason=reason, message=message, kind=self.KIND,
                  name=name, api_version=self.API_VERSION, component=COMPONENT)

    # ------------------------------------------------------------------ timers (the host's heap)

    def schedule(self, key: str, action: str, due: str, policy: str) -> Timer:
        """A sync of `key` requeued for `due`: on the host's heap, announced as TimerScheduled."""
        heap = self.host.timers
        order = heap.next_order()
        timer = Timer(id=f"{self.host.seq}.h{order}", job=key, key="", action=action, due=due, policy=policy,
                      order=order)
        heap.push(timer)
        self.emit(o.TimerScheduled, key, timer=timer.id, action=action, due=due, policy=policy)
        return timer

    def requeue(self, e: Any, due: str, policy: str) -> None:
        """The entry's sync again at `due` (`AddAfter`): a timer already due earlier is kept, as the work
        queue keeps the earliest; a later one is replaced. `e` has `key` and `timer`."""
        if e.timer is not None and not e.timer.cancelled and e.timer.due <= due:
            return
        self.cancel(e.timer, "an earlier time")
        e.timer = self.schedule(e.key, self.ACTION, due, policy)

    def requeue_failed(self, e: Any) -> None:
        """A sync failed (`AddRateLimited`): again after the backoff of the entry's `failures` so far."""
        due = add(self.host.now, backoff(e.failures))
        e.failures += 1
        self.requeue(e, due, BACKOFF_POLICY)

    def fire(self, timer: Timer) -> None:
        """The controller's timer is due: announced as TimerFired, the sync runs if it is its entry's timer;
        the start timer of a held controller starts it (no output of its own)."""
        if timer is self.start_timer:
            self.start()
            return
        self.emit(o.TimerFired, timer.job, timer=timer.id, action=timer.action)
        e = self.entry(timer.job)
        if e is not None and e.timer is timer:
            e.timer = None
            self.sync(e)

    def entry(self, key: str) -> Any:
        """The entry (with `timer`) of an object's key."""
        raise NotImplementedError

    def sync(self, e: Any) -> None:
        raise NotImplementedError

    def cancel(self, timer: Timer | None, reason: str) -> None:
        """A timer that must not fire any more (None or fired already: nothing)."""
        if timer is None or timer.cancelled:
            return
        timer.cancelled = True
        self.host.timers.discard(timer)
        self.emit(o.TimerCancelled, timer.job, timer=timer.id, reason=reason)
