"""The history projection: per job, its phase transitions and every resolved action.

The fold behind `vcbus replay` and `vcbus history`: what happened to a job, in
order, with the cause of each step. Entries are compact tuples of the
domain events themselves (no copies of Kubernetes objects), so memory grows
with the number of decisions, never with the size of the pods in the log.

On the bus a deleted job's history lives in the KV bucket, not in memory
(`DeletedJobs`): once the projector has written it, the job is forgotten
(`HistoryView.forget`), and only its key and deletion time stay, until the
retention after its deletion (record time) ends and the key is dropped from
the bucket too. A forgotten job that gets events again (a late event, or a
new vcjob of the same name) continues from its stored entry (`merge_report`),
so the value equals what a fold that never forgot would write.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from statemachines import outputs as o
from statemachines.model.timefmt import ZERO_TIME, add


class JobHistory:
    __slots__ = ("key", "uid", "observed", "phases", "actions", "commands", "divergences", "timers", "errors",
                 "rendered", "moves")

    def __init__(self, key: str) -> None:
        self.key = key
        self.uid = ""
        self.observed: o.JobObserved | None = None
        self.phases: list[o.PhaseChanged] = []
        self.actions: list[o.ActionResolved] = []
        self.commands: list[o.Output] = []
        self.divergences: list[o.Divergence] = []
        self.timers: list[o.Output] = []
        self.errors: list[o.SyncFailed] = []
        # the report's entries of `actions` as far as they were rendered, with the list they are of
        # (`projections.replay.action_entries`: the projector writes a job's report after every batch)
        self.rendered: tuple[list[o.ActionResolved], list[dict]] | None = None
        # a CronJob's or JobFlow's key (Volcano's cronjob and jobflow controllers): its machines' moves and
        # the JobFlow's failed syncs, in order (`projections.replay.owner_reports`)
        self.moves: list[o.Output] = []


def _route(cls: type, keep_commands: bool) -> str | None:
    """The `JobHistory` field an output class goes to ("observed": JobObserved), or None.

    Worked out once per class (`HistoryView.apply` looks it up in `_ROUTES`): a
    replay applies every output, and these checks in order cost more than the
    append itself."""
    if issubclass(cls, o.ActionResolved):
        return "actions"
    if issubclass(cls, o.PhaseChanged):
        return "phases"
    if issubclass(cls, o.JobObserved):
        return "observed"
    if issubclass(cls, o.Divergence):
        return "divergences"
    if issubclass(cls, (o.TimerScheduled, o.TimerFired, o.TimerCancelled)):
        return "timers"
    if issubclass(cls, o.SyncFailed):
        return "errors"
    if issubclass(cls, (o.CronJobStateChanged, o.CronJobRunChanged, o.JobFlowStateChanged, o.JobFlowSyncFailed)):
        return "moves"
    if keep_commands and issubclass(cls, o.COMMANDS) and not issubclass(cls, o.UpdateJobStatus):
        return "commands"
    return None


_ROUTES: dict[tuple[type, bool], str | None] = {}  # (output class, keep_commands) -> `_route`'s answer
_ACTION = o.ActionResolved


class HistoryView:
    def __init__(self, *, keep_commands: bool = True, enabled: bool = True) -> None:
        self.jobs: dict[str, JobHistory] = {}
        self.keep_commands = keep_commands
        self.position = 0
        if not enabled:
            self.apply = self._skip  # type: ignore[method-assign]  # disabled: every event skipped, no test per event

    def _skip(self, event: o.Output, position: int | None = None) -> bool:
        return False

    def _job(self, key: str) -> JobHistory:
        h = self.jobs.get(key)
        if h is None:
            h = self.jobs[key] = JobHistory(key)
        return h

    def apply(self, event: o.Output, position: int | None = None) -> bool:
        pos = event.seq if position is None else position
        if pos < self.position:
            return False
        self.position = pos
        cls = event.__class__
        if cls is _ACTION:  # most outputs: one per request
            h = self.jobs.get(event.job)
            if h is None:
                h = self.jobs[event.job] = JobHistory(event.job)
            h.actions.append(event)  # type: ignore[arg-type]  # an ActionResolved: cls tested above (mypy narrows type(x), not a local)
            return True
        key = (cls, self.keep_commands)
        try:
            field = _ROUTES[key]
        except KeyError:
            field = _ROUTES[key] = _route(*key)
        if field is None:
            return True
        h = self.jobs.get(event.job)
        if h is None:
            h = self.jobs[event.job] = JobHistory(event.job)
        if field == "observed":
            h.observed = event  # type: ignore[assignment]  # the JobObserved route (_route)
            h.uid = event.uid  # type: ignore[attr-defined]  # the same
        else:
            getattr(h, field).append(event)
        return True

    def apply_all(self, events: Iterable[o.Output]) -> HistoryView:
        for e in events:
            self.apply(e)
        return self

    def forget(self, key: str) -> None:
        """Drop `key`'s entry (its history is stored elsewhere, `DeletedJobs`)."""
        self.jobs.pop(key, None)

    def restart(self, key: str) -> None:
        """Empty `key`'s lists but keep who it is (uid, last JobObserved): a stored entry holds the rest."""
        h = self.jobs.get(key)
        if h is not None:
            h.phases, h.actions, h.commands, h.divergences, h.timers, h.errors = [], [], [], [], [], []
            h.moves = []


DEFAULT_RETENTION = 7 * 24 * 3600.0
"""Seconds (record time) a deleted job's history stays in the bucket: a week."""

_LISTS = ("history", "actions", "commands", "divergences", "errors")


class DeletedJobs:
    """Deleted jobs whose history is kept in the KV bucket only, and when each one's retention ends.

    `note` sees every vcjob event (in log order). A job is `deleted` from its
    JobDeleted until a new JobObserved or StatusChanged (as `StatusView`); once its values are written, `forget`
    marks it `evicted` (the caller drops it from memory). An event for an
    evicted job puts it in `returned`: the caller loads its stored entry into
    `bases` before writing it again. `expired` lists the deleted jobs whose
    retention has passed by the latest event time (`retention` None: never).
    Memory: one key and one timestamp per deleted job within the retention.
    """

    def __init__(self, retention: float | None = DEFAULT_RETENTION) -> None:
        self.retention = retention
        self.now = ZERO_TIME
        self.deleted: dict[str, str] = {}  # job -> when its retention ends
        self.evicted: set[str] = set()
        self.returned: set[str] = set()
        self.bases: dict[str, dict[str, Any]] = {}
        self.observed_since: set[str] = set()  # returned jobs with a JobObserved after their base

    def note(self, event: o.Output) -> None:
        job = event.job
        if event.time and event.time > self.now:
            self.now = event.time
        if job in self.evicted:
            self.evicted.discard(job)
            self.returned.add(job)
        if isinstance(event, o.JobDeleted):
            self.deleted[job] = add(event.time or self.now, self.retention) if self.retention is not None else ""
        elif isinstance(event, o.JobObserved):
            self.deleted.pop(job, None)
            if job in self.bases or job in self.returned:
                self.observed_since.add(job)
        elif isinstance(event, o.StatusChanged):
            self.deleted.pop(job, None)  # as `StatusView`: a status written after the deletion revives it

    def forget(self, job: str) -> bool:
        """Whether `job` (just written) is deleted and may now leave memory; if so it is marked evicted."""
        if job not in self.deleted or job in self.returned:
            return False
        self.evicted.add(job)
        self.bases.pop(job, None)
        self.observed_since.discard(job)
        return True

    def expired(self) -> list[str]:
        if self.retention is None:
            return []
        return sorted(job for job, due in self.deleted.items() if due <= self.now)

    def drop(self, job: str) -> None:
        """`job`'s retention ended: nothing of it is kept any more."""
        self.deleted.pop(job, None)
        self.evicted.discard(job)
        self.returned.discard(job)
        self.bases.pop(job, None)
        self.observed_since.discard(job)


def merge_report(base: dict[str, Any] | None, report: dict[str, Any], *, observed_since: bool) -> dict[str, Any]:
    """`report` continued from a stored entry `base`: the lists concatenated, who-it-is from the newest."""
    if not base:
        return report
    merged = dict(report)
    for field in _LISTS:
        if field in base or field in report:
            merged[field] = list(base.get(field) or ()) + list(report.get(field) or ())
    if not report.get("uid"):
        merged["uid"] = base.get("uid", "")
    if not observed_since and "adopted" in base and "adopted" not in report:
        merged["adopted"] = base["adopted"]
    for field in ("tasks", "taskPods"):  # by task: a task the newest fold saw move has its word
        if base.get(field) or report.get(field):
            merged[field] = dict(sorted({**(base.get(field) or {}), **(report.get(field) or {})}.items()))
    if base.get("truncated"):
        merged["truncated"] = True
    return merged


def command_entry(cmd: o.Output) -> dict:
    """One line of the `commands` list of the replay report."""
    entry: dict = {"seq": cmd.seq, "command": type(cmd).__name__}
    if isinstance(cmd, o.RecordEvent):
        entry["name"] = cmd.reason
        entry["message"] = cmd.message
    elif isinstance(cmd, o.PluginHook):
        entry["name"] = cmd.hook
        entry["plugins"] = list(cmd.plugins)
    else:
        entry["name"] = getattr(cmd, "name", "")
    if isinstance(cmd, o.DeletePod):
        entry["reason"] = cmd.reason
    if isinstance(cmd, o.CreatePod):
        entry["jobVersion"] = cmd.job_version
    return entry
