"""The actuator: carries the state machines' commands out on a Kubernetes API server.

Every command is applied idempotently, because the bus may deliver it again
after a crash between apply and ack:

- AlreadyExists on create and NotFound on delete count as done;
- pods are deleted with a uid precondition, so a redelivered DeletePod never
  hits the next incarnation of the same pod name;
- a CreatePod stamped with a job version older than the vcjob's current
  `status.version` is dropped (its incarnation was killed meanwhile);
- the status is replaced as a whole (JSON patch on the status subresource) and
  an older status version never overwrites a newer one;
- every status write (vcjob, PodGroup, Queue) names the uid of the object it
  was computed from: an object of that name with another uid (deleted and
  re-created meanwhile) is not written (counted in `stale`, result "dropped");
- conflicts are retried.

A status write also refreshes the status-mounter ConfigMap of the job (the
files a pod reads under its mountPoint stay live).

Kubernetes Events get a name derived from the command's causation (job, seq,
index), so a redelivered RecordEvent creates nothing new
(vcbus.k8s.event_recording). Plugin hooks ask the pure plugin code
(statemachines.plugins) for the objects to create or delete. The scheduler's,
queue controller's and garbage collector's commands (BindPod, EvictPod,
UpdatePodCondition, UpdatePodGroupStatus, UpdateQueueStatus, CreateQueue,
DeleteJob) are in vcbus.k8s.scheduler_commands, the podgroup controller's
(CreateWorkloadPodGroup, AnnotatePodGroupName) in vcbus.k8s.workload_podgroups, the cronjob
controller's (CreateCronJobRun, DeleteCronJobRun, UpdateCronJobStatus) in vcbus.k8s.cronjob_commands, the
jobflow and jobtemplate controllers' (CreateJobFlowJob, DeleteJobFlowJob, UpdateJobFlowStatus,
UpdateJobTemplateStatus) in vcbus.k8s.jobflow_commands. `HANDLERS` is the one table of which method
carries out which command type.

Job keys `_/<name>` are cluster-scoped (queues, the scheduler): only the
commands about cluster-scoped objects (Queue status, CreateQueue, an event on
a Queue) apply there; any other command with such a key is dropped and logged.

Ownership (vcbus.k8s.ownership): a command acts only on objects of the vcjob
its key names, checked against the live vcjob's uid, and the scheduler's only
on pods for the `volcano` scheduler. Anything else is refused: logged,
counted (`refused`), returned as "refused", never executed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from statemachines import outputs as o
from statemachines import plugins as plugin_hooks
from statemachines.plugins.ssh import fill_ssh_keys
from vcbus.bus.subjects import CLUSTER_SCOPE
from vcbus.k8s import rawcalls, watchcache
from vcbus.k8s.event_recording import COMPONENT, EventRecording
from vcbus.k8s.ownership import (
    MANAGED_BY,
    Refused,
    job_owners,
    managed_patch,
    managed_test,
    mark_managed,
    owner_tests,
    require_manifest,
    require_owned,
)
from vcbus.k8s.scheduler_commands import SchedulerCommands
from vcbus.k8s.watchcache import WatchCache
from vcbus.k8s.workload_podgroups import WorkloadPodGroups
from vcbus.k8s.cronjob_commands import CronJobCommands
from vcbus.k8s.jobflow_commands import JobFlowCommands
from vcbus.sshkeys import generate_ssh_keypair

log = logging.getLogger("vcbus.actuator")

JOB_GROUP, JOB_VERSION, JOB_PLURAL = "batch.volcano.sh", "v1alpha1", "jobs"
PG_GROUP, PG_VERSION, PG_PLURAL = "scheduling.volcano.sh", "v1beta1", "podgroups"
CMD_GROUP, CMD_VERSION, CMD_PLURAL = "bus.volcano.sh", "v1alpha1", "commands"
OUT_OF_SYNC_PATCH = [
    {"op": "add", "path": "/metadata/annotations/volcano.sh~1controller-out-of-sync", "value": "true"}
]
__all__ = ["Actuator", "COMPONENT"]
# What may carry a cluster-scoped job key `_/<name>`.
CLUSTER_COMMANDS = (o.UpdateQueueStatus, o.CreateQueue, o.RecordEvent)


def _status(err: ApiException) -> int:
    return int(getattr(err, "status", 0) or 0)


class Actuator(SchedulerCommands, WorkloadPodGroups, CronJobCommands, JobFlowCommands, EventRecording):
    """Applies commands with the official `kubernetes` client (synchronous calls)."""

    def __init__(self, api_client: client.ApiClient, cache: WatchCache | None = None) -> None:
        self.api = api_client
        self.cache = cache  # the bridge's watches in this process, read before the API server (vcbus.k8s.watchcache)
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.applied = 0
        self.dropped = 0
        self.refused = 0
        self.stale = 0  # status writes refused: computed for another incarnation of the object (its uid)

    # ------------------------------------------------------------------ entry point

    def apply(self, cmd: o.Output, *, index: int = 0, msg_id: str = "") -> str:
        """Carry `cmd` out; returns "applied", "done" (already so), "dropped" (stale) or "refused"
        (it would act on something vcbus does not control: vcbus.k8s.ownership).

        `index` and `msg_id` (the command's `Nats-Msg-Id`) name Kubernetes Events.
        """
        try:
            return self._apply(cmd, index=index, msg_id=msg_id)
        except Refused as err:
            self.refused += 1
            log.warning("actuator: %s for %s refused (%s): %s", type(cmd).__name__, cmd.job, msg_id or "-", err)
            return "refused"

    def _apply(self, cmd: o.Output, *, index: int, msg_id: str) -> str:
        ns, name = cmd.job.split("/", 1)
        handler = HANDLERS.get(type(cmd))
        if handler is None or (ns == CLUSTER_SCOPE and not isinstance(cmd, CLUSTER_COMMANDS)):
            log.warning("actuator: %s for %s dropped: no such command for that key", type(cmd).__name__, cmd.job)
            self.dropped += 1
            return "dropped"
        if isinstance(cmd, o.RecordEvent):
            result = self._RecordEvent(ns, name, cmd, index, msg_id)
        else:
            result = handler(self, ns, name, cmd, index)
        if result == "dropped":
            self.dropped += 1
        else:
            self.applied += 1
        return result

    # ------------------------------------------------------------------ helpers

    def _job(self, ns: str, name: str, *, cached: bool = False) -> dict | None:
        """The vcjob, None if not found; `cached`: the watch cache's when it has it (vcbus.k8s.watchcache)."""
        if cached and self.cache is not None and (job := self.cache.get(watchcache.JOBS, ns, name)) is not None:
            return job
        return rawcalls.read(self.api, rawcalls.object_path(JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, name))

    def _deletable(self, obj: Any, kind: str, ns: str, name: str) -> None:
        """`require_owned(..., gone_ok=True)` for a delete, reading the vcjob only when it can matter.

        For a delete an ownerReference naming the job is enough whatever the live job is (vcbus.k8s.ownership),
        so the usual case needs no read of the vcjob: one API call less before the DELETE.
        """
        if any(owner == name for owner, _ in job_owners(obj)):
            return
        require_owned(obj, kind, ns, name, self._job(ns, name), gone_ok=True)  # refused: it says why

    def _stale(self, cmd: o.Output, kind: str, name: str, live_uid: str) -> str:
        """A status write computed for an object that is not the one under its name now: refused, counted."""
        self.stale += 1
        log.info("actuator: %s for %s refused: computed for %s %s uid %s (resourceVersion %s), the live one is uid %s",
                 type(cmd).__name__, cmd.job, kind, name, getattr(cmd, "uid", ""), getattr(cmd, "resource_version", "") or "-",
                 live_uid)
        return "dropped"

    @staticmethod
    def _version(job: dict | None) -> int:
        return int(((job or {}).get("status") or {}).get("version") or 0)

    # ------------------------------------------------------------------ pods

    def _CreatePod(self, ns: str, name: str, cmd: o.CreatePod, index: int) -> str:
        job = self._job(ns, name, cached=True)
        if not cmd.job_uid:
            raise Refused(f"CreatePod {cmd.name} for {ns}/{name} carries no job uid")
        if job is None or job["metadata"].get("uid") != cmd.job_uid:
            return "dropped"  # the job is gone, or this is another job of the same name
        if cmd.job_version < self._version(job):
            return "dropped"
        if cmd.pod is None:
            raise ValueError(f"CreatePod {cmd.name} carries no pod manifest (the decider must render pods)")
        require_manifest(cmd.pod, "Pod", ns, name, job)
        try:
            rawcalls.call(self.api, "POST", rawcalls.pods_path(ns), body=cmd.pod)
        except ApiException as err:
            if _status(err) == 409:
                return "done"
            raise
        return "applied"

    def _DeletePod(self, ns: str, name: str, cmd: o.DeletePod, index: int) -> str:
        if cmd.mark_out_of_sync and cmd.uid and self._mark_owned_pod(ns, name, cmd):
            return self._delete_pod(ns, cmd.name, cmd.uid)
        try:
            pod = self.core.read_namespaced_pod(cmd.name, ns)
        except ApiException as err:
            if _status(err) == 404:
                return "done"
            raise
        if cmd.uid and pod.metadata.uid != cmd.uid:
            return "done"  # another incarnation: this one is already gone
        self._deletable(pod, "pod", ns, name)
        if cmd.mark_out_of_sync:
            annotations = pod.metadata.annotations or {}
            if "volcano.sh/controller-out-of-sync" not in annotations:
                patch = OUT_OF_SYNC_PATCH if annotations else [
                    {"op": "add", "path": "/metadata/annotations", "value": {"volcano.sh/controller-out-of-sync": "true"}}
                ]
                try:
                    self.core.patch_namespaced_pod(cmd.name, ns, patch, _content_type="application/json-patch+json")
                except ApiException as err:
                    if _status(err) == 404:
                        return "done"
                    raise
        return self._delete_pod(ns, cmd.name, pod.metadata.uid)

    def _delete_pod(self, ns: str, pod: str, uid: str) -> str:
        # The uid precondition: exactly the pod whose owner was checked, never a newer one of that name.
        try:
            rawcalls.call(self.api, "DELETE", rawcalls.pod_path(ns, pod), body={"preconditions": {"uid": uid}})
        except ApiException as err:
            if _status(err) in (404, 409):
                return "done"  # gone, or the uid precondition failed: a newer pod of that name
            raise
        return "applied"

    def _mark_owned_pod(self, ns: str, name: str, cmd: o.DeletePod) -> bool:
        """A kill's out-of-sync annotation in one request that is also its ownership check.

        A JSON patch is atomic: its `test`s (the command's pod uid, and a first ownerReference to the
        vcjob `name`, which every pod vcbus creates has) hold, or nothing is written. That is the
        delete rule of vcbus.k8s.ownership, so the pod needs no read before the DELETE. False (nothing
        written) when the tests fail or the pod is gone: the read-check-patch path then decides, and
        says why when it refuses.
        """
        patch = [
            {"op": "test", "path": "/metadata/uid", "value": cmd.uid},
            {"op": "test", "path": "/metadata/ownerReferences/0/apiVersion", "value": f"{JOB_GROUP}/{JOB_VERSION}"},
            {"op": "test", "path": "/metadata/ownerReferences/0/kind", "value": "Job"},
            {"op": "test", "path": "/metadata/ownerReferences/0/name", "value": name},
            *OUT_OF_SYNC_PATCH,  # fails too when the pod has no annotations at all: the other path adds them
        ]
        try:
            rawcalls.call(self.api, "PATCH", rawcalls.pod_path(ns, cmd.name), body=patch, content_type=rawcalls.JSON_PATCH)
        except ApiException as err:
            if _status(err) in (400, 404, 409, 422):
                return False
            raise
        return True

    # ------------------------------------------------------------------ volumes

    def _CreatePVC(self, ns: str, name: str, cmd: o.CreatePVC, index: int) -> str:
        job = self._job(ns, name)
        if not cmd.job_uid:
            raise Refused(f"CreatePVC {cmd.name} for {ns}/{name} carries no job uid")
        if job is None or job["metadata"].get("uid") != cmd.job_uid:
            return "dropped"
        body = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {
                "name": cmd.name,
                "namespace": ns,
                "ownerReferences": [
                    {
                        "apiVersion": f"{JOB_GROUP}/{JOB_VERSION}",
                        "kind": "Job",
                        "name": name,
                        "uid": job["metadata"]["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": dict(cmd.claim),
        }
        try:
            self.core.create_namespaced_persistent_volume_claim(ns, body)
        except ApiException as err:
            if _status(err) == 409:
                return "done"
            raise
        return "applied"

    # ------------------------------------------------------------------ podgroups

    def _CreatePodGroup(self, ns: str, name: str, cmd: o.CreatePodGroup, index: int) -> str:
        job = self._job(ns, name)
        if not cmd.job_uid:
            raise Refused(f"CreatePodGroup {cmd.name} for {ns}/{name} carries no job uid")
        if job is None or job["metadata"].get("uid") != cmd.job_uid:
            return "dropped"
        body = cmd.podgroup
        if body is None:
            raise ValueError(f"CreatePodGroup {cmd.name} carries no manifest (the decider must render it)")
        require_manifest(body, "PodGroup", ns, name, job)
        try:
            rawcalls.call(self.api, "POST", rawcalls.object_path(PG_GROUP, PG_VERSION, ns, PG_PLURAL), body=body)
        except ApiException as err:
            if _status(err) == 409:
                return "done"
            raise
        return "applied"

    def _podgroup(self, ns: str, name: str, *, cached: bool = False) -> dict | None:
        """The PodGroup, None if not found; `cached`: the watch cache's when it has it."""
        if cached and self.cache is not None and (pg := self.cache.get(watchcache.PODGROUPS, ns, name)) is not None:
            return pg
        return rawcalls.read(self.api, rawcalls.object_path(PG_GROUP, PG_VERSION, ns, PG_PLURAL, name))

    def _UpdatePodGroup(self, ns: str, name: str, cmd: o.UpdatePodGroup, index: int) -> str:
        pg = self._podgroup(ns, cmd.name)
        if pg is None:
            return "done"
        require_owned(pg, "PodGroup", ns, name, self._job(ns, name))
        patch = {
            "spec": {
                "minMember": cmd.min_member,
                "minTaskMember": dict(cmd.min_task_member),
                "priorityClassName": cmd.priority_class_name or None,
            }
        }
        try:
            self.custom.patch_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, cmd.name, patch)
        except ApiException as err:
            if _status(err) == 404:
                return "done"
            raise
        return "applied"

    def _DeletePodGroup(self, ns: str, name: str, cmd: o.DeletePodGroup, index: int) -> str:
        pg = self._podgroup(ns, cmd.name)
        if pg is None:
            return "done"
        self._deletable(pg, "PodGroup", ns, name)
        options = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=pg["metadata"]["uid"]))
        try:
            self.custom.delete_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, cmd.name, body=options)
        except ApiException as err:
            if _status(err) == 404:
                return "done"
            raise
        return "applied"

    # ------------------------------------------------------------------ the vcjob

    def _UpdateJobStatus(self, ns: str, name: str, cmd: o.UpdateJobStatus, index: int) -> str:
        import msgspec

        status = msgspec.to_builtins(cmd.status)
        status.setdefault("state", {})
        for attempt in range(5):
            # first from the watch cache: its resourceVersion may be behind, and then the patch's test
            # fails (409/422) and the next attempt reads the API server
            job = self._job(ns, name, cached=attempt == 0)
            if job is None:
                return "dropped"
            if cmd.uid and job["metadata"].get("uid") != cmd.uid:  # deleted and re-created meanwhile
                return self._stale(cmd, "vcjob", f"{ns}/{name}", job["metadata"].get("uid", ""))
            if cmd.status.version < self._version(job):
                return "dropped"
            patch = [
                {"op": "test", "path": "/metadata/resourceVersion", "value": job["metadata"]["resourceVersion"]},
                {"op": "add", "path": "/status", "value": status},
            ]
            try:
                rawcalls.call(self.api, "PATCH", rawcalls.object_path(JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, name) + "/status",
                              body=patch, content_type=rawcalls.JSON_PATCH)
                self._status_files(job, status)
                return "applied"
            except ApiException as err:
                if _status(err) == 404:
                    return "dropped"
                if _status(err) in (409, 422):  # the job changed meanwhile: read it again
                    continue
                raise
        raise RuntimeError(f"status of {ns}/{name}: conflicts did not stop after 5 tries")

    def _status_files(self, job: dict, status: dict) -> None:
        """status-mounter: the ConfigMap behind /<mountPoint>/<value> follows every status write."""
        manifest = plugin_hooks.status_mounter_configmap(job, status)
        if manifest is not None:
            self._apply_object(manifest, plugin_hooks.CREATE_OR_UPDATE_DATA)

    def _DeleteBusCommand(self, ns: str, name: str, cmd: o.DeleteBusCommand, index: int) -> str:
        if cmd.namespace not in ("", ns):
            raise Refused(f"Command {cmd.namespace}/{cmd.name} is not in the namespace of vcjob {ns}/{name}")
        try:
            self.custom.delete_namespaced_custom_object(
                CMD_GROUP, CMD_VERSION, cmd.namespace or ns, CMD_PLURAL, cmd.name
            )
        except ApiException as err:
            if _status(err) == 404:
                return "done"
            raise
        return "applied"

    # ------------------------------------------------------------------ plugins

    def _PluginHook(self, ns: str, name: str, cmd: o.PluginHook, index: int) -> str:
        job = self._job(ns, name)
        if job is None:
            return "dropped"
        hook = {
            "OnJobAdd": plugin_hooks.on_job_add,
            "OnJobUpdate": plugin_hooks.on_job_update,
            "OnJobDelete": plugin_hooks.on_job_delete,
        }.get(cmd.hook)
        if hook is None:
            return "dropped"
        result = hook(job)
        for effect in result.effects:
            self._effect(ns, effect, name)
        return "applied"

    def _effect(self, ns: str, effect: Any, job_name: str) -> None:
        if isinstance(effect, plugin_hooks.DeleteObject):
            self._delete_object(effect.api_version, effect.kind, effect.namespace or ns, effect.name, job_name)
            return
        manifest = dict(effect.manifest)
        if effect.fill_ssh_keys:
            # A fresh key pair only for a new Secret: an existing one keeps its keys.
            self._apply_object(fill_ssh_keys(manifest, *generate_ssh_keypair()), effect.mode, keep_keys=True)
            return
        self._apply_object(manifest, effect.mode)

    def _apply_object(self, manifest: dict, mode: str, *, keep_keys: bool = False) -> None:
        kind = manifest["kind"]
        ns = manifest["metadata"]["namespace"]
        name = manifest["metadata"]["name"]
        api = _OBJECT_APIS[kind]
        if kind == "Secret":
            manifest = mark_managed(manifest)  # Secrets are only ever patched when vcbus made them
        try:
            rawcalls.call(self.api, "POST", _collection(kind, ns), body=manifest)
        except ApiException as err:
            if _status(err) != 409:
                raise
            if mode == plugin_hooks.CREATE_IF_ABSENT:
                return
            patch = {k: manifest[k] for k in ("data", "stringData") if k in manifest}
            if keep_keys and "data" in patch:
                patch["data"] = {k: v for k, v in patch["data"].items() if k == "config"}
            owners = job_owners(manifest)
            if patch and kind == "Secret":
                self._patch_managed_secret(ns, name, patch)
            elif patch and kind == "ConfigMap" and owners:  # only the job's own ConfigMap (vcbus.k8s.ownership)
                try:
                    rawcalls.call(self.api, "PATCH", f"{_collection(kind, ns)}/{rawcalls.quote(name, safe='')}",
                                  body=managed_patch(patch, owner_tests(owners[0][0])), content_type=rawcalls.JSON_PATCH)
                except ApiException as err:
                    if _status(err) in (400, 422):  # a test failed: a ConfigMap of that name that is not the job's
                        raise Refused(f"ConfigMap {ns}/{name} does not belong to vcjob {ns}/{owners[0][0]}: not patched") from None
                    raise
            elif patch:
                getattr(self._api_for(kind), f"patch_namespaced_{api}")(name, ns, patch)

    def _patch_managed_secret(self, ns: str, name: str, patch: dict) -> None:
        """Patch a Secret's data only if vcbus created it (one request: a JSON-patch test, then the keys)."""
        try:
            rawcalls.call(self.api, "PATCH", f"{_collection('Secret', ns)}/{rawcalls.quote(name, safe='')}",
                          body=managed_patch(patch), content_type=rawcalls.JSON_PATCH)
        except ApiException as err:
            if _status(err) == 422:  # the test failed: someone else's Secret of that name
                raise Refused(f"Secret {ns}/{name} was not created by vcbus (no {MANAGED_BY} annotation): not patched") from None
            raise

    def _delete_object(self, api_version: str, kind: str, ns: str, name: str, job_name: str) -> None:
        """A plugin object is deleted only if it is the job's (vcbus.k8s.ownership), with a uid precondition.

        ConfigMaps and Secrets are never read: a JSON patch of `test`s only (the first ownerReference
        names the job; a Secret also carries vcbus's annotation) is the check, and its answer gives
        the uid. Services and NetworkPolicies are read (`get`)."""
        api = _OBJECT_APIS.get(kind)
        if api is None:
            return
        calls = self._api_for(kind)
        try:
            if kind in ("ConfigMap", "Secret"):
                tests = owner_tests(job_name) + ([managed_test()] if kind == "Secret" else [])
                obj = getattr(calls, f"patch_namespaced_{api}")(
                    name, ns, tests, _content_type="application/json-patch+json")
            else:
                obj = getattr(calls, f"read_namespaced_{api}")(name, ns)
                self._deletable(obj, kind, ns, job_name)
        except ApiException as err:
            if _status(err) == 404:
                return
            if _status(err) in (400, 422):  # a test failed (or deploy/'s Secret policy refused)
                what = "of vcjob " + f"{ns}/{job_name}" + (" created by vcbus" if kind == "Secret" else "")
                raise Refused(f"{kind} {ns}/{name} is not an object {what}: not deleted") from None
            raise
        body = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=obj.metadata.uid))
        try:
            getattr(calls, f"delete_namespaced_{api}")(name, ns, body=body)
        except ApiException as err:
            if kind == "Secret" and _status(err) == 422:  # deploy/'s policy: not a Secret vcbus created
                raise Refused(f"Secret {ns}/{name} was not created by vcbus: not deleted") from None
            if _status(err) not in (404, 409):  # 409: the uid precondition failed: a newer object of that name
                raise

    def _api_for(self, kind: str) -> Any:
        if kind == "NetworkPolicy":
            return client.NetworkingV1Api(self.api)
        return self.core


HANDLERS: dict[type, Callable[..., str]] = {
    # the job controller's (this module)
    o.CreatePod: Actuator._CreatePod,
    o.DeletePod: Actuator._DeletePod,
    o.CreatePVC: Actuator._CreatePVC,
    o.CreatePodGroup: Actuator._CreatePodGroup,
    o.UpdatePodGroup: Actuator._UpdatePodGroup,
    o.DeletePodGroup: Actuator._DeletePodGroup,
    o.UpdateJobStatus: Actuator._UpdateJobStatus,
    o.DeleteBusCommand: Actuator._DeleteBusCommand,
    o.PluginHook: Actuator._PluginHook,
    o.RecordEvent: Actuator._RecordEvent,  # with the command's msg id too (vcbus.k8s.event_recording)
    # the scheduler's, the queue controller's and the garbage collector's (vcbus.k8s.scheduler_commands)
    o.BindPod: Actuator._BindPod,
    o.EvictPod: Actuator._EvictPod,
    o.UpdatePodCondition: Actuator._UpdatePodCondition,
    o.UpdatePodGroupStatus: Actuator._UpdatePodGroupStatus,
    o.UpdateQueueStatus: Actuator._UpdateQueueStatus,
    o.CreateQueue: Actuator._CreateQueue,
    o.DeleteJob: Actuator._DeleteJob,
    # the podgroup controller's (vcbus.k8s.workload_podgroups)
    o.CreateWorkloadPodGroup: Actuator._CreateWorkloadPodGroup,
    o.DeleteWorkloadPodGroup: Actuator._DeleteWorkloadPodGroup,
    o.AnnotatePodGroupName: Actuator._AnnotatePodGroupName,
    # the cronjob controller's (vcbus.k8s.cronjob_commands)
    o.CreateCronJobRun: Actuator._CreateCronJobRun,
    o.DeleteCronJobRun: Actuator._DeleteCronJobRun,
    o.UpdateCronJobStatus: Actuator._UpdateCronJobStatus,
    # the jobflow and jobtemplate controllers' (vcbus.k8s.jobflow_commands)
    o.CreateJobFlowJob: Actuator._CreateJobFlowJob,
    o.DeleteJobFlowJob: Actuator._DeleteJobFlowJob,
    o.UpdateJobFlowStatus: Actuator._UpdateJobFlowStatus,
    o.UpdateJobTemplateStatus: Actuator._UpdateJobTemplateStatus,
}
"""Each command type and the `Actuator` method that carries it out, called as `handler(actuator, ns,
name, cmd, index)`: the one dispatch table. A command type missing here is dropped and logged at run
time; tests/test_actuator_dispatch.py checks that every command `statemachines.outputs.COMMANDS`
names has its handler, and nothing else is here."""


def _collection(kind: str, ns: str) -> str:
    """The path of a plugin object kind's collection in a namespace (`_OBJECT_APIS`'s kinds)."""
    prefix, plural = _OBJECT_PATHS[kind]
    return f"{prefix}/namespaces/{rawcalls.quote(ns, safe='')}/{plural}"


_OBJECT_PATHS = {
    "ConfigMap": ("/api/v1", "configmaps"),
    "Service": ("/api/v1", "services"),
    "Secret": ("/api/v1", "secrets"),
    "NetworkPolicy": ("/apis/networking.k8s.io/v1", "networkpolicies"),
}
_OBJECT_APIS = {
    "ConfigMap": "config_map",
    "Service": "service",
    "Secret": "secret",
    "NetworkPolicy": "network_policy",
}

