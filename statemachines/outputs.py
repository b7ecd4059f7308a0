"""What the state machines emit: domain events (facts) and commands (requests to the cluster).

Every output is a frozen, tagged `msgspec.Struct`. The tag (`type` on the wire)
is versioned (`...v1`) and never derived from the class name, so renaming a
class cannot break a stored log. New fields only ever get defaults; a breaking
change gets a new tag. Every output names its job (`job` = `namespace/name`) and
the 1-based position of the record that caused it (`seq`: the line number of a
replayed file, the stream sequence on the bus), which makes ids derived from it
stable across re-deliveries.

These types are the public contract of vcbus: docs/events.md documents them and
the JSON Schemas in docs/schemas/ are generated from them.
"""

from __future__ import annotations

from typing import Any, Union

import msgspec
from msgspec import Struct

from statemachines.status import JobStatus


class Output(Struct, frozen=True, kw_only=True, tag_field="type", rename="camel", omit_defaults=True, gc=False):
    job: str  # "<namespace>/<name>"
    seq: int  # position of the causing record
    time: str = ""  # event time of the causing record (RFC 3339)


# ------------------------------------------------------------------ domain events


class JobObserved(Output, tag="job.observed.v1", kw_only=True):
    """The job was seen for the first time (ADDED, or the first record of a log)."""

    uid: str = ""
    adopted_phase: str = ""  # non-empty when an existing status was adopted
    retry_count: int = 0
    version: int = 0


class JobDeleted(Output, tag="job.deleted.v1", kw_only=True):
    """The vcjob object was deleted; its pods go by ownerReference GC."""

    uid: str = ""


class ActionResolved(Output, tag="job.action.resolved.v1", kw_only=True):
    """A bus event (or a command, or a fired timer) resolved to an action."""

    event: str = ""  # the bus event ("" for a PodGroup phase change)
    exit_code: int = 0
    task: str = ""
    pod: str = ""
    action: str = "SyncJob"
    policy: str = "default"  # "task[<task>][i]", "job[i]", "default", "command", "timer"
    delay: str = ""  # Go duration when the policy has a timeout
    phase: str = ""  # phase the action was executed in
    reason: str = ""  # why the default applied (internal event, old version, uid...)
    explain: list[str] = []  # with --explain: why each other policy did not match


class PhaseChanged(Output, tag="job.phase.changed.v1", kw_only=True):
    """`status.state.phase` moved."""

    from_phase: str = msgspec.field(default="", name="from")
    to_phase: str = msgspec.field(default="", name="to")
    action: str = ""  # the action being executed when it moved
    retry_count: int = 0
    version: int = 0


class StatusChanged(Output, tag="job.status.changed.v1", kw_only=True):
    """The controller wrote a new status (the full object, as on the vcjob)."""

    status: JobStatus


class TimerScheduled(Output, tag="job.timer.scheduled.v1", kw_only=True):
    """A policy with a timeout: `action` fires at `due` unless cancelled."""

    timer: str  # timer id, unique per job
    action: str
    due: str
    event: str = ""
    task: str = ""
    pod: str = ""
    pod_uid: str = ""
    partition: str = ""
    policy: str = ""


class TimerCancelled(Output, tag="job.timer.cancelled.v1", kw_only=True):
    timer: str
    reason: str = ""


class TimerFired(Output, tag="job.timer.fired.v1", kw_only=True):
    timer: str
    action: str


class SyncFailed(Output, tag="job.sync.failed.v1", kw_only=True):
    """A sync could not proceed (queue missing...); after the requeue limit: TerminateJob."""

    message: str


class Divergence(Output, tag="job.divergence.v1", kw_only=True):
    """A status recorded in the log differs from what vcbus decided."""

    field: str  # "phase" or "retryCount"
    recorded: str
    decided: str
    resource_version: str = ""


DOMAIN_EVENTS = (
    JobObserved,
    JobDeleted,
    ActionResolved,
    PhaseChanged,
    StatusChanged,
    TimerScheduled,
    TimerCancelled,
    TimerFired,
    SyncFailed,
    Divergence,
)

# ------------------------------------------------------------------ commands


class CreatePod(Output, tag="cmd.pod.create.v1", kw_only=True):
    name: str
    task: str
    index: int
    job_version: int = 0
    retry_count: int = 0
    job_uid: str = ""
    pod: dict[str, Any] | None = None  # the full manifest, when the engine renders pods


class DeletePod(Output, tag="cmd.pod.delete.v1", kw_only=True):
    name: str
    uid: str = ""
    task: str = ""
    mark_out_of_sync: bool = True  # annotate volcano.sh/controller-out-of-sync first (kills)
    reason: str = ""  # "kill" or "scale-down" or "out-of-sync"


class CreatePodGroup(Output, tag="cmd.podgroup.create.v1", kw_only=True):
    name: str
    job_uid: str = ""
    min_member: int = 0
    min_task_member: dict[str, int] = {}
    queue: str = ""
    priority_class_name: str = ""
    podgroup: dict[str, Any] | None = None


class UpdatePodGroup(Output, tag="cmd.podgroup.update.v1", kw_only=True):
    name: str
    min_member: int = 0
    min_task_member: dict[str, int] = {}
    priority_class_name: str = ""


class DeletePodGroup(Output, tag="cmd.podgroup.delete.v1", kw_only=True):
    name: str


class CreatePVC(Output, tag="cmd.pvc.create.v1", kw_only=True):
    """A PersistentVolumeClaim for a `spec.volumes[]` entry with a `volumeClaim` and no name (§6.4)."""

    name: str
    job_uid: str = ""
    claim: dict[str, Any] = {}  # the PVC spec (`volumeClaim`)


class UpdateJobStatus(Output, tag="cmd.job.status.v1", kw_only=True):
    status: JobStatus
    job_version: int = 0


class DeleteBusCommand(Output, tag="cmd.command.delete.v1", kw_only=True):
    """Consume a bus.volcano.sh Command (deleted before its action runs)."""

    name: str
    namespace: str = ""


class RecordEvent(Output, tag="cmd.event.record.v1", kw_only=True):
    """A Kubernetes Event on the vcjob, with Volcano's reason and message."""

    event_type: str = "Normal"
    reason: str
    message: str


class PluginHook(Output, tag="cmd.plugins.hook.v1", kw_only=True):
    """Run the job plugins' hook (OnJobAdd, OnJobUpdate, OnJobDelete) on the cluster side."""

    hook: str
    plugins: list[str] = []


COMMANDS = (
    CreatePod,
    CreatePVC,
    DeletePod,
    CreatePodGroup,
    UpdatePodGroup,
    DeletePodGroup,
    UpdateJobStatus,
    DeleteBusCommand,
    RecordEvent,
    PluginHook,
)

DomainEvent = Union[
    JobObserved,
    JobDeleted,
    ActionResolved,
    PhaseChanged,
    StatusChanged,
    TimerScheduled,
    TimerCancelled,
    TimerFired,
    SyncFailed,
    Divergence,
]
CommandOut = Union[
    CreatePod,
    CreatePVC,
    DeletePod,
    CreatePodGroup,
    UpdatePodGroup,
    DeletePodGroup,
    UpdateJobStatus,
    DeleteBusCommand,
    RecordEvent,
    PluginHook,
]
AnyOutput = Union[DomainEvent, CommandOut]

encoder = msgspec.json.Encoder()
output_decoder = msgspec.json.Decoder(AnyOutput)
event_decoder = msgspec.json.Decoder(DomainEvent)
command_decoder = msgspec.json.Decoder(CommandOut)


def tag_of(cls: type) -> str:
    return cls.__struct_config__.tag  # type: ignore[attr-defined]


def is_command(out: Output) -> bool:
    return isinstance(out, COMMANDS)
