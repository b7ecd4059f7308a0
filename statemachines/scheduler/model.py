"""The scheduler cache's facts: one immutable record per node, queue, PodGroup, pod and
priority class, computed once when its watch record is folded (the `Snapshot` a session
starts from is `statemachines.scheduler.snapshot`).

Facts are never mutated after construction (by convention; they are `__slots__` classes
for speed), so a snapshot is a set of shallow dict copies and a session keeps its own
mutable overlays (`statemachines.scheduler.state`). What Volcano derives per pod
(`pkg/scheduler/api/job_info.go` NewTaskInfo, `pod_info.go`, `helpers.go` getTaskStatus)
is derived here, once.
"""

from __future__ import annotations

from typing import Any

from statemachines.scheduler import objects as o
from statemachines.scheduler.resources import PODS, Res, from_resource_list, quantities_key

GROUP_NAME = "scheduling.k8s.io/group-name"
TASK_SPEC = "volcano.sh/task-spec"
TASK_PRIORITY = "volcano.sh/task-priority"
PREEMPTABLE = "volcano.sh/preemptable"
QUEUE_ALLOCATION_GATE = "scheduling.volcano.sh/queue-allocation-gate"
DEFAULT_MILLI_CPU = 100.0  # k8s scoring's non-zero defaults (pkg/scheduler/util/pod_resources.go)
DEFAULT_MEMORY = 200.0 * 1024 * 1024

# Task statuses (pkg/scheduler/api/types.go)
PENDING, ALLOCATED, PIPELINED, BINDING, BOUND, RUNNING, RELEASING, SUCCEEDED, FAILED, UNKNOWN = (
    "Pending",
    "Allocated",
    "Pipelined",
    "Binding",
    "Bound",
    "Running",
    "Releasing",
    "Succeeded",
    "Failed",
    "Unknown",
)
ALLOCATED_STATUS = frozenset({ALLOCATED, BINDING, BOUND, RUNNING})
SCHEDULED_STATUS = frozenset({RUNNING, BOUND, FAILED, SUCCEEDED})
PREEMPTABLE_STATUS = frozenset({BOUND, RUNNING})
COMPLETED_STATUS = frozenset({FAILED, SUCCEEDED})


def task_status(phase: str, node_name: str, deleting: bool) -> str:
    """`getTaskStatus`: the task status a pod record implies."""
    if phase == "Running":
        return RELEASING if deleting else RUNNING
    if phase == "Pending":
        if deleting:
            return RELEASING
        return BOUND if node_name else PENDING
    if phase == "Succeeded":
        return SUCCEEDED
    if phase == "Failed":
        return FAILED
    return UNKNOWN


def _parse_bool(value: str) -> bool | None:
    if value in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if value in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    return None


# The node lifecycle controller's taints for node conditions (TaintNodesByCondition, Kubernetes'
# pkg/controller/nodelifecycle/node_lifecycle_controller.go nodeConditionToTaintKeyStatusMap).
CONDITION_TAINTS = {
    ("Ready", "False"): "node.kubernetes.io/not-ready",
    ("Ready", "Unknown"): "node.kubernetes.io/unreachable",
    ("MemoryPressure", "True"): "node.kubernetes.io/memory-pressure",
    ("DiskPressure", "True"): "node.kubernetes.io/disk-pressure",
    ("NetworkUnavailable", "True"): "node.kubernetes.io/network-unavailable",
    ("PIDPressure", "True"): "node.kubernetes.io/pid-pressure",
}


def condition_taints(node: o.Node) -> tuple[o.Taint, ...]:
    """The NoSchedule taints a node's conditions imply, where the node does not carry them yet.

    Volcano's NodeInfo ignores node conditions and leaves them to taints (`pkg/scheduler/api/node_info.go`
    setNodeState); on a cluster the lifecycle controller adds these taints as soon as it sees the
    condition, so a snapshot caught in between is read as it will be a moment later."""
    have = {t.key for t in node.spec.taints or ()}
    out = []
    for c in node.status.conditions or ():
        key = CONDITION_TAINTS.get((c.type, c.status))
        if key is not None and key not in have:
            out.append(o.Taint(key=key, effect="NoSchedule"))
            have.add(key)
    return tuple(out)


class NodeFact:
    __slots__ = ("name", "uid", "alloc", "max_pods", "labels", "taints", "unschedulable", "creation", "version",
                 "images")

    def __init__(self, node: o.Node, version: int) -> None:
        meta = node.metadata
        self.name = meta.name
        self.uid = meta.uid
        self.alloc = from_resource_list(node.status.allocatable, f"Node {meta.name} status.allocatable")
        self.max_pods = int(self.alloc.sc.get(PODS, 0.0))
        self.labels = dict(meta.labels or {})
        self.taints = tuple(node.spec.taints or ()) + condition_taints(node)
        self.unschedulable = node.spec.unschedulable
        self.creation = meta.creation_timestamp or ""
        self.version = version  # the record seq that last changed it (static predicate cache key)
        # image name -> (size, nodes holding it when this node was folded), set by the cache (`images.ImageStates`)
        self.images: dict[str, tuple[int, int]] = {}

    def dump(self) -> dict[str, Any]:
        return {
            "allocatable": _res_dump(self.alloc),
            "labels": dict(sorted(self.labels.items())),
            "taints": [[t.key, t.value, t.effect] for t in self.taints],
            "unschedulable": self.unschedulable,
        }


class QueueFact:
    __slots__ = (
        "name",
        "uid",
        "resource_version",
        "weight",
        "capability",
        "guarantee",
        "deserved",
        "reclaimable",
        "parent",
        "priority",
        "state",
        "allocated",
        "creation",
    )

    def __init__(self, queue: o.Queue) -> None:
        meta, spec = queue.metadata, queue.spec
        where = f"Queue {meta.name} spec"
        self.name = meta.name
        self.uid = meta.uid
        self.resource_version = meta.resource_version
        self.weight = spec.weight
        self.capability = from_resource_list(spec.capability, f"{where}.capability") if spec.capability else None
        self.guarantee = from_resource_list(spec.guarantee.resource if spec.guarantee else None, f"{where}.guarantee")
        self.deserved = from_resource_list(spec.deserved, f"{where}.deserved") if spec.deserved else None
        self.reclaimable = True if spec.reclaimable is None else spec.reclaimable
        self.parent = spec.parent
        self.priority = spec.priority
        self.state = queue.status.state
        self.allocated = {k: str(v) for k, v in (queue.status.allocated or {}).items()}
        self.creation = meta.creation_timestamp or ""

    @classmethod
    def assumed(cls, name: str, weight: int, reclaimable: bool, parent: str) -> QueueFact:
        """A queue vcbus asked to create (CreateQueue) and has not seen yet."""
        return cls(o.Queue(metadata=o.Meta(name=name), spec=o.QueueSpec(weight=weight, reclaimable=reclaimable, parent=parent)))

    def with_status(self, state: str | None, allocated: dict[str, str] | None) -> QueueFact:
        clone = object.__new__(QueueFact)
        for slot in QueueFact.__slots__:
            setattr(clone, slot, getattr(self, slot))
        if state is not None:
            clone.state = state
        if allocated is not None:
            clone.allocated = dict(allocated)
        return clone

    def dump(self) -> dict[str, Any]:
        return {
            "weight": self.weight,
            "capability": _res_dump(self.capability) if self.capability else None,
            "guarantee": _res_dump(self.guarantee),
            "reclaimable": self.reclaimable,
            "parent": self.parent,
            "priority": self.priority,
            "state": self.state,
            "allocated": [list(i) for i in quantities_key(self.allocated)] if self.allocated else {},
        }


def _owner_job(meta: o.Meta) -> str:
    for ref in meta.owner_references or ():
        if ref.get("kind") == "Job" and str(ref.get("apiVersion", "")).startswith("batch.volcano.sh/") and ref.get("name"):
            return f"{meta.namespace}/{ref['name']}"
    return f"{meta.namespace}/{meta.name}"


class GroupFact:
    """A PodGroup: the job the scheduler sees (JobID = `<ns>/<podgroup>`)."""

    __slots__ = (
        "key",
        "namespace",
        "name",
        "uid",
        "resource_version",
        "min_member",
        "min_task_member",
        "min_resources",
        "min_resources_names",
        "queue",
        "priority_class",
        "phase",
        "conditions",
        "running",
        "succeeded",
        "failed",
        "owner",
        "creation",
    )

    def __init__(self, pg: o.PodGroup) -> None:
        meta, spec, status = pg.metadata, pg.spec, pg.status
        self.namespace = meta.namespace
        self.name = meta.name
        self.key = f"{meta.namespace}/{meta.name}"
        self.uid = meta.uid
        self.resource_version = meta.resource_version
        self.min_member = spec.min_member
        self.min_task_member = dict(spec.min_task_member or {})
        self.min_resources = (
            from_resource_list(spec.min_resources, f"PodGroup {self.key} spec.minResources")
            if spec.min_resources is not None
            else None
        )
        self.min_resources_names = tuple(spec.min_resources or ())
        self.queue = spec.queue
        self.priority_class = spec.priority_class_name
        self.phase = status.phase
        self.conditions = tuple(status.conditions or ())
        self.running = status.running
        self.succeeded = status.succeeded
        self.failed = status.failed
        self.owner = _owner_job(meta)
        self.creation = meta.creation_timestamp or ""

    def with_status(self, status: dict[str, Any]) -> GroupFact:
        """A copy carrying a status vcbus wrote (UpdatePodGroupStatus)."""
        clone = object.__new__(GroupFact)
        for slot in GroupFact.__slots__:
            setattr(clone, slot, getattr(self, slot))
        clone.phase = status.get("phase", "")
        clone.conditions = tuple(_condition(c) for c in status.get("conditions") or ())
        clone.running = int(status.get("running", 0) or 0)
        clone.succeeded = int(status.get("succeeded", 0) or 0)
        clone.failed = int(status.get("failed", 0) or 0)
        return clone

    def dump(self) -> dict[str, Any]:
        return {
            "minMember": self.min_member,
            "minTaskMember": dict(sorted(self.min_task_member.items())),
            "minResources": _res_dump(self.min_resources) if self.min_resources is not None else None,
            "queue": self.queue,
            "priorityClassName": self.priority_class,
            "phase": self.phase,
            "conditions": [condition_dump(c) for c in self.conditions],
            "running": self.running,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "owner": self.owner,
        }


def _condition(raw: dict[str, Any]) -> o.PodGroupCondition:
    return o.PodGroupCondition(
        type=str(raw.get("type", "")),
        status=str(raw.get("status", "")),
        transition_id=str(raw.get("transitionID", "")),
        last_transition_time=raw.get("lastTransitionTime"),
        reason=str(raw.get("reason", "")),
        message=str(raw.get("message", "")),
    )


def condition_dump(c: o.PodGroupCondition) -> dict[str, Any]:
    out: dict[str, Any] = {"type": c.type, "status": c.status}
    if c.transition_id:
        out["transitionID"] = c.transition_id
    if c.last_transition_time:
        out["lastTransitionTime"] = c.last_transition_time
    if c.reason:
        out["reason"] = c.reason
    if c.message:
        out["message"] = c.message
    return out


def _res_dump(res: Res) -> dict[str, float]:
    out = {"cpu": res.cpu, "memory": res.mem}
    out.update(sorted(res.sc.items()))
    return out
