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

from typing import Any, Union, cast

import msgspec
from msgspec import Struct

from statemachines.model.cronjob import CronJobStatus
from statemachines.model.jobflow import JobFlowStatus, JobTemplateStatus
from statemachines.model.status import JobStatus


# Not keyword-only itself (its subclasses are): `ActionResolved` is made by position, below.
# Each subclass says `frozen=True` again: msgspec inherits it, mypy (reading Struct as a dataclass_transform) does not.
class Output(Struct, frozen=True, tag_field="type", rename="camel", omit_defaults=True, gc=False):
    job: str  # "<namespace>/<name>"; "_/<queue>"; "<namespace>/<kind>:<name>" (statemachines.hosted.owner_key)
    seq: int  # position of the causing record
    time: str = ""  # event time of the causing record (RFC 3339)


# ------------------------------------------------------------------ domain events


class JobObserved(Output, tag="job.observed.v1", kw_only=True, frozen=True):
    """The job was seen for the first time (ADDED, or the first record of a log)."""

    uid: str = ""
    adopted_phase: str = ""  # non-empty when an existing status was adopted
    retry_count: int = 0
    version: int = 0
    status: JobStatus | None = None  # the adopted status object, as the log showed it (None: none adopted)


class JobDeleted(Output, tag="job.deleted.v1", kw_only=True, frozen=True):
    """The vcjob object was deleted; its pods go by ownerReference GC."""

    uid: str = ""


# Not keyword-only, unlike every other output's own fields: one of these is made for every request,
# and matching its 14 keywords costs as much as making it, so `statemachines.worker.process` passes
# them by position (and asserts the order it relies on). (A comment: the docstring is the schema's.)
class ActionResolved(Output, tag="job.action.resolved.v1", frozen=True):
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
    policy_text: str = ""  # the matched policy by its content: "PodFailed -> RestartJob (job policy 1)"


class PhaseChanged(Output, tag="job.phase.changed.v1", kw_only=True, frozen=True):
    """`status.state.phase` moved."""

    from_phase: str = msgspec.field(default="", name="from")
    to_phase: str = msgspec.field(default="", name="to")
    action: str = ""  # the action being executed when it moved
    retry_count: int = 0
    version: int = 0
    cause: str = ""  # why it moved, in words: "retries exhausted (retryCount 3 of maxRetry 3)"


class TaskPhaseChanged(Output, tag="task.phase.changed.v1", kw_only=True, frozen=True):
    """A task's phase moved (the task machine, statemachines/task/): Pending, Running, Completed, Failed.

    Not a Volcano status field: Volcano keeps no task phase, only the per-task pod
    counts of `status.taskStatusCount`. The counts here are the task's pods in the
    controller's cache when it moved (`restarts`: container restarts of its
    Running and Pending pods)."""

    task: str
    from_phase: str = msgspec.field(default="", name="from")
    to_phase: str = msgspec.field(default="", name="to")
    trigger: str = ""  # the task machine trigger: pod_succeeded, pod_updated or pods_changed
    pod: str = ""  # the pod whose change moved it ("" for the controller's own pods or a spec change)
    cause: str = ""  # the guard that held, in words: "all replicas succeeded (2 of 2)"
    replicas: int = 0
    min_available: int = 0
    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    unknown: int = 0
    restarts: int = 0


class StatusChanged(Output, tag="job.status.changed.v1", kw_only=True, frozen=True):
    """The controller wrote a new status (the full object, as on the vcjob)."""

    status: JobStatus


class TimerScheduled(Output, tag="job.timer.scheduled.v1", kw_only=True, frozen=True):
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


class TimerCancelled(Output, tag="job.timer.cancelled.v1", kw_only=True, frozen=True):
    timer: str
    reason: str = ""


class TimerFired(Output, tag="job.timer.fired.v1", kw_only=True, frozen=True):
    timer: str
    action: str


class SyncFailed(Output, tag="job.sync.failed.v1", kw_only=True, frozen=True):
    """A sync could not proceed (queue missing...); after the requeue limit: TerminateJob."""

    message: str


class Divergence(Output, tag="job.divergence.v1", kw_only=True, frozen=True):
    """A status recorded in the log differs from what vcbus decided."""

    field: str  # "phase" or "retryCount"
    recorded: str
    decided: str
    resource_version: str = ""



# ------------------------------------------------------------------ scheduler, queue controller, GC
#
# The scheduler (statemachines/scheduler/) runs sessions over the scheduler projection of
# VCBUS_K8S. A session is identified by `seq`: the last VCBUS_K8S record it folded (its
# cut). Its outputs carry that seq and the session number `session`, so the same cut
# gives the same outputs and ids. `job` is the vcjob that owns the PodGroup
# (`<ns>/<vcjob>`, from the PodGroup's owner reference) or, for a PodGroup no vcjob owns,
# `<ns>/<podgroup>`; queue outputs use `_/<queue>` and session outputs `_/scheduler`.


class SchedulingSession(Output, tag="sched.session.v1", kw_only=True, frozen=True):
    """One scheduling session ran over the projection cut at `seq` (job `_/scheduler`)."""

    session: int  # 1-based session number
    uid: str  # session UID: the transitionID written into conditions
    actions: list[str] = []
    jobs: int = 0
    nodes: int = 0
    binds: int = 0
    evictions: int = 0


class JobEnqueued(Output, tag="sched.job.enqueued.v1", kw_only=True, frozen=True):
    """enqueue admitted a PodGroup: Pending -> Inqueue."""

    session: int = 0
    podgroup: str
    queue: str = ""


class PodAllocated(Output, tag="sched.pod.allocated.v1", kw_only=True, frozen=True):
    """A committed allocation: the pod goes to `node` (a Bind command follows)."""

    session: int = 0
    podgroup: str = ""
    pod: str
    uid: str = ""
    node: str
    task: str = ""  # the task role (volcano.sh/task-spec)
    action: str = "allocate"  # allocate | backfill | preempt | reclaim


class PodBound(Output, tag="sched.pod.bound.v1", kw_only=True, frozen=True):
    """The log shows the pod on its node (`spec.nodeName`) after vcbus bound it."""

    session: int = 0
    podgroup: str = ""
    pod: str
    uid: str = ""
    node: str


class PodEvicted(Output, tag="sched.pod.evicted.v1", kw_only=True, frozen=True):
    """preempt or reclaim chose the pod as a victim (an EvictPod command follows)."""

    session: int = 0
    podgroup: str = ""
    pod: str
    uid: str = ""
    node: str = ""
    action: str = ""  # preempt | reclaim
    preemptor: str = ""  # "<ns>/<pod>" it makes room for


class JobUnschedulable(Output, tag="sched.job.unschedulable.v1", kw_only=True, frozen=True):
    """The gang did not fit: Volcano's `Unschedulable` condition message (its FitError)."""

    session: int = 0
    podgroup: str
    reason: str = "NotEnoughResources"
    message: str = ""


class QueueStateChanged(Output, tag="queue.state.changed.v1", kw_only=True, frozen=True):
    """The queue controller moved a queue's `status.state` (job `_/<queue>`)."""

    queue: str
    from_state: str = msgspec.field(default="", name="from")
    to_state: str = msgspec.field(default="", name="to")
    action: str = ""  # OpenQueue | CloseQueue | SyncQueue


class JobExpired(Output, tag="job.ttl.expired.v1", kw_only=True, frozen=True):
    """The garbage collector: a finished job's ttlSecondsAfterFinished is up (DeleteJob follows)."""

    uid: str = ""
    finished: str = ""  # when the job finished (its last transition time)
    ttl_seconds: int = 0


class RecordPoisoned(Output, tag="record.poison.v1", kw_only=True, frozen=True):
    """A record a bus service could not decode or decide was set aside (acked, not retried).

    `job` is the record's job when it can be told, else `_/poison`. `stream`/`sequence`
    address the record (`vcbus poison retry` re-publishes it); `component` is the service
    that set it aside (decider, projector, scheduler)."""

    stream: str = ""
    sequence: int = 0
    subject: str = ""
    component: str = ""
    reason: str = ""


class RecordRetried(Output, tag="record.retried.v1", kw_only=True, frozen=True):
    """A poisoned record's copy (`vcbus poison retry`) was decided without failure."""

    stream: str = ""
    sequence: int = 0  # the poisoned record
    retry_sequence: int = 0  # its re-published copy


# Volcano's cronjob controller (statemachines/cronjobs/). Every output's `job` is the CronJob's
# `<namespace>/cronjob:<name>`; its events on the CronJob are `RecordEvent` (kind CronJob), its timers
# `TimerScheduled`/`TimerCancelled`/`TimerFired` (action `SyncCronJob`).


class CronJobStateChanged(Output, tag="cronjob.state.changed.v1", kw_only=True, frozen=True):
    """The CronJob machine moved (statemachines/cronjobs/machine.py)."""

    from_state: str = ""
    to_state: str = ""
    cause: str = ""


class CronJobRunChanged(Output, tag="cronjob.run.changed.v1", kw_only=True, frozen=True):
    """A run (one scheduled time, named as its vcjob) moved; `cause` says why, in words."""

    run: str  # the vcjob's name, `<cronjob>-<scheduled minutes since the epoch>`
    scheduled: str  # the scheduled time (RFC 3339, UTC)
    from_state: str = ""
    to_state: str = ""
    cause: str = ""


# Volcano's jobflow and jobtemplate controllers (statemachines/jobflows/). Every output's `job` is the
# JobFlow's `<namespace>/jobflow:<name>` (a JobTemplate's `<namespace>/jobtemplate:<name>`); its events on the
# JobFlow are `RecordEvent` (kind JobFlow), its failed syncs' retries timers of action `SyncJobFlow`.


class JobFlowStateChanged(Output, tag="jobflow.state.changed.v1", kw_only=True, frozen=True):
    """The JobFlow machine moved (statemachines/jobflows/machine.py): `status.state.phase`, or Deleted."""

    from_state: str = ""
    to_state: str = ""
    cause: str = ""


class JobFlowSyncFailed(Output, tag="jobflow.sync.failed.v1", kw_only=True, frozen=True):
    """A JobFlow's sync stopped before its status write (a JobTemplate not found, a phase Volcano does not know)."""

    message: str


DOMAIN_EVENTS = (
    JobObserved,
    JobDeleted,
    ActionResolved,
    PhaseChanged,
    TaskPhaseChanged,
    StatusChanged,
    TimerScheduled,
    TimerCancelled,
    TimerFired,
    SyncFailed,
    Divergence,
    SchedulingSession,
    JobEnqueued,
    PodAllocated,
    PodBound,
    PodEvicted,
    JobUnschedulable,
    QueueStateChanged,
    JobExpired,
    RecordPoisoned,
    RecordRetried,
    CronJobStateChanged,
    CronJobRunChanged,
    JobFlowStateChanged,
    JobFlowSyncFailed,
)

# ------------------------------------------------------------------ commands


class CreatePod(Output, tag="cmd.pod.create.v1", kw_only=True, frozen=True):
    name: str
    task: str
    index: int
    job_version: int = 0
    retry_count: int = 0
    job_uid: str = ""
    pod: dict[str, Any] | None = None  # the full manifest, when the engine renders pods


class DeletePod(Output, tag="cmd.pod.delete.v1", kw_only=True, frozen=True):
    name: str
    uid: str = ""
    task: str = ""
    mark_out_of_sync: bool = True  # annotate volcano.sh/controller-out-of-sync first (kills)
    reason: str = ""  # "kill" or "scale-down" or "out-of-sync"


class CreatePodGroup(Output, tag="cmd.podgroup.create.v1", kw_only=True, frozen=True):
    name: str
    job_uid: str = ""
    min_member: int = 0
    min_task_member: dict[str, int] = {}
    queue: str = ""
    priority_class_name: str = ""
    podgroup: dict[str, Any] | None = None


class UpdatePodGroup(Output, tag="cmd.podgroup.update.v1", kw_only=True, frozen=True):
    name: str
    min_member: int = 0
    min_task_member: dict[str, int] = {}
    priority_class_name: str = ""


class DeletePodGroup(Output, tag="cmd.podgroup.delete.v1", kw_only=True, frozen=True):
    name: str


class CreateWorkloadPodGroup(Output, tag="cmd.podgroup.workload.create.v1", kw_only=True, frozen=True):
    """The PodGroup of a pod no vcjob owns (Volcano's podgroup controller; statemachines/podgroups/).

    Job key `<namespace>/<name>`: the PodGroup's. Created only while `pod` (uid `pod_uid`) exists
    and is for a scheduler vcbus serves; AlreadyExists is done."""

    name: str
    pod: str
    pod_uid: str = ""
    podgroup: dict[str, Any] = {}  # the manifest (statemachines.podgroups.manifest.build_podgroup)


class DeleteWorkloadPodGroup(Output, tag="cmd.podgroup.workload.delete.v1", kw_only=True, frozen=True):
    """Delete the PodGroup of a ReplicaSet or StatefulSet scaled to 0 replicas (Volcano's podgroup
    controller, `addReplicaSet` / `addStatefulSet`; statemachines/podgroups/). Job key
    `<namespace>/<name>`: the PodGroup's, `podgroup-<owner_uid>`. Only a PodGroup owned by that
    owner is deleted; NotFound is done."""

    name: str
    owner_uid: str


class AnnotatePodGroupName(Output, tag="cmd.pod.podgroup.v1", kw_only=True, frozen=True):
    """Write `scheduling.k8s.io/group-name: <podgroup>` on a pod that has none (Volcano's
    `updatePodAnnotations`); job key `<namespace>/<podgroup>`."""

    name: str  # the pod
    uid: str = ""
    podgroup: str


class CreatePVC(Output, tag="cmd.pvc.create.v1", kw_only=True, frozen=True):
    """A PersistentVolumeClaim for a `spec.volumes[]` entry with a `volumeClaim` and no name (§6.4)."""

    name: str
    job_uid: str = ""
    claim: dict[str, Any] = {}  # the PVC spec (`volumeClaim`)


class UpdateJobStatus(Output, tag="cmd.job.status.v1", kw_only=True, frozen=True):
    """Replace the vcjob's status. `uid` and `resource_version` name the vcjob it was computed from:
    a vcjob of another uid (deleted and re-created under the name) is not written."""

    status: JobStatus
    job_version: int = 0
    uid: str = ""
    resource_version: str = ""


class DeleteBusCommand(Output, tag="cmd.command.delete.v1", kw_only=True, frozen=True):
    """Consume a bus.volcano.sh Command (deleted before its action runs)."""

    name: str
    namespace: str = ""


class RecordEvent(Output, tag="cmd.event.record.v1", kw_only=True, frozen=True):
    """A Kubernetes Event with Volcano's reason and message.

    On the vcjob by default; `kind`/`name` (and `api_version`) name another involved
    object: a PodGroup or a Pod in the job's namespace, or a cluster-scoped Queue
    (`job` is then `_/<queue>`). `component` is the event source (vc-controller-manager
    for the job machine, vc-scheduler for the scheduler).
    """

    event_type: str = "Normal"
    reason: str
    message: str
    kind: str = ""  # "" = the vcjob; "PodGroup", "Pod", "Queue"
    name: str = ""
    api_version: str = ""
    component: str = ""


class PluginHook(Output, tag="cmd.plugins.hook.v1", kw_only=True, frozen=True):
    """Run the job plugins' hook (OnJobAdd, OnJobUpdate, OnJobDelete) on the cluster side."""

    hook: str
    plugins: list[str] = []



class VolumeBinding(Struct, frozen=True, rename="camel", omit_defaults=True, kw_only=True, gc=False):
    """A static PersistentVolume chosen for one of the pod's unbound WaitForFirstConsumer claims."""

    claim: str  # the PVC, in the pod's namespace
    claim_uid: str = ""
    volume: str  # the PV


class BindPod(Output, tag="cmd.pod.bind.v1", kw_only=True, frozen=True):
    """Bind the pod to `node` through the Binding subresource (already bound or gone: done). `volumes`
    are claimed first: each PV's `spec.claimRef` is written to its claim (kube-scheduler's VolumeBinding
    PreBind); if a PV is gone or held by another claim, or the claim is gone, the pod is not bound."""

    name: str
    uid: str = ""
    node: str
    volumes: list[VolumeBinding] = []


class EvictPod(Output, tag="cmd.pod.evict.v1", kw_only=True, frozen=True):
    """Delete a victim pod (preempt, reclaim), with a uid precondition."""

    name: str
    uid: str = ""
    reason: str = ""  # preempt | reclaim


class UpdatePodCondition(Output, tag="cmd.pod.condition.v1", kw_only=True, frozen=True):
    """Set the pod's `PodScheduled` condition (status False) and, after an eviction, nominatedNodeName."""

    name: str
    uid: str = ""
    status: str = "False"
    reason: str = ""
    message: str = ""
    nominated_node: str = ""


class UpdatePodGroupStatus(Output, tag="cmd.podgroup.status.v1", kw_only=True, frozen=True):
    """Replace the PodGroup's status with what the session closed with (only on change)."""

    name: str
    status: dict[str, Any]  # phase, conditions, running, succeeded, failed (PodGroup status as on the API)
    uid: str = ""  # the PodGroup the session computed it from: another incarnation of the name is not written
    resource_version: str = ""  # that PodGroup's resourceVersion as the session saw it


class UpdateQueueStatus(Output, tag="cmd.queue.status.v1", kw_only=True, frozen=True):
    """Merge-patch a Queue's status (job `_/<queue>`): the scheduler writes `allocated`;
    the queue controller writes `state`, when it changes. Fields left None are not touched.
    `counts` (the PodGroup counts by phase) is no longer set, as Volcano's queue controller no
    longer writes them; it stays in the contract, and the actuator still applies it, for
    commands stored by an older vcbus.
    `uid`/`resource_version`: the Queue it was computed from (another incarnation is not written)."""

    queue: str
    state: str | None = None
    allocated: dict[str, str] | None = None  # Kubernetes quantity strings
    counts: dict[str, int] | None = None  # pending, running, inqueue, unknown, completed (older vcbus only)
    uid: str = ""
    resource_version: str = ""


class CreateQueue(Output, tag="cmd.queue.create.v1", kw_only=True, frozen=True):
    """Create a Queue if it is missing (the default and root queues)."""

    queue: str
    weight: int = 1
    reclaimable: bool = True
    parent: str = ""


class DeleteJob(Output, tag="cmd.job.delete.v1", kw_only=True, frozen=True):
    """Delete a vcjob (the garbage collector), with a uid precondition and foreground propagation (as Volcano's collector)."""

    uid: str = ""


# Volcano's cronjob controller's commands (statemachines/cronjobs/): a run's vcjob made and deleted, the status.


class CreateCronJobRun(Output, tag="cmd.cronjob.job.create.v1", kw_only=True, frozen=True):
    """Create the vcjob `name` in the CronJob's namespace, controlled by the CronJob `cronjob` (`cronjob_uid`)."""

    name: str
    cronjob: str
    cronjob_uid: str
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    spec: dict[str, Any] = {}


class DeleteCronJobRun(Output, tag="cmd.cronjob.job.delete.v1", kw_only=True, frozen=True):
    """Delete the vcjob `name` of the CronJob (uid precondition: another vcjob of the name is left alone)."""

    name: str
    uid: str = ""


class UpdateCronJobStatus(Output, tag="cmd.cronjob.status.v1", kw_only=True, frozen=True):
    """Replace the CronJob's status; `uid`/`resource_version` name the CronJob it was computed from."""

    name: str
    status: CronJobStatus
    uid: str = ""
    resource_version: str = ""


# Volcano's jobflow and jobtemplate controllers' commands (statemachines/jobflows/).


class CreateJobFlowJob(Output, tag="cmd.jobflow.job.create.v1", kw_only=True, frozen=True):
    """Create the vcjob `name` in the JobFlow's namespace from the JobTemplate `template`, controlled by the
    JobFlow `jobflow` (`jobflow_uid`), as Volcano's loadJobTemplateAndSetJob makes it."""

    name: str
    jobflow: str
    jobflow_uid: str
    template: str = ""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    spec: dict[str, Any] = {}


class DeleteJobFlowJob(Output, tag="cmd.jobflow.job.delete.v1", kw_only=True, frozen=True):
    """Delete the vcjob `name` of a Succeed JobFlow whose jobRetainPolicy is delete (uid precondition)."""

    name: str
    uid: str = ""


class UpdateJobFlowStatus(Output, tag="cmd.jobflow.status.v1", kw_only=True, frozen=True):
    """Replace the JobFlow's status; `uid`/`resource_version` name the JobFlow it was computed from."""

    name: str
    status: JobFlowStatus
    uid: str = ""
    resource_version: str = ""


class UpdateJobTemplateStatus(Output, tag="cmd.jobtemplate.status.v1", kw_only=True, frozen=True):
    """Replace the JobTemplate's status (`jobDependsOnList`: the vcjobs made from it); `uid` names the JobTemplate."""

    name: str
    status: JobTemplateStatus
    uid: str = ""
    resource_version: str = ""


COMMANDS = (
    CreatePod,
    CreatePVC,
    DeletePod,
    CreatePodGroup,
    UpdatePodGroup,
    DeletePodGroup,
    CreateWorkloadPodGroup,
    DeleteWorkloadPodGroup,
    AnnotatePodGroupName,
    UpdateJobStatus,
    DeleteBusCommand,
    RecordEvent,
    PluginHook,
    BindPod,
    EvictPod,
    UpdatePodCondition,
    UpdatePodGroupStatus,
    UpdateQueueStatus,
    CreateQueue,
    DeleteJob,
    CreateCronJobRun,
    DeleteCronJobRun,
    UpdateCronJobStatus,
    CreateJobFlowJob,
    DeleteJobFlowJob,
    UpdateJobFlowStatus,
    UpdateJobTemplateStatus,
)

DomainEvent = Union[
    JobObserved,
    JobDeleted,
    ActionResolved,
    PhaseChanged,
    TaskPhaseChanged,
    StatusChanged,
    TimerScheduled,
    TimerCancelled,
    TimerFired,
    SyncFailed,
    Divergence,
    SchedulingSession,
    JobEnqueued,
    PodAllocated,
    PodBound,
    PodEvicted,
    JobUnschedulable,
    QueueStateChanged,
    JobExpired,
    RecordPoisoned,
    RecordRetried,
    CronJobStateChanged,
    CronJobRunChanged,
    JobFlowStateChanged,
    JobFlowSyncFailed,
]
CommandOut = Union[
    CreatePod,
    CreatePVC,
    DeletePod,
    CreatePodGroup,
    UpdatePodGroup,
    DeletePodGroup,
    CreateWorkloadPodGroup,
    DeleteWorkloadPodGroup,
    AnnotatePodGroupName,
    UpdateJobStatus,
    DeleteBusCommand,
    RecordEvent,
    PluginHook,
    BindPod,
    EvictPod,
    UpdatePodCondition,
    UpdatePodGroupStatus,
    UpdateQueueStatus,
    CreateQueue,
    DeleteJob,
    CreateCronJobRun,
    DeleteCronJobRun,
    UpdateCronJobStatus,
    CreateJobFlowJob,
    DeleteJobFlowJob,
    UpdateJobFlowStatus,
    UpdateJobTemplateStatus,
]
AnyOutput = Union[DomainEvent, CommandOut]

encoder = msgspec.json.Encoder()
output_decoder = msgspec.json.Decoder(AnyOutput)
event_decoder = msgspec.json.Decoder(DomainEvent)
command_decoder = msgspec.json.Decoder(CommandOut)


def tag_of(cls: type[Output]) -> str:
    return cast(str, cls.__struct_config__.tag)  # each output's class statement gives a str tag= (msgspec: str|int|None)


def is_command(out: Output) -> bool:
    return isinstance(out, COMMANDS)
