"""What the CronJob controller emits, besides the shared outputs it reuses.

Domain events: `CronJobStateChanged` (the CronJob machine), `CronJobRunChanged` (a run's
machine: created, skipped by Forbid, missed its deadline, replaced, finished, pruned...).
Commands: `CreateCronJobRun` (the vcjob of a run, as Volcano's getJobFromTemplate builds it:
the template's labels and annotations, the `volcano.sh/cronjob-scheduled-timestamp`
annotation, the CronJob as controller owner, the template's spec), `DeleteCronJobRun`
(Replace, the history limits), `UpdateCronJobStatus` (the status subresource as Volcano's
UpdateStatus writes it). Events on the CronJob are the shared `RecordEvent` (kind
CronJob), timers the shared `TimerScheduled`/`TimerCancelled`/`TimerFired`
(action `SyncCronJob`). Every output's `job` is the CronJob's `<namespace>/<name>`.
"""

from __future__ import annotations

from typing import Any

from statemachines.cronjobs.objects import CronJobStatus
from statemachines.outputs import Output


class CronJobStateChanged(Output, tag="cronjob.state.changed.v1", kw_only=True):
    """The CronJob machine moved (statemachines/cronjobs/machine.py)."""

    from_state: str = ""
    to_state: str = ""
    cause: str = ""


class CronJobRunChanged(Output, tag="cronjob.run.changed.v1", kw_only=True):
    """A run (one scheduled time, named as its vcjob) moved; `cause` says why, in words."""

    run: str  # the vcjob's name, `<cronjob>-<scheduled minutes since the epoch>`
    scheduled: str  # the scheduled time (RFC 3339, UTC)
    from_state: str = ""
    to_state: str = ""
    cause: str = ""


class CreateCronJobRun(Output, tag="cmd.cronjob.job.create.v1", kw_only=True):
    """Create the vcjob `name` in the CronJob's namespace, controlled by the CronJob `cronjob` (`cronjob_uid`)."""

    name: str
    cronjob: str
    cronjob_uid: str
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    spec: dict[str, Any] = {}


class DeleteCronJobRun(Output, tag="cmd.cronjob.job.delete.v1", kw_only=True):
    """Delete the vcjob `name` of the CronJob (uid precondition: another vcjob of the name is left alone)."""

    name: str
    uid: str = ""


class UpdateCronJobStatus(Output, tag="cmd.cronjob.status.v1", kw_only=True):
    """Replace the CronJob's status; `uid`/`resource_version` name the CronJob it was computed from."""

    name: str
    status: CronJobStatus
    uid: str = ""
    resource_version: str = ""


CRONJOB_EVENTS = (CronJobStateChanged, CronJobRunChanged)
CRONJOB_COMMANDS = (CreateCronJobRun, DeleteCronJobRun, UpdateCronJobStatus)
