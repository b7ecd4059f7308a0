"""Views of the Kubernetes objects the job controller reads, decoded with msgspec.

Each view holds only the fields the state machines look at (msgspec skips the
rest without building Python objects for them, which is what keeps replay fast).
A watch record is `{"type": ..., "object": {...}}`; the object is a tagged union
on `kind`, so one decode pass yields the right view. Task pod templates are kept
as `msgspec.Raw` (their bytes): they are only decoded when a pod is rendered.
"""

from __future__ import annotations

from typing import ClassVar, Union

import msgspec
from msgspec import Raw, Struct, field


class OwnerReference(Struct, frozen=True, rename="camel", gc=False):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ManagedFieldsEntry(Struct, frozen=True, rename="camel", gc=False):
    """Only the time of a server-side-apply entry: the API server stamps it on every write."""

    time: str | None = None


class Meta(Struct, frozen=True, rename="camel", gc=False):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    creation_timestamp: str | None = None
    # deletionTimestamp is when the deletion was asked for *plus* the grace period: a future time
    # while the object terminates (statemachines.model.record_time.object_time subtracts it)
    deletion_timestamp: str | None = None
    deletion_grace_period_seconds: int | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[OwnerReference] | None = None
    managed_fields: list[ManagedFieldsEntry] | None = None


# ---------------------------------------------------------------- vcjob


class LifecyclePolicy(Struct, frozen=True, rename="camel", gc=False):
    action: str = ""
    event: str = ""
    events: list[str] | None = None
    exit_code: int | None = None
    timeout: str | None = None  # a Go duration string, e.g. "10m"


class DependsOn(Struct, frozen=True, rename="camel", gc=False):
    name: list[str] | None = None
    iteration: str = ""


class PartitionPolicy(Struct, frozen=True, rename="camel", gc=False):
    total_partitions: int = 0
    partition_size: int = 0
    min_partitions: int = 0


class TaskSpec(Struct, frozen=True, rename="camel", gc=False):
    name: str = ""
    replicas: int = 0
    min_available: int | None = None
    template: Raw = Raw(b"{}")
    policies: list[LifecyclePolicy] | None = None
    topology_policy: str = ""
    max_retry: int = 0
    depends_on: DependsOn | None = None
    partition_policy: PartitionPolicy | None = None


class JobSpec(Struct, frozen=True, rename="camel", gc=False):
    scheduler_name: str = ""
    min_available: int = 0
    min_success: int | None = None
    volumes: Raw = Raw(b"[]")  # kept as bytes: only read when a job is initiated
    tasks: list[TaskSpec] = []
    policies: list[LifecyclePolicy] | None = None
    plugins: dict[str, list[str]] | None = None
    queue: str = ""
    max_retry: int = 0
    ttl_seconds_after_finished: int | None = None
    priority_class_name: str = ""
    network_topology: Raw = Raw(b"null")


class JobStateView(Struct, frozen=True, rename="camel", gc=False):
    phase: str = ""
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None


class JobStatusView(Struct, frozen=True, rename="camel", gc=False):
    """A status as recorded in the log (someone else's write, or an adopted one)."""

    state: JobStateView = JobStateView()
    min_available: int = 0
    task_status_count: dict[str, dict[str, dict[str, int]]] | None = None
    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    terminating: int = 0
    unknown: int = 0
    version: int = 0
    retry_count: int = 0
    running_duration: str | None = None
    controlled_resources: dict[str, str] | None = None
    conditions: list[dict[str, str | None]] | None = None


class Job(Struct, frozen=True, tag_field="kind", tag="Job", rename="camel", gc=False):
    api_version: str = ""
    metadata: Meta = Meta()
    spec: JobSpec = JobSpec()
    status: JobStatusView | None = None


# ---------------------------------------------------------------- pod


class Terminated(Struct, frozen=True, rename="camel", gc=False):
    exit_code: int = 0
    started_at: str | None = None
    finished_at: str | None = None
    reason: str = ""


class Running(Struct, frozen=True, rename="camel", gc=False):
    started_at: str | None = None


class ContainerState(Struct, frozen=True, rename="camel", gc=False):
    running: Running | None = None
    terminated: Terminated | None = None


class ContainerStatus(Struct, frozen=True, rename="camel", gc=False):
    name: str = ""
    ready: bool = False
    restart_count: int = 0
    state: ContainerState | None = None


class PodCondition(Struct, frozen=True, rename="camel", gc=False):
    type: str = ""
    status: str = ""
    last_transition_time: str | None = None


class PodStatus(Struct, frozen=True, rename="camel", gc=False):
    phase: str = ""
    conditions: list[PodCondition] | None = None
    container_statuses: list[ContainerStatus] | None = None
    init_container_statuses: list[ContainerStatus] | None = None


class PodSpecView(Struct, frozen=True, rename="camel", gc=False):
    node_name: str = ""
    # what Volcano's podgroup controller reads of a pod no vcjob owns (statemachines/podgroups/):
    # the containers' resources are kept as bytes, decoded only for such a pod's PodGroup
    scheduler_name: str = ""
    priority_class_name: str = ""
    containers: Raw = Raw(b"[]")
    init_containers: Raw = Raw(b"[]")
    overhead: Raw = Raw(b"null")
    resources: Raw = Raw(b"null")


class Pod(Struct, frozen=True, tag_field="kind", tag="Pod", rename="camel", gc=False):
    api_version: str = ""
    metadata: Meta = Meta()
    spec: PodSpecView = PodSpecView()
    status: PodStatus = PodStatus()


# ---------------------------------------------------------------- podgroup, queue, command


class PodGroupConditionView(Struct, frozen=True, rename="camel", gc=False):
    type: str = ""
    status: str = ""
    last_transition_time: str | None = None
    message: str = ""


class PodGroupStatus(Struct, frozen=True, rename="camel", gc=False):
    phase: str = ""
    conditions: list[PodGroupConditionView] | None = None  # the job controller's PodGroupPending event reads them


class PodGroupSpec(Struct, frozen=True, rename="camel", gc=False):
    min_member: int = 0
    min_task_member: dict[str, int] | None = None
    queue: str = ""
    priority_class_name: str = ""


class PodGroup(Struct, frozen=True, tag_field="kind", tag="PodGroup", rename="camel", gc=False):
    api_version: str = ""
    metadata: Meta = Meta()
    spec: PodGroupSpec = PodGroupSpec()
    status: PodGroupStatus = PodGroupStatus()


class QueueSpec(Struct, frozen=True, rename="camel", gc=False):
    parent: str = ""
    extend_clusters: list[Raw] | None = None


class QueueStatus(Struct, frozen=True, rename="camel", gc=False):
    state: str = ""
    # PodGroup counts by phase, as the queue controller writes them (statemachines/queues/)
    pending: int = 0
    running: int = 0
    inqueue: int = 0
    unknown: int = 0
    completed: int = 0


class Queue(Struct, frozen=True, tag_field="kind", tag="Queue", rename="camel", gc=False):
    api_version: str = ""
    metadata: Meta = Meta()
    spec: QueueSpec = QueueSpec()
    status: QueueStatus = QueueStatus()


class Command(Struct, frozen=True, tag_field="kind", tag="Command", rename="camel", gc=False):
    api_version: str = ""
    metadata: Meta = Meta()
    action: str = ""
    target: OwnerReference | None = field(default=None, name="target")
    reason: str = ""
    message: str = ""


# ---------------------------------------------------------------- a pod's owners


class ReplicasView(Struct, frozen=True, rename="camel", gc=False):
    replicas: int | None = None


class ReplicaSet(Struct, frozen=True, tag_field="kind", tag="ReplicaSet", rename="camel", gc=False):
    """What Volcano's podgroup controller reads of a pod's owner: its annotations, and for a
    ReplicaSet or StatefulSet its replicas (statemachines/podgroups/)."""

    api_version: str = ""
    metadata: Meta = Meta()
    spec: ReplicasView = ReplicasView()


class StatefulSet(Struct, frozen=True, tag_field="kind", tag="StatefulSet", rename="camel", gc=False):
    api_version: str = ""
    metadata: Meta = Meta()
    spec: ReplicasView = ReplicasView()


class DaemonSet(Struct, frozen=True, tag_field="kind", tag="DaemonSet", rename="camel", gc=False):
    api_version: str = ""
    metadata: Meta = Meta()


class BatchJob(Struct, frozen=True, rename="camel", gc=False):
    """A `batch/v1` Job that owns a pod: what Volcano's podgroup controller reads of it, its annotations
    (`getAnnotationsFromUpperRes`, case "Job"). Not in the decoders' union: its records have the vcjob's
    `kind` and are told apart by `apiVersion` (statemachines.model.records)."""

    api_version: str = ""
    metadata: Meta = Meta()

    OWNER_KIND: ClassVar[str] = "Job"  # the kind a pod's ownerReference names it by


OWNER_KINDS = (ReplicaSet, StatefulSet, DaemonSet, BatchJob)
BATCH_JOB_API_VERSION = "batch/v1"

KnownObject = Union[Job, Pod, PodGroup, Queue, Command, ReplicaSet, StatefulSet, DaemonSet]
ObservedObject = Union[KnownObject, BatchJob]  # what an Observed record holds (a BatchJob: not decoded by tag)

# The API groups whose objects we act on; the same `kind` in another group
# (a `batch/v1` Job, say) is counted as ignored.
API_VERSIONS = {
    "Job": "batch.volcano.sh/v1alpha1",
    "Pod": "v1",
    "PodGroup": "scheduling.volcano.sh/v1beta1",
    "Queue": "scheduling.volcano.sh/v1beta1",
    "Command": "bus.volcano.sh/v1alpha1",
    "ReplicaSet": "apps/v1",
    "StatefulSet": "apps/v1",
    "DaemonSet": "apps/v1",
}

JOB_API_VERSION = API_VERSIONS["Job"]


def job_key(namespace: str, name: str) -> str:
    """Volcano's job key: `<namespace>/<name>`."""
    return f"{namespace}/{name}"


JOB_GROUP = JOB_API_VERSION.split("/", 1)[0]  # batch.volcano.sh


def is_vcjob_ref(ref: OwnerReference) -> bool:
    """Whether an ownerReference names a vcjob: kind `Job` of the `batch.volcano.sh` group. A `batch/v1`
    Job's kind is `Job` too (a PodGroup Volcano's podgroup controller made for its pods names it), so the
    kind alone would take a batch Job `x`'s PodGroup for vcjob `x`'s."""
    return ref.kind == "Job" and ref.api_version.partition("/")[0] == JOB_GROUP


def controller_job_ref(meta: Meta) -> OwnerReference | None:
    """The controller ownerReference of kind Job in batch.volcano.sh/v1alpha1, if any."""
    for ref in meta.owner_references or ():
        if ref.controller and ref.kind == "Job" and ref.api_version == JOB_API_VERSION:
            return ref
    return None


template_decoder = msgspec.json.Decoder()
