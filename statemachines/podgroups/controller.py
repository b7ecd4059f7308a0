"""Volcano's podgroup controller as a fold: pod and PodGroup records in, PodGroup commands out.

Volcano: `pkg/controllers/podgroup/pg_controller.go` (`addPod` queues a request for every pod
ADDED; `processNextReq` skips a pod whose `spec.schedulerName` is none of the controller's
`--scheduler-name`s, or that has a `scheduling.k8s.io/group-name` annotation) and
`pg_controller_handler.go` (`createNormalPodPGIfNotExist`: the PodGroup is created when the
lister does not have it, then `updatePodAnnotations` writes its name on the pod).

For each pod ADDED that passes those checks:

- `CreateWorkloadPodGroup` (statemachines/podgroups/manifest.py), unless the log has shown a
  PodGroup of that name, or this fold already asked for it and no DELETED came since (Volcano's
  lister lags its own create and issues it again, answered AlreadyExists: the same end);
- `AnnotatePodGroupName` for the pod.

Both are keyed `<namespace>/<podgroup>`, the key the scheduler gives a PodGroup no vcjob owns,
so the create and the pods' annotations are applied in that order (one lane per key). A pod
only ever changes when it is ADDED (Volcano registers no update handler for pods).

The owners (`getAnnotationsFromUpperRes`, a live Get of each ReplicaSet, StatefulSet, DaemonSet or
batch/v1 Job the pod names): the fold keeps the annotations of the latest record of each, and builds the
PodGroup with them (manifest.py). The watches of pods and of their owners are apart, so a pod can
come before its owner, which Volcano's Get would have found: once the log has shown an owner of
that kind, a pod whose controlling owner of that kind the log has not shown yet waits for it (its
ADDED, or its DELETED: Volcano's Get failing); deleted meanwhile, it is forgotten. A log with no owner of that kind (one recorded
before vcbus watched them) is Volcano's failed Get: no wait, no owner annotations.

No update when an owner's annotations change, as Volcano: its ReplicaSet and StatefulSet update
handlers (`addReplicaSet`, `addStatefulSet`) create or update the PodGroup only from a pod without
a `scheduling.k8s.io/group-name` annotation, and the pod handler has annotated every pod of the
PodGroup; a PodGroup is built once, from its first pod. Those handlers also delete the PodGroup
of a ReplicaSet or StatefulSet scaled to 0 replicas (a Deployment's old ReplicaSet after a rollout):
`DeleteWorkloadPodGroup`. Otherwise the PodGroup is deleted with its owner by Kubernetes' garbage
collector, through its ownerReferences.
"""

from __future__ import annotations

from typing import Any

from statemachines import outputs as o
from statemachines.model.objects import Pod, PodGroup
from statemachines.podgroups.manifest import (
    GROUP_NAME,
    PREFIX,
    build_podgroup,
    controller_reference,
    owner_annotations,
    podgroup_name,
)

SCHEDULER_NAMES = ("volcano",)  # Volcano's default --scheduler-name


class PodGroupController:
    """The decisions go to `host.out`, stamped with `host.seq` and `host.now` (the engine's)."""

    def __init__(self, host: Any, scheduler_names: tuple[str, ...] = SCHEDULER_NAMES) -> None:
        self.host = host
        self.scheduler_names = scheduler_names
        self.known: set[str] = set()  # "<ns>/<name>" of `podgroup-` PodGroups the log shows or we asked for
        # namespace -> (kind, name) -> annotations: the pods' owners the log shows
        self.owners: dict[str, dict[tuple[str, str], dict[str, str]]] = {}
        self.owner_kinds: set[str] = set()  # the owner kinds the log has shown at least once
        # (namespace, kind, name) of an owner not shown yet -> its pods waiting for it, in order
        self.waiting: dict[tuple[str, str, str], list[Pod]] = {}
        self.gone: set[tuple[str, str, str]] = set()  # owners the log has shown DELETED: none to wait for

    def owner(self, rtype: str, obj: Any) -> None:
        """A ReplicaSet, StatefulSet, DaemonSet or batch/v1 Job record: keep its annotations; release its
        waiting pods."""
        meta = obj.metadata
        kind = getattr(obj, "OWNER_KIND", obj.__class__.__name__)  # a BatchJob is the pods' "Job"
        self.owner_kinds.add(kind)
        in_ns = self.owners.setdefault(meta.namespace, {})
        if rtype == "DELETED":
            in_ns.pop((kind, meta.name), None)
            self.gone.add((meta.namespace, kind, meta.name))
        else:
            in_ns[(kind, meta.name)] = dict(meta.annotations or {})
            self.gone.discard((meta.namespace, kind, meta.name))
            spec = getattr(obj, "spec", None)
            if spec is not None and spec.replicas == 0 and meta.uid:
                self._scaled_to_zero(meta)
        for pod in self.waiting.pop((meta.namespace, kind, meta.name), ()):
            self.pod_added(pod)

    def _scaled_to_zero(self, meta: Any) -> None:
        """`addReplicaSet` / `addStatefulSet` with `spec.replicas == 0`: delete `podgroup-<uid>`. Volcano
        asks on every such event and ignores NotFound; vcbus asks while the log shows the PodGroup
        (or it was asked for), the same end with no call for an owner that has none."""
        name = PREFIX + meta.uid
        key = f"{meta.namespace}/{name}"
        if key in self.known:
            host = self.host
            host.out.append(o.DeleteWorkloadPodGroup(job=key, seq=host.seq, time=host.now, name=name, owner_uid=meta.uid))

    def pod_deleted(self, pod: Pod) -> None:
        """A pod deleted while it waits for its owner is forgotten (Volcano's queued request finds no pod)."""
        meta = pod.metadata
        ref = controller_reference(pod)
        if ref is None:
            return
        key = (meta.namespace, ref.kind, ref.name)
        pods = self.waiting.get(key)
        if pods:
            pods[:] = [p for p in pods if p.metadata.uid != meta.uid]
            if not pods:
                del self.waiting[key]

    def pod_added(self, pod: Pod) -> None:
        if pod.spec.scheduler_name not in self.scheduler_names:
            return
        meta = pod.metadata
        if (meta.annotations or {}).get(GROUP_NAME):
            return
        name = podgroup_name(pod)
        if not name:
            return  # no uid to name it by: not a pod the API server made
        ref = controller_reference(pod)
        owners = self.owners.get(meta.namespace, {})
        if (ref is not None and ref.kind in self.owner_kinds and (ref.kind, ref.name) not in owners
                and (meta.namespace, ref.kind, ref.name) not in self.gone):
            self.waiting.setdefault((meta.namespace, ref.kind, ref.name), []).append(pod)
            return  # its owner's record is still to come
        host = self.host
        key = f"{meta.namespace}/{name}"
        if key not in self.known:
            self.known.add(key)
            podgroup = build_podgroup(pod, name, owner_annotations(pod, owners))
            host.out.append(o.CreateWorkloadPodGroup(job=key, seq=host.seq, time=host.now, name=name, pod=meta.name,
                                                     pod_uid=meta.uid, podgroup=podgroup))
        host.out.append(o.AnnotatePodGroupName(job=key, seq=host.seq, time=host.now, name=meta.name, uid=meta.uid,
                                               podgroup=name))

    def podgroup(self, rtype: str, pg: PodGroup) -> None:
        meta = pg.metadata
        if not meta.name.startswith(PREFIX):
            return
        key = f"{meta.namespace}/{meta.name}"
        if rtype == "DELETED":
            self.known.discard(key)
        else:
            self.known.add(key)
