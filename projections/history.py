"""The history projection: per job, its phase transitions and every resolved action.

The fold behind `vcbus replay` and `vcbus history`: what happened to a job, in
order, with the cause of each step. Entries are compact tuples of the
domain events themselves (no copies of Kubernetes objects), so memory grows
with the number of decisions, never with the size of the pods in the log.
"""

from __future__ import annotations

from typing import Iterable

from statemachines import outputs as o


class JobHistory:
    __slots__ = ("key", "uid", "observed", "phases", "actions", "commands", "divergences", "timers", "errors")

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


class HistoryView:
    def __init__(self, *, keep_commands: bool = True, enabled: bool = True) -> None:
        self.jobs: dict[str, JobHistory] = {}
        self.keep_commands = keep_commands
        self.position = 0
        if not enabled:
            self.apply = self._skip  # type: ignore[method-assign]

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
        if isinstance(event, o.ActionResolved):
            self._job(event.job).actions.append(event)
        elif isinstance(event, o.PhaseChanged):
            self._job(event.job).phases.append(event)
        elif isinstance(event, o.JobObserved):
            h = self._job(event.job)
            h.observed = event
            h.uid = event.uid
        elif isinstance(event, o.Divergence):
            self._job(event.job).divergences.append(event)
        elif isinstance(event, (o.TimerScheduled, o.TimerFired, o.TimerCancelled)):
            self._job(event.job).timers.append(event)
        elif isinstance(event, o.SyncFailed):
            self._job(event.job).errors.append(event)
        elif self.keep_commands and isinstance(event, o.COMMANDS) and not isinstance(event, o.UpdateJobStatus):
            self._job(event.job).commands.append(event)
        return True

    def apply_all(self, events: Iterable[o.Output]) -> "HistoryView":
        for e in events:
            self.apply(e)
        return self


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
