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
- conflicts are retried.

A status write also refreshes the status-mounter ConfigMap of the job (the
files a pod reads under its mountPoint stay live).

Kubernetes Events get a name derived from the command's causation (job, seq,
index), so a redelivered RecordEvent creates nothing new
(vcbus.k8s.event_recording). Plugin hooks ask the pure plugin code
(statemachines.plugins) for the objects to create or delete. The scheduler's,
queue controller's and garbage collector's commands (BindPod, EvictPod,
UpdatePodCondition, UpdatePodGroupStatus, UpdateQueueStatus, CreateQueue,
DeleteJob) are in vcbus.k8s.scheduler_commands.

Job keys `_/<name>` are cluster-scoped (queues, the scheduler): only the
commands about cluster-scoped objects (Queue status, CreateQueue, an event on
a Queue) apply there; any other command with such a key is dropped and logged.
"""

from __future__ import annotations

import logging
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from statemachines import outputs as o
from statemachines import plugins as plugin_hooks
from statemachines.plugins.ssh import fill_ssh_keys
from vcbus.bus.subjects import CLUSTER_SCOPE
from vcbus.k8s.event_recording import COMPONENT, EventRecording
from vcbus.k8s.scheduler_commands import SchedulerCommands
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


class Actuator(SchedulerCommands, EventRecording):
    """Applies commands with the official `kubernetes` client (synchronous calls)."""

    def __init__(self, api_client: client.ApiClient) -> None:
        self.api = api_client
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.applied = 0
        self.dropped = 0

    # ------------------------------------------------------------------ entry point

    def apply(self, cmd: o.Output, *, index: int = 0, msg_id: str = "") -> str:
        """Carry `cmd` out; returns "applied", "done" (already so) or "dropped" (stale).

        `index` and `msg_id` (the command's `Nats-Msg-Id`) name Kubernetes Events.
        """
        ns, name = cmd.job.split("/", 1)
        handler = getattr(self, "_" + type(cmd).__name__, None)
        if handler is None or (ns == CLUSTER_SCOPE and not isinstance(cmd, CLUSTER_COMMANDS)):
            log.warning("actuator: %s for %s dropped: no such command for that key", type(cmd).__name__, cmd.job)
            self.dropped += 1
            return "dropped"
        if isinstance(cmd, o.RecordEvent):
            result = self._RecordEvent(ns, name, cmd, index, msg_id)
        else:
            result = handler(ns, name, cmd, index)
        if result == "dropped":
            self.dropped += 1
        else:
            self.applied += 1
        return result

    # ------------------------------------------------------------------ helpers

    def _job(self, ns: str, name: str) -> dict | None:
        try:
            return self.custom.get_namespaced_custom_object(JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, name)
        except ApiException as err:
            if _status(err) == 404:
                return None
            raise

    @staticmethod
    def _version(job: dict | None) -> int:
        return int(((job or {}).get("status") or {}).get("version") or 0)

    # ------------------------------------------------------------------ pods

    def _CreatePod(self, ns: str, name: str, cmd: o.CreatePod, index: int) -> str:
        job = self._job(ns, name)
        if job is None or job["metadata"].get("uid") != cmd.job_uid and cmd.job_uid:
            return "dropped"  # the job is gone, or this is another job of the same name
        if cmd.job_version < self._version(job):
            return "dropped"
        if cmd.pod is None:
            raise ValueError(f"CreatePod {cmd.name} carries no pod manifest (the decider must render pods)")
        try:
            self.core.create_namespaced_pod(ns, cmd.pod)
        except ApiException as err:
            if _status(err) == 409:
                return "done"
            raise
        return "applied"

    def _DeletePod(self, ns: str, name: str, cmd: o.DeletePod, index: int) -> str:
        if cmd.mark_out_of_sync:
            try:
                pod = self.core.read_namespaced_pod(cmd.name, ns)
            except ApiException as err:
                if _status(err) == 404:
                    return "done"
                raise
            if cmd.uid and pod.metadata.uid != cmd.uid:
                return "done"  # another incarnation: this one is already gone
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
        body = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=cmd.uid) if cmd.uid else None)
        try:
            self.core.delete_namespaced_pod(cmd.name, ns, body=body)
        except ApiException as err:
            if _status(err) in (404, 409):
                return "done"  # gone, or the uid precondition failed: a newer pod of that name
            raise
        return "applied"

    # ------------------------------------------------------------------ volumes

    def _CreatePVC(self, ns: str, name: str, cmd: o.CreatePVC, index: int) -> str:
        job = self._job(ns, name)
        if job is None or (cmd.job_uid and job["metadata"].get("uid") != cmd.job_uid):
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
        if job is None or (cmd.job_uid and job["metadata"].get("uid") != cmd.job_uid):
            return "dropped"
        body = cmd.podgroup
        if body is None:
            raise ValueError(f"CreatePodGroup {cmd.name} carries no manifest (the decider must render it)")
        try:
            self.custom.create_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, body)
        except ApiException as err:
            if _status(err) == 409:
                return "done"
            raise
        return "applied"

    def _UpdatePodGroup(self, ns: str, name: str, cmd: o.UpdatePodGroup, index: int) -> str:
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
        try:
            self.custom.delete_namespaced_custom_object(PG_GROUP, PG_VERSION, ns, PG_PLURAL, cmd.name)
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
        for _ in range(5):
            job = self._job(ns, name)
            if job is None:
                return "dropped"
            if cmd.status.version < self._version(job):
                return "dropped"
            patch = [
                {"op": "test", "path": "/metadata/resourceVersion", "value": job["metadata"]["resourceVersion"]},
                {"op": "add", "path": "/status", "value": status},
            ]
            try:
                self.custom.patch_namespaced_custom_object_status(
                    JOB_GROUP, JOB_VERSION, ns, JOB_PLURAL, name, patch, _content_type="application/json-patch+json"
                )
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
            self._effect(ns, effect)
        return "applied"

    def _effect(self, ns: str, effect: Any) -> None:
        if isinstance(effect, plugin_hooks.DeleteObject):
            self._delete_object(effect.api_version, effect.kind, effect.namespace or ns, effect.name)
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
        try:
            getattr(self._api_for(kind), f"create_namespaced_{api}")(ns, manifest)
        except ApiException as err:
            if _status(err) != 409:
                raise
            if mode == plugin_hooks.CREATE_IF_ABSENT:
                return
            patch = {k: manifest[k] for k in ("data", "stringData") if k in manifest}
            if keep_keys and "data" in patch:
                patch["data"] = {k: v for k, v in patch["data"].items() if k == "config"}
            if patch:
                getattr(self._api_for(kind), f"patch_namespaced_{api}")(name, ns, patch)

    def _delete_object(self, api_version: str, kind: str, ns: str, name: str) -> None:
        api = _OBJECT_APIS.get(kind)
        if api is None:
            return
        try:
            getattr(self._api_for(kind), f"delete_namespaced_{api}")(name, ns)
        except ApiException as err:
            if _status(err) != 404:
                raise

    def _api_for(self, kind: str) -> Any:
        if kind == "NetworkPolicy":
            return client.NetworkingV1Api(self.api)
        return self.core


_OBJECT_APIS = {
    "ConfigMap": "config_map",
    "Service": "service",
    "Secret": "secret",
    "NetworkPolicy": "network_policy",
}

