"""The `Snapshot` a scheduling session starts from: the cache's facts at a cut.

Its own module, above both the node/queue/PodGroup facts (`model.py`) and the
pod facts (`tasks.py`, which build on `model.py`), so neither imports the other
back.
"""

from __future__ import annotations

from statemachines.scheduler.model import GroupFact, NodeFact, QueueFact
from statemachines.scheduler.tasks import TaskFact


class Snapshot:
    """What a session starts from: the cache's facts at a cut (shallow copies; facts are immutable).

    `namespaces` holds each Namespace's labels (InterPodAffinity's namespaceSelector).
    `emitted` is the scheduler's memory of what it last told the cluster per object
    (events, pod conditions), so a session repeats nothing; `bound` lists pods vcbus bound
    that the log now shows on their node (PodBound is due)."""

    __slots__ = ("nodes", "queues", "groups", "tasks", "priority_classes", "default_priority", "namespaces", "emitted",
                 "bound", "time", "seq", "claims", "volumes", "storage_classes", "provisioners", "csinodes",
                 "attachments", "workloads")

    def __init__(
        self,
        *,
        nodes: dict[str, NodeFact],
        queues: dict[str, QueueFact],
        groups: dict[str, GroupFact],
        tasks: dict[str, TaskFact],
        priority_classes: dict[str, int],
        default_priority: int = 0,
        namespaces: dict[str, dict[str, str]] | None = None,
        emitted: dict[str, tuple] | None = None,
        bound: dict[str, str] | None = None,
        time: str = "",
        seq: int = 0,
        claims: dict | None = None,
        volumes: dict | None = None,
        storage_classes: dict[str, str | None] | None = None,
        provisioners: dict[str, str] | None = None,
        csinodes: dict[str, dict[str, int]] | None = None,
        attachments: dict[str, tuple[str, str, str]] | None = None,
        workloads: dict[str, tuple[str, str, object]] | None = None,
    ) -> None:
        self.nodes = nodes
        self.queues = queues
        self.groups = groups
        self.tasks = tasks
        self.priority_classes = priority_classes
        self.default_priority = default_priority
        self.namespaces = namespaces if namespaces is not None else {}  # name -> labels
        self.emitted = emitted if emitted is not None else {}
        self.bound = bound if bound is not None else {}
        self.time = time
        self.seq = seq
        # the volume checks' facts (statemachines.scheduler.volumes): PVCs by "<namespace>/<name>",
        # PVs by name, StorageClasses' volumeBindingMode and provisioner by name
        self.claims = claims if claims is not None else {}
        self.volumes = volumes if volumes is not None else {}
        self.storage_classes = storage_classes if storage_classes is not None else {}
        self.provisioners = provisioners if provisioners is not None else {}
        # NodeVolumeLimits' (statemachines.scheduler.volumelimits): per node its CSINode's volume limits by
        # driver; the VolumeAttachments by name, as (node, PV, attacher)
        self.csinodes = csinodes if csinodes is not None else {}
        self.attachments = attachments if attachments is not None else {}
        # the Services, ReplicationControllers, ReplicaSets and StatefulSets by "<Kind>/<namespace>/<name>",
        # as (kind, namespace, selector): system-default topology spreading (statemachines.scheduler.workloads)
        self.workloads = workloads if workloads is not None else {}
