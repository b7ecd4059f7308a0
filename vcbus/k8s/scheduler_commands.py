"""The scheduler's, queue controller's and garbage collector's commands, carried out on the cluster.

These are the cache side of Volcano's scheduler (`pkg/scheduler/cache/cache.go`:
Bind, Evict, taskUnschedulable, UpdatePodGroup, UpdateQueueStatus, the default
and root queues) plus the garbage collector's delete (`pkg/controllers/
garbagecollector/garbagecollector.go`). `SchedulerCommands` is a mixin of
`vcbus.k8s.actuator.Actuator` (it uses its `core` and `custom` clients); each
handler returns "applied", "done" (already so, or its object is gone) or
"dropped" (stale: applying it would be wrong), and is idempotent under
redelivery:

- BindPod posts a Binding (uid precondition: the apiserver refuses to bind a
  newer pod of the same name). A pod already bound to that node, gone, or
  being deleted is done; a pod bound to another node is refused and logged.
  The request is sent raw (`vcbus.k8s.rawcalls`): the `kubernetes` client would
  deserialise the apiserver's `Status` answer as a `V1Binding` and fail on its
  missing target.
- BindPod with `volumes` (static PVs the scheduler chose for the pod's unbound
  WaitForFirstConsumer claims) first writes each PV's `spec.claimRef` to its claim,
  as kube-scheduler's VolumeBinding PreBind does (`bindAPIUpdate`: the claim's
  reference and `pv.kubernetes.io/bound-by-controller`, an update at the PV's
  resourceVersion: here a merge patch carrying it), and leaves the PVC to the PV
  controller. A PV already claimed by that claim is done (a redelivery); a PV
  claimed by another claim, or gone, or a claim gone or re-created, and the pod is
  not bound ("dropped", logged): the next session places it again. Unlike
  kube-scheduler, the bind does not wait for the PV controller to bind the claim
  (kubelet waits for it before it mounts).
- EvictPod writes what Volcano's evictor writes (Ready=False reason `Evict`,
  DisruptionTarget=True reason `PreemptionByScheduler`) and deletes the pod
  with a uid precondition. Unlike upstream, whose evictor skips the delete
  when the conditions are already there, a redelivered EvictPod still deletes.
- UpdatePodCondition sets PodScheduled (and nominatedNodeName when given)
  only when they change; lastTransitionTime is the command's time when the
  status changes, else kept (`podutil.UpdatePodCondition`). A pod bound
  meanwhile is not marked unschedulable.
- UpdatePodGroupStatus JSON-patches the PodGroup object (its CRD has no
  status subresource): `/status` replaced whole, as Volcano's Update replaces
  it, with a `test` of the uid the session computed it from (`cmd.uid`).
- UpdateQueueStatus writes only the fields given, on the status subresource;
  `allocated` is replaced whole (a resource that drops out goes); a `test` of
  `cmd.uid` in the same patch.
- A status write computed for another incarnation than the object now under
  its name (uid differs: deleted and re-created meanwhile) is refused: counted
  (`stale`), logged, "dropped". Volcano's scheduler updates the object of its
  cache, and the API server refuses that update once the object is replaced.
- CreateQueue: AlreadyExists is done. DeleteJob: uid precondition, foreground
  propagation; NotFound (or another incarnation) is done; a DeleteJob without a
  uid is refused.

BindPod, EvictPod and UpdatePodCondition read the pod first (BindPod from the
watch cache when it has that incarnation, vcbus.k8s.watchcache) and act only on a
pod for a scheduler vcbus serves (`spec.schedulerName` in `scheduler_names`,
`volcano`): anything else is refused (vcbus.k8s.ownership). UpdatePodGroupStatus
reads the PodGroup first: one owned by a vcjob must be the command key's live
vcjob's, one of no vcjob must be the key's own PodGroup (`<ns>/<podgroup>`, as
the scheduler names it); the patch tests the uid it read (a PodGroup replaced
meanwhile is not written).
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import quote

from kubernetes import client
from kubernetes.client.rest import ApiException

from statemachines import outputs as o
from vcbus.k8s import rawcalls, watchcache
from vcbus.k8s.ownership import SCHEDULER_NAMES, Refused, check_object, require_own_key, require_schedulable
from vcbus.k8s.watchcache import WatchCache

log = logging.getLogger("vcbus.actuator")

PG_GROUP, PG_VERSION, PG_PLURAL = "scheduling.volcano.sh", "v1beta1", "podgroups"
QUEUE_PLURAL = "queues"
JOB_GROUP, JOB_VERSION, JOB_PLURAL = "batch.volcano.sh", "v1alpha1", "jobs"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
# PodGroupStatus (pkg/apis/scheduling/v1beta1/types.go): what UpdatePodGroupStatus replaces.
PODGROUP_STATUS_FIELDS = ("phase", "conditions", "running", "succeeded", "failed")
# QueueStatus counts of PodGroups by phase, written by the queue controller of an older vcbus (statemachines/outputs.py).
QUEUE_COUNTS = ("pending", "running", "inqueue", "unknown", "completed")
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"  # set by GetBindVolumeToClaim with the claimRef
CLAIM_ATTEMPTS = 3  # reads of a PV another writer keeps changing, before the conflict is raised


def _status(err: ApiException) -> int:
    return int(getattr(err, "status", 0) or 0)


def uid_test(uid: str) -> dict[str, str]:
    """The JSON-patch op that makes a patch apply only to the incarnation `uid` of its object."""
    return {"op": "test", "path": "/metadata/uid", "value": uid}


def _condition(pod: Any, kind: str) -> tuple[str, str, str] | None:
    """(status, reason, message) of the pod's condition `kind`, None if it has none; `pod` a client
    model or plain JSON (a dict: the watch cache's, or `rawcalls.read`'s)."""
    if isinstance(pod, dict):
        for c in (pod.get("status") or {}).get("conditions") or ():
            if c.get("type") == kind:
                return c.get("status") or "", c.get("reason") or "", c.get("message") or ""
        return None
    c = next((c for c in (pod.status.conditions if pod.status else None) or [] if c.type == kind), None)
    return None if c is None else (c.status, c.reason or "", c.message or "")


def _set_condition(pod: Any, kind: str, status: str, reason: str, message: str, time: str) -> dict | None:
    """The strategic-merge element for one pod condition, or None if it would change nothing.

    As `podutil.UpdatePodCondition`: lastTransitionTime moves only when the status does
    (an element without it keeps the old one).
    """
    old = _condition(pod, kind)
    if old == (status, reason, message):
        return None
    cond: dict[str, Any] = {"type": kind, "status": status, "reason": reason or None, "message": message or None}
    if (old is None or old[0] != status) and time:
        cond["lastTransitionTime"] = time
    return cond


class SchedulerCommands:
    """Handlers `_<Command>(namespace, name, cmd, index)`; see the module docstring."""

    api: client.ApiClient
    core: client.CoreV1Api
    custom: client.CustomObjectsApi
    scheduler_names: tuple[str, ...] = SCHEDULER_NAMES

    cache: WatchCache | None = None

    def _job(self, ns: str, name: str, *, cached: bool = False) -> dict | None:  # provided by Actuator
        raise NotImplementedError

    def _podgroup(self, ns: str, name: str, *, cached: bool = False) -> dict | None:  # provided by Actuator
        raise NotImplementedError

    def _stale(self, cmd: o.Output, kind: str, name: str, live_uid: str) -> str:  # provided by Actuator
        raise NotImplementedError

    def _pod(self, ns: str, name: str, uid: str = "") -> Any:
        """The pod, or None if it is gone (or `uid` names an incarnation that is gone)."""
        try:
            pod = self.core.read_namespaced_pod(name, ns)
        except ApiException as err:
            if _status(err) == 404:
                return None
            raise
        if uid and pod.metadata.uid != uid:
            return None
        return pod

    def _watched_pod(self, ns: str, name: str, uid: str) -> dict | None:
        """The pod as the watch cache has it (a dict), when it is the incarnation `uid`; else None."""
        pod = None if self.cache is None else self.cache.get(watchcache.PODS, ns, name)
        return pod if pod is not None and pod["metadata"].get("uid") == uid else None

    # ------------------------------------------------------------------ pods

    def _BindPod(self, ns: str, name: str, cmd: o.BindPod, index: int) -> str:
        pod: Any = self._watched_pod(ns, cmd.name, cmd.uid) if cmd.uid else None
        if pod is not None:
            uid = pod["metadata"]["uid"]
        else:  # not in the watch cache, or another incarnation there: the API server says
            pod = self._pod(ns, cmd.name, cmd.uid)
            if pod is None:
                return "done"  # gone: nothing to bind
            uid = pod.metadata.uid
        require_schedulable(pod, ns, self.scheduler_names)
        if cmd.volumes and not self._claim_volumes(ns, cmd):
            return "dropped"
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": cmd.name, "namespace": ns, "uid": uid},  # the pod checked
            "target": {"apiVersion": "v1", "kind": "Node", "name": cmd.node},
        }
        try:
            rawcalls.call(self.api, "POST", rawcalls.pod_path(ns, cmd.name) + "/binding", body=body)
            return "applied"
        except ApiException as err:
            failure = err
        pod = self._pod(ns, cmd.name, cmd.uid)
        if pod is None:
            return "done"  # gone: nothing to bind
        bound = pod.spec.node_name or ""
        if bound == cmd.node:
            return "done"  # bound already (a redelivery)
        if bound:
            log.warning("actuator: BindPod %s/%s to %s refused: the pod is bound to %s", ns, cmd.name, cmd.node, bound)
            return "dropped"
        if pod.metadata.deletion_timestamp:
            return "done"  # being deleted: it will never run
        raise failure

    def _claim_volumes(self, ns: str, cmd: o.BindPod) -> bool:
        """VolumeBinding's PreBind: each PV's claimRef written to its claim; False (logged) if one cannot be."""
        for binding in cmd.volumes:
            claim = rawcalls.read(self.api, f"/api/v1/namespaces/{quote(ns, safe='')}/persistentvolumeclaims/"
                                            f"{quote(binding.claim, safe='')}")
            claim_meta = (claim or {}).get("metadata") or {}
            if claim is None or (binding.claim_uid and claim_meta.get("uid") != binding.claim_uid):
                log.warning("actuator: BindPod %s/%s refused: its claim %s is gone", ns, cmd.name, binding.claim)
                return False
            held = self._claim_volume(ns, binding.volume, claim_meta)
            if held:
                log.warning("actuator: BindPod %s/%s refused: PersistentVolume %s for claim %s is %s",
                            ns, cmd.name, binding.volume, binding.claim, held)
                return False
        return True

    def _claim_volume(self, ns: str, volume: str, claim: dict) -> str:
        """Write the PV's claimRef to `claim` (its metadata) unless it has one; "" when the PV is the claim's,
        else why not. A PV written meanwhile (409 at its resourceVersion) is read again; after CLAIM_ATTEMPTS
        the conflict is raised (the command is retried)."""
        path = f"/api/v1/persistentvolumes/{quote(volume, safe='')}"
        name, uid = claim.get("name") or "", claim.get("uid") or ""
        for attempt in range(CLAIM_ATTEMPTS):
            pv = rawcalls.read(self.api, path)
            if pv is None:
                return "gone"
            ref = (pv.get("spec") or {}).get("claimRef")
            if ref is not None:
                mine = ref.get("namespace") == ns and ref.get("name") == name and ref.get("uid", "") in ("", uid)
                return "" if mine else f"claimed by {ref.get('namespace')}/{ref.get('name')}"
            body = {
                "metadata": {"resourceVersion": pv["metadata"].get("resourceVersion"),
                             "annotations": {BOUND_BY_CONTROLLER: "yes"}},
                "spec": {"claimRef": {"kind": "PersistentVolumeClaim", "apiVersion": "v1", "namespace": ns,
                                      "name": name, "uid": uid,
                                      "resourceVersion": claim.get("resourceVersion") or ""}},
            }
            try:
                rawcalls.call(self.api, "PATCH", path, body=body, content_type=MERGE_PATCH)
                return ""
            except ApiException as err:
                if _status(err) != 409 or attempt == CLAIM_ATTEMPTS - 1:
                    raise
        return ""  # not reached: the last attempt returns or raises

    def _EvictPod(self, ns: str, name: str, cmd: o.EvictPod, index: int) -> str:
        pod = self._pod(ns, cmd.name, cmd.uid)
        if pod is None or pod.metadata.deletion_timestamp:
            return "done"  # gone, or already going
        require_schedulable(pod, ns, self.scheduler_names)
        message = f"Pod is evicted, because of {cmd.reason}"
        scheduler = pod.spec.scheduler_name or "volcano"
        conditions = [
            c
            for c in (
                _set_condition(pod, "Ready", "False", "Evict", message, cmd.time),
                _set_condition(pod, "DisruptionTarget", "True", "PreemptionByScheduler",
                               f"{scheduler}: preempting to accommodate a higher priority pod", cmd.time),
            )
            if c is not None
        ]
        if conditions:
            try:
                self.core.patch_namespaced_pod_status(
                    cmd.name, ns, {"status": {"conditions": conditions}}, _content_type=STRATEGIC_PATCH
                )
            except ApiException as err:
                if _status(err) == 404:
                    return "done"
                raise
        options = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=pod.metadata.uid))
        try:
            self.core.delete_namespaced_pod(cmd.name, ns, body=options)
        except ApiException as err:
            if _status(err) in (404, 409):
                return "done"  # gone, or a newer pod of that name (uid precondition)
            raise
        return "applied"

    def _UpdatePodCondition(self, ns: str, name: str, cmd: o.UpdatePodCondition, index: int) -> str:
        # The pod as the watch cache has it (plain JSON, as BindPod reads it), else as the API server has
        # it; a cached pod that seems to need no write is read again (the cache may not show a write of
        # ours that this one undoes), so only the write itself is ever saved.
        pod: dict | None = self._watched_pod(ns, cmd.name, cmd.uid) if cmd.uid else None
        status = None if pod is None else self._condition_write(pod, ns, cmd)
        if not status:
            pod = rawcalls.read(self.api, rawcalls.pod_path(ns, cmd.name))
            if pod is None or (cmd.uid and pod["metadata"].get("uid") != cmd.uid):
                return "done"
            status = self._condition_write(pod, ns, cmd)
        if status is None:
            return "dropped"  # bound meanwhile: it is scheduled after all
        if not status:
            return "done"
        try:
            rawcalls.call(self.api, "PATCH", rawcalls.pod_path(ns, cmd.name) + "/status", body={"status": status},
                          content_type=STRATEGIC_PATCH)
        except ApiException as err:
            if _status(err) == 404:
                return "done"
            raise
        return "applied"

    def _condition_write(self, pod: dict, ns: str, cmd: o.UpdatePodCondition) -> dict[str, Any] | None:
        """The status patch `cmd` makes of `pod` ({}: nothing to change; None: the pod is bound and the
        condition says it is not scheduled)."""
        require_schedulable(pod, ns, self.scheduler_names)
        if (pod.get("spec") or {}).get("nodeName") and cmd.status != "True":
            return None
        status: dict[str, Any] = {}
        cond = _set_condition(pod, "PodScheduled", cmd.status, cmd.reason, cmd.message, cmd.time)
        if cond is not None:
            status["conditions"] = [cond]
        if cmd.nominated_node and ((pod.get("status") or {}).get("nominatedNodeName") or "") != cmd.nominated_node:
            status["nominatedNodeName"] = cmd.nominated_node
        return status

    # ------------------------------------------------------------------ PodGroups and Queues

    def _UpdatePodGroupStatus(self, ns: str, name: str, cmd: o.UpdatePodGroupStatus, index: int) -> str:
        # Whose PodGroup (vcbus.k8s.ownership): a vcjob's must be the key's live vcjob's; one of no
        # vcjob (a plain workload's) is named under its own key. Which incarnation: the one the
        # session computed the status from (`cmd.uid`), else the one read; the patch tests that uid,
        # so a PodGroup re-created between the read and the write is not written either.
        pg = self._podgroup(ns, cmd.name, cached=True)  # stale is safe: the patch tests the uid, a refusal reads again
        if pg is None:
            return "done"
        live_uid = pg["metadata"].get("uid", "")
        if cmd.uid and live_uid != cmd.uid:
            return self._stale(cmd, "PodGroup", f"{ns}/{cmd.name}", live_uid)
        if not check_object(pg, "PodGroup", ns, name, lambda: self._job(ns, name, cached=True),
                            lambda: require_own_key(pg, "PodGroup", ns, name)):
            return "dropped"  # a leftover of a vcjob that is gone
        status = {k: v for k, v in cmd.status.items() if k in PODGROUP_STATUS_FIELDS and v is not None}
        patch = [uid_test(live_uid), {"op": "add", "path": "/status", "value": status}]  # the status replaced whole
        try:  # the raw path (vcbus.k8s.rawcalls): one per session's PodGroup change, no models each way
            rawcalls.call(self.api, "PATCH", rawcalls.object_path(PG_GROUP, PG_VERSION, ns, PG_PLURAL, cmd.name),
                          body=patch, content_type=JSON_PATCH)
        except ApiException as err:
            if _status(err) == 404:
                return "done"
            if _status(err) == 422:  # the uid test failed: replaced since the read
                now = self._podgroup(ns, cmd.name)
                if now is None:
                    return "done"
                if now["metadata"].get("uid") != live_uid:
                    return self._stale(cmd, "PodGroup", f"{ns}/{cmd.name}", now["metadata"].get("uid", ""))
            raise
        return "applied"

    def _UpdateQueueStatus(self, ns: str, name: str, cmd: o.UpdateQueueStatus, index: int) -> str:
        fields: dict[str, Any] = {}
        if cmd.state is not None:
            fields["state"] = cmd.state
        if cmd.allocated is not None:
            fields["allocated"] = dict(cmd.allocated)
        for key, value in (cmd.counts or {}).items():
            if key not in QUEUE_COUNTS:  # retrying would not help: drop it, loudly
                log.error("actuator: UpdateQueueStatus %s dropped: counts.%s is not a queue count (%s)",
                          cmd.queue, key, ", ".join(QUEUE_COUNTS))
                return "dropped"
            fields[key] = int(value)
        if not fields:
            return "done"
        # JSON patch `add` replaces each field whole (a merge patch would merge `allocated`
        # per resource); it needs /status to exist, so a queue without one gets a merge patch.
        # The queue it was computed from (`cmd.uid`) is tested in the same request.
        tests = [uid_test(cmd.uid)] if cmd.uid else []
        ops = tests + [{"op": "add", "path": f"/status/{key}", "value": value} for key, value in fields.items()]
        try:
            self.custom.patch_cluster_custom_object_status(
                PG_GROUP, PG_VERSION, QUEUE_PLURAL, cmd.queue, ops, _content_type=JSON_PATCH
            )
            return "applied"
        except ApiException as err:
            if _status(err) == 404:
                return "done"
            if _status(err) != 422:  # 422: the uid test failed, no /status to add to, or an invalid value
                raise
        if cmd.uid:  # which of them: another queue of that name is not written
            try:
                live = self.custom.get_cluster_custom_object(PG_GROUP, PG_VERSION, QUEUE_PLURAL, cmd.queue)
            except ApiException as err:
                if _status(err) == 404:
                    return "done"
                raise
            live_uid = (live.get("metadata") or {}).get("uid", "")
            if live_uid != cmd.uid:
                return self._stale(cmd, "Queue", cmd.queue, live_uid)
        try:
            self.custom.patch_cluster_custom_object_status(
                PG_GROUP, PG_VERSION, QUEUE_PLURAL, cmd.queue, {"status": fields}, _content_type=MERGE_PATCH
            )
        except ApiException as err:
            if _status(err) == 404:
                return "done"
            raise
        return "applied"

    def _CreateQueue(self, ns: str, name: str, cmd: o.CreateQueue, index: int) -> str:
        spec: dict[str, Any] = {"weight": cmd.weight, "reclaimable": cmd.reclaimable}
        if cmd.parent:
            spec["parent"] = cmd.parent
        body = {"apiVersion": f"{PG_GROUP}/{PG_VERSION}", "kind": "Queue", "metadata": {"name": cmd.queue}, "spec": spec}
        try:
            self.custom.create_cluster_custom_object(PG_GROUP, PG_VERSION, QUEUE_PLURAL, body)
        except ApiException as err:
            if _status(err) == 409:
                return "done"
            raise
        return "applied"

    # ------------------------------------------------------------------ the vcjob (garbage collector)

    def _DeleteJob(self, ns: str, name: str, cmd: o.DeleteJob, index: int) -> str:
        if not cmd.uid:
            raise Refused(f"DeleteJob for {ns}/{name} carries no job uid")
        options = client.V1DeleteOptions(
            propagation_policy="Foreground",  # as Volcano's garbage collector (pkg/controllers/garbagecollector/garbagecollector.go)
            preconditions=client.V1Preconditions(uid=cmd.uid),
        )
        try:
            self.custom.delete_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, name, body=options)
        except ApiException as err:
            if _status(err) in (404, 409):
                return "done"  # gone, or a newer job of that name (uid precondition)
            raise
        return "applied"
