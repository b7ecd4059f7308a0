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

Not here (docs/fidelity.md): Volcano's ReplicaSet and StatefulSet handlers (a PodGroup updated
when its owner's pod template changes, deleted when the owner scales to 0) need those kinds,
which vcbus does not watch; the owner's annotations likewise (manifest.py). The PodGroup is
deleted with its owner by Kubernetes' garbage collector, through its ownerReferences.
"""

from __future__ import annotations

from typing import Any

from statemachines import outputs as o
from statemachines.model.objects import Pod, PodGroup
from statemachines.podgroups.manifest import GROUP_NAME, PREFIX, build_podgroup, podgroup_name

SCHEDULER_NAMES = ("volcano",)  # Volcano's default --scheduler-name


class PodGroupController:
    """The decisions go to `host.out`, stamped with `host.seq` and `host.now` (the engine's)."""

    def __init__(self, host: Any, scheduler_names: tuple[str, ...] = SCHEDULER_NAMES) -> None:
        self.host = host
        self.scheduler_names = scheduler_names
        self.known: set[str] = set()  # "<ns>/<name>" of `podgroup-` PodGroups the log shows or we asked for

    def pod_added(self, pod: Pod) -> None:
        if pod.spec.scheduler_name not in self.scheduler_names:
            return
        meta = pod.metadata
        if (meta.annotations or {}).get(GROUP_NAME):
            return
        name = podgroup_name(pod)
        if not name:
            return  # no uid to name it by: not a pod the API server made
        host = self.host
        key = f"{meta.namespace}/{name}"
        if key not in self.known:
            self.known.add(key)
            host.out.append(o.CreateWorkloadPodGroup(job=key, seq=host.seq, time=host.now, name=name, pod=meta.name,
                                                     pod_uid=meta.uid, podgroup=build_podgroup(pod, name)))
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
