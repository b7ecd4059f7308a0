"""The scheduler projection: Volcano's scheduler cache as a fold of VCBUS_K8S.

`SchedulerCache` folds watch records of Nodes, Queues, PodGroups, Pods, PriorityClasses,
Namespaces (their labels, for InterPodAffinity's namespaceSelector), PVCs, PVs and StorageClasses
(the volume checks), CSINodes and VolumeAttachments (NodeVolumeLimits), and Services, ReplicationControllers, ReplicaSets and StatefulSets (their
selectors: system-default topology spreading) into immutable facts (`statemachines.scheduler.model`); `snapshot()` hands a session a
consistent cut (shallow copies), so folding can go on while a session runs.

The scheduler's own decisions are folded too (`apply_outputs`), the way Volcano's cache
assumes its binds before the API server confirms them (`pkg/scheduler/cache/cache.go`):

- BindPod: the pod is `Binding` on its node until a pod record shows `spec.nodeName`
  (then the pod is simply Bound, and a `PodBound` event is due) or the pod is gone. An
  assumption older than `BIND_TIMEOUT` seconds of record time (the bind evidently failed)
  is dropped, the way Volcano resyncs a task whose bind failed.
- BindPod's `volumes` (static PVs for its unbound WaitForFirstConsumer claims): each PV is
  assumed claimed by its claim until a PV record shows a claimRef (or the PV is gone); the bind
  assumption ends at once if that claimRef is another claim's (the actuator refuses the bind, so
  the pod is Pending again for the next session), and the PVs are freed with a bind that expires.
- EvictPod: the pod is `Releasing` until a record shows it terminating or gone.
- UpdatePodGroupStatus / UpdateQueueStatus / CreateQueue: the object as written, until its
  next record; a status computed for another incarnation (its `uid`) is not assumed on the
  object now under that name (the actuator does not write it either).
- RecordEvent / UpdatePodCondition: remembered per object and channel, so the next
  session repeats nothing it already said (Volcano re-emits every second and relies on
  Kubernetes' event aggregation).

`state()` is the cluster view (what records imply, plus live assumptions); it leaves out
the emission memory, so "records only" and "outputs, then the records that confirm them"
give the same state.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from typing import Any

from statemachines import outputs as out
from statemachines.model import timefmt
from statemachines.model.records import RecordError
from statemachines.scheduler import objects as so
from statemachines.scheduler.emitted import forget, remember
from statemachines.scheduler.images import ImageStates
from statemachines.scheduler.model import (
    BINDING,
    RELEASING,
    GroupFact,
    NodeFact,
    QueueFact,
)
from statemachines.scheduler.snapshot import Snapshot
from statemachines.scheduler.tasks import TaskFact
from statemachines.scheduler.volumelimits import limits
from statemachines.scheduler.volumes import ClaimFact, VolumeFact
from statemachines.scheduler.workloads import workload_fact, workload_key


def _fields(fact) -> object:
    """A fact's value, to compare (ClaimFact and VolumeFact hold slots, the others are plain values)."""
    slots = getattr(type(fact), "__slots__", None)
    return tuple(getattr(fact, name) for name in slots) if slots else fact


def _dump(fact) -> dict[str, Any]:
    """A slotted fact (ClaimFact, VolumeFact) as JSON-able data (sets sorted)."""
    out: dict[str, Any] = {}
    for name in type(fact).__slots__:
        value = getattr(fact, name)
        if name == "topologies":
            value = [[key, sorted(zones)] for key, zones in value]
        elif isinstance(value, Fraction):  # a storage size, exactly
            value = str(value)
        elif isinstance(value, frozenset):
            value = sorted(value)
        out[name] = value
    return out


BIND_TIMEOUT = 120  # seconds of record time before an unconfirmed bind is forgotten
DEFAULT_SCHEDULER_NAMES = ("volcano",)


class SchedulerCache:
    """Fold of the watch log into the scheduler's view; see the module docstring."""

    def __init__(self, *, scheduler_names: Iterable[str] = DEFAULT_SCHEDULER_NAMES) -> None:
        self.scheduler_names = frozenset(scheduler_names)
        self.position = 0
        self.time = ""
        self.nodes: dict[str, NodeFact] = {}
        self.queues: dict[str, QueueFact] = {}
        self.groups: dict[str, GroupFact] = {}
        self.tasks: dict[str, TaskFact] = {}
        self.classes: dict[str, tuple[int, bool]] = {}
        self.namespaces: dict[str, dict[str, str]] = {}  # name -> labels
        self.images = ImageStates()  # the nodes' status.images, for ImageLocality
        self.claims: dict[str, ClaimFact] = {}  # PVCs, PVs and StorageClasses: the volume checks
        self.volumes: dict[str, VolumeFact] = {}
        self.storage_classes: dict[str, tuple[str | None, str]] = {}  # name -> (volumeBindingMode, provisioner)
        self._claimed: dict[str, tuple[tuple[str, str, str], str]] = {}  # PV -> (claimRef, pod key) assumed
        self.csinodes: dict[str, dict[str, int]] = {}  # CSINodes: node -> volume limit per driver (NodeVolumeLimits)
        self.attachments: dict[str, tuple[str, str, str]] = {}  # VolumeAttachments: name -> (node, PV, attacher)
        self.workloads: dict[str, tuple[str, str, object]] = {}  # Services, RCs, RSs, StatefulSets: their selectors
        self.revision = 0  # changes to the namespaces, volume facts and workloads (`_put`)
        self._observed: dict[str, TaskFact] = {}  # pods as their last record shows them
        self._binds: dict[str, tuple[str, str, str]] = {}  # pod key -> (uid, node, time) assumed Binding
        self._evicts: dict[str, str] = {}  # pod key -> uid assumed Releasing
        self.emitted: dict[str, tuple] = {}
        self.bound: dict[str, str] = {}  # pod key -> node: bound by vcbus, seen on the node, PodBound due

    # ------------------------------------------------------------------ records

    def apply(self, seq: int, data: bytes) -> None:
        """Fold one watch record (JSON bytes); raise RecordError (and change nothing) if unusable."""
        record = so.decode(data)
        self._fold(seq, record)

    def apply_object(self, event_type: str, obj: dict[str, Any], *, seq: int | None = None, time: str | None = None) -> None:
        """Fold one already parsed object (`seq` defaults to position + 1)."""
        record = so.from_object(event_type, obj, time)
        self._fold(self.position + 1 if seq is None else seq, record)

    def _fold(self, seq: int, record: so.Record | None) -> None:
        if record is not None:
            when = self.time
            if record.time:
                try:
                    when = timefmt.normalize(record.time)
                except ValueError:  # not a time: treated as absent (the record is still folded)
                    when = self.time
            obj = record.object
            deleted = record.type == "DELETED"
            try:
                if isinstance(obj, so.Pod):
                    self._pod(obj, deleted)
                elif isinstance(obj, so.Node):
                    self._node(obj, deleted, seq)
                elif isinstance(obj, so.PodGroup):
                    self._group(obj, deleted)
                elif isinstance(obj, so.Queue):
                    self._queue(obj, deleted)
                elif isinstance(obj, so.PriorityClass):
                    if deleted:
                        self.classes.pop(obj.metadata.name, None)
                    else:
                        self.classes[obj.metadata.name] = (obj.value, obj.global_default)
                elif isinstance(obj, (so.PersistentVolumeClaim, so.PersistentVolume, so.StorageClass)):
                    self._volume(obj, deleted)
                elif isinstance(obj, so.CSINode):
                    self._put(self.csinodes, obj.metadata.name, None if deleted else limits(obj))
                elif isinstance(obj, so.VolumeAttachment):
                    spec = obj.spec
                    fact = (spec.node_name, spec.source.persistent_volume_name or "", spec.attacher)
                    self._put(self.attachments, obj.metadata.name, None if deleted else fact)
                elif isinstance(obj, so.WORKLOAD_KINDS):
                    self._put(self.workloads, workload_key(obj), None if deleted else workload_fact(obj))
                elif isinstance(obj, so.Namespace):
                    self._put(self.namespaces, obj.metadata.name, None if deleted else dict(obj.metadata.labels or {}))
            except ValueError as err:  # a quantity that does not parse
                raise RecordError(str(err)) from None
            self.time = when
        self.position = max(self.position, seq)
        self._expire_binds()

    def _node(self, node: so.Node, deleted: bool, seq: int) -> None:
        name = node.metadata.name
        if deleted:
            self.images.remove(name)
            self.nodes.pop(name, None)
        else:
            fact = NodeFact(node, seq)  # raises for a bad quantity before anything changed
            self.images.remove(name)
            fact.images = self.images.add(node)
            self.nodes[name] = fact

    def _volume(self, obj, deleted: bool) -> None:
        meta = obj.metadata
        if isinstance(obj, so.PersistentVolumeClaim):
            self._put(self.claims, f"{meta.namespace}/{meta.name}", None if deleted else ClaimFact(obj))
        elif isinstance(obj, so.PersistentVolume):
            fact = None if deleted else VolumeFact(obj)
            self._put(self.volumes, meta.name, fact)
            claimed = self._claimed.get(meta.name)
            if claimed is not None and (fact is None or fact.claim_ref is not None):
                del self._claimed[meta.name]  # the record says who holds it now
                ref, pod = claimed
                held = fact.claim_ref if fact is not None else None
                if held is not None and not (held[:2] == ref[:2] and held[2] in ("", ref[2])):
                    self._drop_bind(pod)  # another claim's: the actuator does not bind the pod
        else:
            self._put(self.storage_classes, meta.name, None if deleted else (obj.volume_binding_mode, obj.provisioner))

    def _put(self, facts: dict, key: str, fact) -> None:
        """Set (None: remove) one fact of the kinds a session reads beside nodes, queues, PodGroups and
        pods; `revision` counts the changes, so the scheduler service's fingerprint sees them."""
        old = facts.get(key)
        if fact is None:
            if key in facts:
                del facts[key]
                self.revision += 1
            return
        if old is None or _fields(old) != _fields(fact):
            self.revision += 1
        facts[key] = fact

    def _queue(self, queue: so.Queue, deleted: bool) -> None:
        name = queue.metadata.name
        fact = None if deleted else QueueFact(queue)
        if fact is None:
            self.queues.pop(name, None)
        else:
            self.queues[name] = fact

    def _group(self, pg: so.PodGroup, deleted: bool) -> None:
        key = f"{pg.metadata.namespace}/{pg.metadata.name}"
        if deleted:
            self.groups.pop(key, None)
            forget(self.emitted, "PodGroup", key)
        else:
            self.groups[key] = GroupFact(pg)

    def _pod(self, pod: so.Pod, deleted: bool) -> None:
        meta = pod.metadata
        key = f"{meta.namespace}/{meta.name}"
        responsible = pod.spec.scheduler_name in self.scheduler_names or bool(pod.spec.node_name)
        if deleted or not responsible:
            self._observed.pop(key, None)
            self.tasks.pop(key, None)
            if self._binds.pop(key, None) is not None:
                self._unclaim(key)
            self._evicts.pop(key, None)
            self.bound.pop(key, None)
            forget(self.emitted, "Pod", key)
            return
        fact = TaskFact(pod)
        self._observed[key] = fact
        bind = self._binds.get(key)
        if bind is not None and (bind[0] != fact.uid or fact.node or fact.status != "Pending"):
            del self._binds[key]
            if bind[0] == fact.uid and fact.node:
                self.bound[key] = fact.node
            else:
                self._unclaim(key)
        evict = self._evicts.get(key)
        if evict is not None and (evict != fact.uid or fact.status not in ("Pending", "Bound", "Running")):
            del self._evicts[key]
        self.tasks[key] = self._assumed(key, fact)

    def _assumed(self, key: str, fact: TaskFact) -> TaskFact:
        if key in self._evicts:
            return fact.with_state(RELEASING, fact.node)
        bind = self._binds.get(key)
        if bind is not None:
            return fact.with_state(BINDING, bind[1])
        return fact

    def _expire_binds(self) -> None:
        """Forget binds older than BIND_TIMEOUT of record time (oldest first: binds are assumed in
        time order, so this stops at the first one still young)."""
        if not self._binds or not self.time:
            return
        now = timefmt.parse(self.time)
        expired = []
        for key, (_, _, when) in self._binds.items():
            if not when or now - timefmt.parse(when) <= BIND_TIMEOUT:
                break
            expired.append(key)
        for key in expired:
            self._drop_bind(key)

    def _drop_bind(self, key: str) -> None:
        """The assumed bind of pod `key` will not happen: the pod is Pending again, its claims' PVs free."""
        if self._binds.pop(key, None) is None:
            return
        self._unclaim(key)
        observed = self._observed.get(key)
        if observed is not None:
            self.tasks[key] = self._assumed(key, observed)

    def _unclaim(self, key: str) -> None:
        for name in [name for name, (_, pod) in self._claimed.items() if pod == key]:
            del self._claimed[name]

    # ------------------------------------------------------------------ own decisions

    def apply_outputs(self, outputs: Iterable[out.Output]) -> None:
        """Fold the scheduler's own outputs (see the module docstring)."""
        for o in outputs:
            ns = o.job.split("/", 1)[0]
            if isinstance(o, out.BindPod):
                key = f"{ns}/{o.name}"
                observed = self._observed.get(key)
                if observed is None or (o.uid and observed.uid != o.uid) or observed.node:
                    continue
                self._binds.pop(key, None)  # re-inserted at the end: the dict stays in time order
                self._binds[key] = (observed.uid, o.node, o.time or self.time)
                self.tasks[key] = self._assumed(key, observed)
                for binding in o.volumes:  # the PVs the actuator claims before the bind (VolumeBinding's PreBind)
                    pv = self.volumes.get(binding.volume)
                    if pv is not None and pv.claim_ref is None:
                        self._claimed[binding.volume] = ((ns, binding.claim, binding.claim_uid), key)
            elif isinstance(o, out.EvictPod):
                key = f"{ns}/{o.name}"
                observed = self._observed.get(key)
                if observed is None or (o.uid and observed.uid != o.uid):
                    continue
                self._evicts[key] = observed.uid
                self.tasks[key] = self._assumed(key, observed)
            elif isinstance(o, out.UpdatePodGroupStatus):
                key = f"{ns}/{o.name}"
                group = self.groups.get(key)
                if group is not None and not (o.uid and group.uid != o.uid):  # not onto a re-created PodGroup
                    self.groups[key] = group.with_status(o.status)
            elif isinstance(o, out.UpdateQueueStatus):
                queue = self.queues.get(o.queue)
                if queue is not None and not (o.uid and queue.uid and queue.uid != o.uid):
                    self.queues[o.queue] = queue.with_status(o.state, o.allocated)
            elif isinstance(o, out.CreateQueue):
                if o.queue not in self.queues:
                    self.queues[o.queue] = QueueFact.assumed(o.queue, o.weight, o.reclaimable, o.parent)
            elif isinstance(o, (out.RecordEvent, out.UpdatePodCondition)):
                remember(self.emitted, o)
            elif isinstance(o, out.PodBound):
                self.bound.pop(f"{ns}/{o.pod}", None)

    # ------------------------------------------------------------------ reading

    def snapshot(self) -> Snapshot:
        """A consistent cut for one session (shallow copies of immutable facts)."""
        default = 0
        for name in sorted(self.classes):
            value, global_default = self.classes[name]
            if global_default:
                default = value
                break
        return Snapshot(
            nodes=dict(self.nodes),
            queues=dict(self.queues),
            groups=dict(self.groups),
            tasks=dict(self.tasks),
            priority_classes={name: value for name, (value, _) in self.classes.items()},
            default_priority=default,
            namespaces=dict(self.namespaces),
            claims=dict(self.claims),
            volumes=self._volumes(),
            storage_classes={name: mode for name, (mode, _) in self.storage_classes.items()},
            provisioners={name: provisioner for name, (_, provisioner) in self.storage_classes.items()},
            csinodes=dict(self.csinodes),
            attachments=dict(self.attachments),
            workloads=dict(self.workloads),
            emitted=dict(self.emitted),
            bound=dict(self.bound),
            time=self.time,
            seq=self.position,
        )

    def _volumes(self) -> dict[str, VolumeFact]:
        """The PVs, with the claims the scheduler's binds assumed on them."""
        volumes = dict(self.volumes)
        for name, (ref, _) in self._claimed.items():
            if name in volumes:
                volumes[name] = volumes[name].claimed(ref)
        return volumes

    def state(self) -> dict[str, Any]:
        """Canonical JSON-able dump of the cluster view (sorted), for rebuilt == live checks."""
        return {
            "nodes": {k: self.nodes[k].dump() for k in sorted(self.nodes)},
            "queues": {k: self.queues[k].dump() for k in sorted(self.queues)},
            "podgroups": {k: self.groups[k].dump() for k in sorted(self.groups)},
            "pods": {k: self.tasks[k].dump() for k in sorted(self.tasks)},
            "priorityClasses": {k: list(self.classes[k]) for k in sorted(self.classes)},
            "namespaces": {k: dict(sorted(self.namespaces[k].items())) for k in sorted(self.namespaces)},
            "claims": {k: _dump(self.claims[k]) for k in sorted(self.claims)},
            "volumes": {k: _dump(v) for k, v in sorted(self._volumes().items())},
            "storageClasses": {k: self.storage_classes[k][0] for k in sorted(self.storage_classes)},
            "csinodes": {k: dict(sorted(self.csinodes[k].items())) for k in sorted(self.csinodes)},
            "volumeAttachments": {k: list(self.attachments[k]) for k in sorted(self.attachments)},
            "workloads": {k: list(self.workloads[k]) for k in sorted(self.workloads)},
        }
