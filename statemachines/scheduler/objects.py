"""Views of the objects the scheduler folds (Node, Queue, PodGroup, Pod, PriorityClass, Namespace,
PersistentVolumeClaim, PersistentVolume, StorageClass, and the Services, ReplicationControllers,
ReplicaSets and StatefulSets whose selectors give a pod its system-default topology spreading) and
the decoding of one watch record into them.

Each view keeps only what Volcano's scheduler cache reads (`pkg/scheduler/cache/event_handlers.go`);
msgspec skips every other field without building objects for it, so one record costs work
bounded by the fields kept. Quantities stay as the strings (or numbers) Kubernetes wrote;
`statemachines.scheduler.model` turns them into resource vectors once per object.
"""

from __future__ import annotations

from typing import Any, Union

import msgspec
from msgspec import Struct

from statemachines.model.records import RecordError

Quantities = dict[str, Union[str, int, float]]


class Meta(Struct, frozen=True, rename="camel", gc=False):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    owner_references: list[dict[str, Any]] | None = None


# ---------------------------------------------------------------- node


class Taint(Struct, frozen=True, rename="camel", gc=False):
    key: str = ""
    value: str = ""
    effect: str = ""


class NodeSpec(Struct, frozen=True, rename="camel", gc=False):
    unschedulable: bool = False
    taints: list[Taint] | None = None


class NodeCondition(Struct, frozen=True, rename="camel", gc=False):
    type: str = ""
    status: str = ""


class ContainerImage(Struct, frozen=True, rename="camel", gc=False):
    names: list[str] | None = None
    size_bytes: int = 0


class NodeStatus(Struct, frozen=True, rename="camel", gc=False):
    allocatable: Quantities | None = None
    capacity: Quantities | None = None
    conditions: list[NodeCondition] | None = None
    images: list[ContainerImage] | None = None  # ImageLocality's score


class Node(Struct, frozen=True, tag_field="kind", tag="Node", rename="camel", gc=False):
    api_version: str = ""
    metadata: Meta = Meta()
    spec: NodeSpec = NodeSpec()
    status: NodeStatus = NodeStatus()


# ---------------------------------------------------------------- queue


class Guarantee(Struct, frozen=True, rename="camel", gc=False):
    resource: Quantities | None = None


class QueueSpec(Struct, frozen=True, rename="camel", gc=False):
    weight: int = 0
    capability: Quantities | None = None
    guarantee: Guarantee | None = None
    deserved: Quantities | None = None
    reclaimable: bool | None = None
    parent: str = ""
    priority: int = 0


class QueueStatus(Struct, frozen=True, rename="camel", gc=False):
    state: str = ""
    allocated: Quantities | None = None


class Queue(Struct, frozen=True, tag_field="kind", tag="Queue", rename="camel", gc=False):
    api_version: str = ""
    metadata: Meta = Meta()
    spec: QueueSpec = QueueSpec()
    status: QueueStatus = QueueStatus()


# ---------------------------------------------------------------- podgroup


class PodGroupCondition(Struct, frozen=True, rename="camel", omit_defaults=True, gc=False):
    type: str = ""
    status: str = ""
    transition_id: str = msgspec.field(default="", name="transitionID")
    last_transition_time: str | None = None
    reason: str = ""
    message: str = ""


class PodGroupSpec(Struct, frozen=True, rename="camel", gc=False):
    min_member: int = 0
    min_task_member: dict[str, int] | None = None
    min_resources: Quantities | None = None
    queue: str = ""
    priority_class_name: str = ""


class PodGroupStatus(Struct, frozen=True, rename="camel", gc=False):
    phase: str = ""
    conditions: list[PodGroupCondition] | None = None
    running: int = 0
    succeeded: int = 0
    failed: int = 0


class PodGroup(Struct, frozen=True, tag_field="kind", tag="PodGroup", rename="camel", gc=False):
    api_version: str = ""
    metadata: Meta = Meta()
    spec: PodGroupSpec = PodGroupSpec()
    status: PodGroupStatus = PodGroupStatus()


# ---------------------------------------------------------------- pod


class Requirements(Struct, frozen=True, rename="camel", gc=False):
    requests: Quantities | None = None


class ContainerPort(Struct, frozen=True, rename="camel", gc=False):
    host_port: int = 0
    host_ip: str = msgspec.field(default="", name="hostIP")
    protocol: str = ""


class Container(Struct, frozen=True, rename="camel", gc=False):
    name: str = ""
    image: str = ""
    resources: Requirements = Requirements()
    restart_policy: str | None = None
    ports: list[ContainerPort] | None = None


class Requirement(Struct, frozen=True, rename="camel", gc=False):
    key: str = ""
    operator: str = ""
    values: list[str] | None = None


class SelectorTerm(Struct, frozen=True, rename="camel", gc=False):
    match_expressions: list[Requirement] | None = None
    match_fields: list[Requirement] | None = None


class NodeSelector(Struct, frozen=True, rename="camel", gc=False):
    node_selector_terms: list[SelectorTerm] | None = None


class PreferredTerm(Struct, frozen=True, rename="camel", gc=False):
    weight: int = 0
    preference: SelectorTerm = SelectorTerm()


class NodeAffinity(Struct, frozen=True, rename="camel", gc=False):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[PreferredTerm] | None = None


class LabelSelector(Struct, frozen=True, rename="camel", gc=False):
    match_labels: dict[str, str] | None = None
    match_expressions: list[Requirement] | None = None


class PodAffinityTerm(Struct, frozen=True, rename="camel", gc=False):
    label_selector: LabelSelector | None = None
    namespaces: list[str] | None = None
    topology_key: str = ""
    namespace_selector: LabelSelector | None = None
    match_label_keys: list[str] | None = None
    mismatch_label_keys: list[str] | None = None


class WeightedPodAffinityTerm(Struct, frozen=True, rename="camel", gc=False):
    weight: int = 0
    pod_affinity_term: PodAffinityTerm = PodAffinityTerm()


class PodAffinity(Struct, frozen=True, rename="camel", gc=False):
    """Pod affinity or anti-affinity (the same shape)."""

    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] | None = None
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] | None = None


class Affinity(Struct, frozen=True, rename="camel", gc=False):
    node_affinity: NodeAffinity | None = None
    pod_affinity: PodAffinity | None = None
    pod_anti_affinity: PodAffinity | None = None


class TopologySpreadConstraint(Struct, frozen=True, rename="camel", gc=False):
    max_skew: int = 0
    topology_key: str = ""
    when_unsatisfiable: str = ""
    label_selector: LabelSelector | None = None
    min_domains: int | None = None
    node_affinity_policy: str | None = None
    node_taints_policy: str | None = None
    match_label_keys: list[str] | None = None


class ImageVolume(Struct, frozen=True, rename="camel", gc=False):
    reference: str = ""


class ClaimSource(Struct, frozen=True, rename="camel", gc=False):
    claim_name: str = ""


class Volume(Struct, frozen=True, rename="camel", gc=False):
    """A volume, kept only as far as placement depends on it (a claim, checked against the PVC,
    PV and StorageClass objects; an image volume's reference counts for ImageLocality)."""

    name: str = ""
    persistent_volume_claim: ClaimSource | None = None
    ephemeral: Any = None
    image: ImageVolume | None = None
    # the in-tree sources NodeVolumeLimits counts through CSI migration (volumes.IN_TREE)
    aws_elastic_block_store: dict[str, Any] | None = None
    gce_persistent_disk: dict[str, Any] | None = None
    azure_disk: dict[str, Any] | None = None
    cinder: dict[str, Any] | None = None
    portworx_volume: dict[str, Any] | None = None


class Toleration(Struct, frozen=True, rename="camel", gc=False):
    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""


class SchedulingGate(Struct, frozen=True, rename="camel", gc=False):
    name: str = ""


class PodSpec(Struct, frozen=True, rename="camel", gc=False):
    node_name: str = ""
    scheduler_name: str = ""
    priority: int | None = None
    priority_class_name: str = ""
    preemption_policy: str | None = None
    containers: list[Container] | None = None
    init_containers: list[Container] | None = None
    overhead: Quantities | None = None
    node_selector: dict[str, str] | None = None
    affinity: Affinity | None = None
    tolerations: list[Toleration] | None = None
    scheduling_gates: list[SchedulingGate] | None = None
    topology_spread_constraints: list[TopologySpreadConstraint] | None = None
    volumes: list[Volume] | None = None
    resource_claims: list[Any] | None = None
    resources: Requirements | None = None  # pod-level resources (PodLevelResources)


class PodConditionView(Struct, frozen=True, rename="camel", gc=False):
    type: str = ""
    status: str = ""
    reason: str = ""
    message: str = ""


class PodStatus(Struct, frozen=True, rename="camel", gc=False):
    phase: str = ""
    nominated_node_name: str = ""
    conditions: list[PodConditionView] | None = None


class Pod(Struct, frozen=True, tag_field="kind", tag="Pod", rename="camel", gc=False):
    api_version: str = ""
    metadata: Meta = Meta()
    spec: PodSpec = PodSpec()
    status: PodStatus = PodStatus()


# ---------------------------------------------------------------- priority class


class PriorityClass(Struct, frozen=True, tag_field="kind", tag="PriorityClass", rename="camel", gc=False):
    api_version: str = ""
    metadata: Meta = Meta()
    value: int = 0
    global_default: bool = False


# ---------------------------------------------------------------- namespace


class Namespace(Struct, frozen=True, tag_field="kind", tag="Namespace", rename="camel", gc=False):
    """A namespace, for its labels (InterPodAffinity's namespaceSelector)."""

    api_version: str = ""
    metadata: Meta = Meta()


# ---------------------------------------------------------------- volumes


class ClaimResources(Struct, frozen=True, rename="camel", gc=False):
    requests: Quantities | None = None


class ClaimSpec(Struct, frozen=True, rename="camel", gc=False):
    volume_name: str = ""
    storage_class_name: str | None = None
    # what a static PV must offer (FindMatchingVolume)
    access_modes: list[str] | None = None
    resources: ClaimResources = ClaimResources()
    volume_mode: str | None = None
    selector: LabelSelector | None = None
    volume_attributes_class_name: str | None = None


class ClaimStatus(Struct, frozen=True, rename="camel", gc=False):
    phase: str = ""


class PersistentVolumeClaim(Struct, frozen=True, tag_field="kind", tag="PersistentVolumeClaim", rename="camel",
                            gc=False):
    api_version: str = ""
    metadata: Meta = Meta()
    spec: ClaimSpec = ClaimSpec()
    status: ClaimStatus = ClaimStatus()


class VolumeNodeAffinity(Struct, frozen=True, rename="camel", gc=False):
    required: NodeSelector | None = None


class ClaimRef(Struct, frozen=True, rename="camel", gc=False):
    namespace: str = ""
    name: str = ""
    uid: str = ""


class CSISource(Struct, frozen=True, rename="camel", gc=False):
    driver: str = ""
    volume_handle: str = ""


class VolumeSpec(Struct, frozen=True, rename="camel", gc=False):
    node_affinity: VolumeNodeAffinity | None = None
    # the volume's driver and handle, as NodeVolumeLimits counts it (a CSI source, or a migratable in-tree one)
    csi: CSISource | None = None
    aws_elastic_block_store: dict[str, Any] | None = None
    gce_persistent_disk: dict[str, Any] | None = None
    azure_disk: dict[str, Any] | None = None
    cinder: dict[str, Any] | None = None
    portworx_volume: dict[str, Any] | None = None
    # what a claim is matched against (FindMatchingVolume)
    capacity: Quantities | None = None
    access_modes: list[str] | None = None
    storage_class_name: str = ""
    volume_mode: str | None = None
    claim_ref: ClaimRef | None = None
    volume_attributes_class_name: str | None = None


class VolumeStatus(Struct, frozen=True, rename="camel", gc=False):
    phase: str = ""


class PersistentVolume(Struct, frozen=True, tag_field="kind", tag="PersistentVolume", rename="camel", gc=False):
    api_version: str = ""
    metadata: Meta = Meta()
    spec: VolumeSpec = VolumeSpec()
    status: VolumeStatus = VolumeStatus()


class StorageClass(Struct, frozen=True, tag_field="kind", tag="StorageClass", rename="camel", gc=False):
    api_version: str = ""
    metadata: Meta = Meta()
    volume_binding_mode: str | None = None
    provisioner: str = ""


class DriverAllocatable(Struct, frozen=True, rename="camel", gc=False):
    count: int | None = None


class CSINodeDriver(Struct, frozen=True, rename="camel", gc=False):
    name: str = ""
    allocatable: DriverAllocatable | None = None


class CSINodeSpec(Struct, frozen=True, rename="camel", gc=False):
    drivers: list[CSINodeDriver] | None = None


class CSINode(Struct, frozen=True, tag_field="kind", tag="CSINode", rename="camel", gc=False):
    """A node's CSI drivers and their volume limits (NodeVolumeLimits); named as its node."""

    api_version: str = ""
    metadata: Meta = Meta()
    spec: CSINodeSpec = CSINodeSpec()


class AttachmentSource(Struct, frozen=True, rename="camel", gc=False):
    persistent_volume_name: str | None = None


class AttachmentSpec(Struct, frozen=True, rename="camel", gc=False):
    attacher: str = ""
    node_name: str = ""
    source: AttachmentSource = AttachmentSource()


class VolumeAttachment(Struct, frozen=True, tag_field="kind", tag="VolumeAttachment", rename="camel", gc=False):
    """A PV attached (or being attached) to a node, which NodeVolumeLimits counts on that node."""

    api_version: str = ""
    metadata: Meta = Meta()
    spec: AttachmentSpec = AttachmentSpec()


# ---------------------------------------------------------------- workloads (system-default spreading)


class ServiceSpec(Struct, frozen=True, rename="camel", gc=False):
    selector: dict[str, str] | None = None


class Service(Struct, frozen=True, tag_field="kind", tag="Service", rename="camel", gc=False):
    """A Service, for its selector (PodTopologySpread's system-default constraints)."""

    api_version: str = ""
    metadata: Meta = Meta()
    spec: ServiceSpec = ServiceSpec()


class ReplicationController(Service, tag="ReplicationController", frozen=True):  # frozen: inherited; said for mypy
    """A ReplicationController: its selector is a plain label map too."""


class WorkloadSpec(Struct, frozen=True, rename="camel", gc=False):
    selector: LabelSelector | None = None


class ReplicaSet(Struct, frozen=True, tag_field="kind", tag="ReplicaSet", rename="camel", gc=False):
    """A ReplicaSet, for its label selector (system-default spreading of the pods it controls)."""

    api_version: str = ""
    metadata: Meta = Meta()
    spec: WorkloadSpec = WorkloadSpec()


class StatefulSet(ReplicaSet, tag="StatefulSet", frozen=True):  # frozen: inherited; said for mypy
    """A StatefulSet: a label selector, as a ReplicaSet's."""


WORKLOAD_KINDS = (Service, ReplicationController, ReplicaSet, StatefulSet)

SchedObject = Union[Node, Queue, PodGroup, Pod, PriorityClass, Namespace, PersistentVolumeClaim, PersistentVolume,
                    StorageClass, CSINode, VolumeAttachment, Service, ReplicationController, ReplicaSet, StatefulSet]

API_VERSIONS = {
    "Node": "v1",
    "Pod": "v1",
    "Queue": "scheduling.volcano.sh/v1beta1",
    "PodGroup": "scheduling.volcano.sh/v1beta1",
    "PriorityClass": "scheduling.k8s.io/v1",
    "Namespace": "v1",
    "PersistentVolumeClaim": "v1",
    "PersistentVolume": "v1",
    "StorageClass": "storage.k8s.io/v1",
    "CSINode": "storage.k8s.io/v1",
    "VolumeAttachment": "storage.k8s.io/v1",
    "Service": "v1",
    "ReplicationController": "v1",
    "ReplicaSet": "apps/v1",
    "StatefulSet": "apps/v1",
}

WATCH_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED"})


class Record(Struct, frozen=True, gc=False):
    """A decoded watch record of a kind the scheduler folds."""

    type: str
    object: SchedObject
    time: str | None = None


class _Envelope(Struct, gc=False):
    type: str
    object: SchedObject
    time: str | None = None


_typed = msgspec.json.Decoder(_Envelope)
_generic = msgspec.json.Decoder()
_convert_types = {"Node": Node, "Queue": Queue, "PodGroup": PodGroup, "Pod": Pod, "PriorityClass": PriorityClass,
                  "Namespace": Namespace, "PersistentVolumeClaim": PersistentVolumeClaim,
                  "PersistentVolume": PersistentVolume, "StorageClass": StorageClass, "CSINode": CSINode,
                  "VolumeAttachment": VolumeAttachment, "Service": Service,
                  "ReplicationController": ReplicationController, "ReplicaSet": ReplicaSet,
                  "StatefulSet": StatefulSet}


def decode(data: bytes) -> Record | None:
    """One watch record as JSON bytes; None for kinds, groups and types the scheduler ignores.
    Raises `RecordError` (what and where) for an unusable record."""
    try:
        env = _typed.decode(data)
    except msgspec.DecodeError as err:
        try:
            value = _generic.decode(data)
        except msgspec.DecodeError as err2:
            raise RecordError(f"invalid JSON: {err2}") from None
        if not isinstance(value, dict):
            raise RecordError('expected a JSON object {"type": ..., "object": ...}') from None
        obj = value.get("object")
        if value.get("type") in ("BOOKMARK", "ERROR", "TIMER") or not isinstance(obj, dict):
            if value.get("type") in WATCH_TYPES:
                raise RecordError('field "object" must be an object') from None
            return None
        if obj.get("kind") not in _convert_types:
            return None
        return _from_parts(value.get("type"), obj, value.get("time"), str(err))
    return _check(env.type, env.object, env.time)


def from_object(event_type: str, obj: dict[str, Any], time: str | None = None) -> Record | None:
    """The same for an already parsed object."""
    if not isinstance(obj, dict) or obj.get("kind") not in _convert_types:
        return None
    return _from_parts(event_type, obj, time, "")


def _from_parts(event_type: object, obj: dict[str, Any], time: object, error: str) -> Record | None:
    kind = obj["kind"]
    api_version = obj.get("apiVersion", "")
    if api_version and api_version != API_VERSIONS[kind]:
        return None
    try:
        view = msgspec.convert(obj, _convert_types[kind], strict=False)
    except msgspec.ValidationError as err:
        raise RecordError(f"{kind} {str(err).replace('$', '$', 1)}") from None
    if error and not isinstance(event_type, str):
        raise RecordError('field "type" must be a string')
    return _check(str(event_type), view, time if isinstance(time, str) else None)


def _check(event_type: str, obj: SchedObject, time: str | None) -> Record | None:
    kind = type(obj).__name__
    if obj.api_version and obj.api_version != API_VERSIONS[kind]:
        return None
    if event_type not in WATCH_TYPES:
        if event_type in ("BOOKMARK", "ERROR"):
            return None
        raise RecordError(f"unknown watch event type {event_type!r} (expected ADDED, MODIFIED, DELETED or BOOKMARK)")
    if not obj.metadata.name:
        raise RecordError(f"{kind} without metadata.name")
    return Record(event_type, obj, time)
