"""The podgroup controller's commands (statemachines/podgroups/), carried out on the cluster.

`WorkloadPodGroups` is a mixin of `vcbus.k8s.actuator.Actuator` (it uses its `api` client and
the `_pod` read of `vcbus.k8s.scheduler_commands`). Both commands are keyed `<ns>/<podgroup>`
and act only for a pod that still exists (the command's uid) and is for a scheduler vcbus
serves (vcbus.k8s.ownership: anything else is refused):

- CreateWorkloadPodGroup posts the PodGroup manifest the fold built. It must be the key's
  PodGroup, in the key's namespace, and owned as Volcano owns it: by the pod, or by the pod's
  own controlling owner (whose uid names it). AlreadyExists is done; a pod that is gone
  drops it (Volcano's worker skips a pod its lister no longer has).
- DeleteWorkloadPodGroup deletes `podgroup-<owner uid>` of a ReplicaSet or StatefulSet scaled to 0:
  only when that owner is among its ownerReferences, with the uid read as a precondition;
  NotFound (or a PodGroup replaced meanwhile) is done.
- AnnotatePodGroupName writes `scheduling.k8s.io/group-name` on the pod, a strategic merge
  patch as Volcano's `updatePodAnnotations`, carrying the pod's uid (the API server refuses
  it, 422, for another pod of the same name: then done). A pod that has the annotation already, with whatever
  value, is done (Volcano logs a mismatch and leaves it); a pod that is gone is done.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client.rest import ApiException

from statemachines import outputs as o
from statemachines.podgroups.manifest import GROUP_NAME, PREFIX
from vcbus.k8s import rawcalls
from vcbus.k8s.ownership import Refused, require_schedulable

PG_GROUP, PG_VERSION, PG_PLURAL = "scheduling.volcano.sh", "v1beta1", "podgroups"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"


def _status(err: ApiException) -> int:
    return int(getattr(err, "status", 0) or 0)


def _owner_uids(pod: Any) -> tuple[set[str], str]:
    """The uids of the pod's ownerReferences, and the uid of its controlling one ("" if none)."""
    refs = pod.metadata.owner_references or []
    controller = next((r.uid for r in refs if r.controller), "")
    return {r.uid for r in refs}, controller


def require_pod_podgroup(manifest: dict, pod: Any, ns: str, key_name: str) -> None:
    """The manifest is the PodGroup Volcano's podgroup controller would make for `pod` under the key."""
    meta = manifest.get("metadata") or {}
    name = meta.get("name", "?")
    if manifest.get("kind") != "PodGroup" or name != key_name or meta.get("namespace", ns) != ns:
        raise Refused(f"CreateWorkloadPodGroup for {ns}/{key_name} carries {manifest.get('kind')} "
                      f"{meta.get('namespace', ns)}/{name}")
    owners, controller = _owner_uids(pod)
    expected = PREFIX + (controller or pod.metadata.uid)
    if name != expected:
        raise Refused(f"PodGroup {ns}/{name} is not pod {ns}/{pod.metadata.name}'s (that is {expected})")
    refs = meta.get("ownerReferences") or []
    allowed = owners if controller else {pod.metadata.uid}
    if not refs or any(r.get("uid") not in allowed for r in refs):
        raise Refused(f"PodGroup {ns}/{name} would be owned by {[r.get('uid') for r in refs]}, "
                      f"not by pod {ns}/{pod.metadata.name} or its owners")


class WorkloadPodGroups:
    """Handlers `_<Command>(namespace, name, cmd, index)`; see the module docstring."""

    api: Any
    scheduler_names: tuple[str, ...]

    def _pod(self, ns: str, name: str, uid: str = "") -> Any:  # provided by SchedulerCommands
        raise NotImplementedError

    def _CreateWorkloadPodGroup(self, ns: str, name: str, cmd: o.CreateWorkloadPodGroup, index: int) -> str:
        pod = self._pod(ns, cmd.pod, cmd.pod_uid)
        if pod is None:
            return "dropped"
        require_schedulable(pod, ns, self.scheduler_names)
        require_pod_podgroup(cmd.podgroup, pod, ns, name)
        try:
            rawcalls.call(self.api, "POST", rawcalls.object_path(PG_GROUP, PG_VERSION, ns, PG_PLURAL), body=cmd.podgroup)
        except ApiException as err:
            if _status(err) == 409:
                return "done"
            raise
        return "applied"

    def _DeleteWorkloadPodGroup(self, ns: str, name: str, cmd: o.DeleteWorkloadPodGroup, index: int) -> str:
        if name != cmd.name or name != PREFIX + cmd.owner_uid:
            raise Refused(f"DeleteWorkloadPodGroup for {ns}/{name} names {cmd.name} of owner {cmd.owner_uid}")
        path = rawcalls.object_path(PG_GROUP, PG_VERSION, ns, PG_PLURAL, name)
        pg = rawcalls.read(self.api, path)
        if pg is None:
            return "done"
        meta = pg.get("metadata") or {}
        if cmd.owner_uid not in {r.get("uid") for r in meta.get("ownerReferences") or []}:
            raise Refused(f"PodGroup {ns}/{name} is not owned by {cmd.owner_uid}")
        try:  # the uid read: a PodGroup of that name made since is not this one
            rawcalls.call(self.api, "DELETE", path, body={"preconditions": {"uid": meta.get("uid")}})
        except ApiException as err:
            if _status(err) in (404, 409):
                return "done"
            raise
        return "applied"

    def _AnnotatePodGroupName(self, ns: str, name: str, cmd: o.AnnotatePodGroupName, index: int) -> str:
        if cmd.podgroup != name:
            raise Refused(f"pod {ns}/{cmd.name}: PodGroup {cmd.podgroup} written under the key of {ns}/{name}")
        pod = self._pod(ns, cmd.name, cmd.uid)
        if pod is None:
            return "done"
        require_schedulable(pod, ns, self.scheduler_names)
        if (pod.metadata.annotations or {}).get(GROUP_NAME):
            return "done"
        patch = {"metadata": {"uid": pod.metadata.uid, "annotations": {GROUP_NAME: cmd.podgroup}}}
        try:
            rawcalls.call(self.api, "PATCH", rawcalls.pod_path(ns, cmd.name), body=patch, content_type=STRATEGIC_PATCH)
        except ApiException as err:
            if _status(err) == 404:
                return "done"
            # the uid precondition: the API server refuses to change a uid (422) when the pod of that
            # name is another one by now; anything else it refuses is an error
            if _status(err) == 422 and self._pod(ns, cmd.name, pod.metadata.uid) is None:
                return "done"
            raise
        return "applied"
