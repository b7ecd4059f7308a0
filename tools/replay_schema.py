"""The JSON Schema of `vcbus replay --json`, generated from typed descriptions of the report.

`projections/replay.py` builds the report as plain dicts (the fast path: no
typed copy of every entry); the types below describe that output, key by key,
and are the single source of `docs/schemas/replay/report.json`. A test
validates the real output of every example log against that file and checks
the file is what these types generate, so the schema cannot drift from the
output.

Keys the report only sometimes has are optional (not `required`). The schema
does not forbid other keys: the contract says new keys may be added.

    .venv/bin/python -m tools.replay_schema      # rewrite docs/schemas/replay/report.json (make docs)
"""

from __future__ import annotations

import json
import pathlib

import msgspec
from msgspec import UNSET, Struct, UnsetType

from statemachines.model.cronjob import CronJobStatus
from statemachines.model.jobflow import JobFlowStatus
from statemachines.model.status import JobStatus

SCHEMA_PATH = pathlib.Path(__file__).resolve().parents[1] / "docs" / "schemas" / "replay" / "report.json"


class _Entry(Struct, rename="camel", omit_defaults=True):
    pass


class InputCounts(_Entry):
    """What was read: valid records, those nothing was decided on, and records skipped."""

    events: int
    ignored: int
    invalid: int


class PhaseEntry(_Entry):
    """A phase change (`job.phase.changed.v1`)."""

    seq: int
    time: str
    from_phase: str = msgspec.field(name="from")
    to: str
    reason: str  # the action being executed when it moved (kept for compatibility)
    cause: str  # why it moved, in words (docs/replay.md lists the texts)
    retry_count: int
    version: int


class ActionEntry(_Entry):
    """A bus event (command, fired timer) resolved to an action (`job.action.resolved.v1`)."""

    seq: int
    time: str
    event: str
    exit_code: int
    task: str
    pod: str
    action: str
    policy: str  # task[<task>][<i>], job[<i>], default, command, timer:<policy>
    phase: str
    policy_text: str | UnsetType = UNSET  # the matched policy by its content
    delay: str | UnsetType = UNSET  # the policy's timeout (Go duration)
    reason: str | UnsetType = UNSET  # why the default SyncJob applied
    explain: list[str] | UnsetType = UNSET  # with --explain: why each other policy did not match


class CommandEntry(_Entry):
    """A command the controller asked of the cluster."""

    seq: int
    command: str
    name: str
    reason: str | UnsetType = UNSET  # DeletePod: kill, scale-down, out-of-sync
    job_version: int | UnsetType = UNSET  # CreatePod
    message: str | UnsetType = UNSET  # RecordEvent
    plugins: list[str] | UnsetType = UNSET  # PluginHook


class DivergenceEntry(_Entry):
    """The recorded status differs from vcbus's (`--compare`)."""

    seq: int
    time: str
    field: str  # phase, retryCount; "(end of log)" appended for the final comparison
    recorded: str
    decided: str
    # "volcano-delayed-action-race": explained by Volcano's delayed-action race, not a vcbus error
    known: str | UnsetType = UNSET


class ErrorEntry(_Entry):
    """A sync that could not proceed (`job.sync.failed.v1`)."""

    seq: int
    message: str


class PendingTimer(_Entry):
    """A delayed action still pending at the end of the input."""

    timer: str
    action: str
    due: str
    pod: str
    policy: str


class Adopted(_Entry):
    """The status found on the job's first appearance, adopted as vcbus's starting point."""

    seq: int
    phase: str
    retry_count: int
    version: int


class JobReport(_Entry):
    """One job of the replay."""

    namespace: str
    name: str
    uid: str
    deleted: bool
    status: JobStatus | None  # the vcjob's `status` as Volcano writes it
    history: list[PhaseEntry]
    actions: list[ActionEntry]
    commands: list[CommandEntry]
    divergences: list[DivergenceEntry]
    errors: list[ErrorEntry]
    pending_timers: list[PendingTimer]
    tasks: dict[str, str] | UnsetType = UNSET  # each task's phase (the task machine; not a Volcano field)
    # with `tasks`: each task's pods by pod phase when it last moved (zeros left out): what a finished job's
    # tasks ended with, which its status does not say (Volcano's killPods counts only pods it failed to delete)
    task_pods: dict[str, dict[str, int]] | UnsetType = UNSET
    adopted: Adopted | UnsetType = UNSET


class StateEntry(_Entry):
    """A CronJob's or JobFlow's machine moved (`cronjob.state.changed.v1`, `jobflow.state.changed.v1`)."""

    seq: int
    time: str
    from_state: str = msgspec.field(name="from")
    to: str
    cause: str


class RunEntry(_Entry):
    """One scheduled run of a CronJob moved (`cronjob.run.changed.v1`)."""

    seq: int
    time: str
    run: str  # its vcjob's name
    scheduled: str
    from_state: str = msgspec.field(name="from")
    to: str  # Created, Skipped, Missed, Active, Succeeded, Failed, Terminated, Replaced, Pruned, Gone
    cause: str


class CronJobReport(_Entry):
    """One CronJob of the replay (Volcano's cronjob controller, docs/cronjobs.md)."""

    namespace: str
    name: str
    states: list[StateEntry]
    runs: list[RunEntry]
    status: CronJobStatus | None  # the last status written


class FlowJobEntry(_Entry):
    """A vcjob a JobFlow created or deleted (`cmd.jobflow.job.create.v1`, `cmd.jobflow.job.delete.v1`)."""

    seq: int
    time: str
    name: str
    op: str  # create, delete
    template: str | UnsetType = UNSET  # create: the JobTemplate


class JobFlowReport(_Entry):
    """One JobFlow of the replay (Volcano's jobflow controller, docs/jobflows.md)."""

    namespace: str
    name: str
    states: list[StateEntry]
    jobs: list[FlowJobEntry]
    errors: list[ErrorEntry]  # `jobflow.sync.failed.v1`
    status: JobFlowStatus | None  # the last status written


class ReplayReport(_Entry):
    """`vcbus replay --json`: the projections of a replayed log (docs/replay.md)."""

    input: InputCounts
    jobs: list[JobReport]
    cronjobs: list[CronJobReport] | UnsetType = UNSET  # when the log has CronJobs
    jobflows: list[JobFlowReport] | UnsetType = UNSET  # when the log has JobFlows


def schema() -> dict:
    out = msgspec.json.schema(ReplayReport)
    out = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "vcbus replay --json", **out}
    return out


def render() -> str:
    return json.dumps(schema(), indent=2) + "\n"


def write(path: pathlib.Path = SCHEMA_PATH) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render())


if __name__ == "__main__":
    write()
    print(f"wrote {SCHEMA_PATH}")
