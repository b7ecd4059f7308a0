"""The vcjobs another of Volcano's controllers owns (a CronJob's runs, a JobFlow's jobs), and that
owner's status, carried out on the cluster for the actuator's command mixins
(vcbus/k8s/cronjob_commands.py, vcbus/k8s/jobflow_commands.py).

- `create_owned`: POST the vcjob, controlled by its owner (`controller`, `blockOwnerDeletion`, as
  `metav1.NewControllerRef`); AlreadyExists is done.
- `delete_owned`: only a vcjob the owner controls, with the command's uid as a precondition
  (another vcjob of the name is left alone); NotFound and a conflicting uid are done.
- `replace_status`: the status subresource replaced with the whole status the command carries (a
  JSON patch that tests the uid first), for the object the command names: one of another uid
  (deleted and made again) is left alone and counted as stale.
- `keyed_name`: the object a command's key names (`<namespace>/<kind>:<name>`,
  statemachines.hosted.owner_key); a command under any other key is refused.
"""

from __future__ import annotations

from typing import Any

import msgspec
from kubernetes.client.rest import ApiException

from statemachines.hosted import split_owner_key
from vcbus.k8s import rawcalls
from vcbus.k8s.ownership import Refused

JOB_API_VERSION = "batch.volcano.sh/v1alpha1"
JOB_GROUP, JOB_VERSION = JOB_API_VERSION.split("/")


def keyed_name(kind: str, ns: str, key_name: str, command: object) -> str:
    """The name of the `kind` object the key `<ns>/<key_name>` is of; Refused for a key of anything else."""
    found = split_owner_key(f"{ns}/{key_name}")
    if found is None or found[0] != kind:
        raise Refused(f"{type(command).__name__} under the key {ns}/{key_name}, not a {kind}'s ({ns}/{kind}:<name>)")
    return found[2]


def _status(err: ApiException) -> int:
    return int(getattr(err, "status", 0) or 0)


def owned_manifest(ns: str, name: str, owner: dict[str, str], labels: dict[str, str], annotations: dict[str, str],
                   spec: dict[str, Any]) -> dict[str, Any]:
    """A vcjob controlled by `owner` ({apiVersion, kind, name, uid})."""
    meta: dict[str, Any] = {"name": name, "namespace": ns,
                            "ownerReferences": [{**owner, "controller": True, "blockOwnerDeletion": True}]}
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": JOB_API_VERSION, "kind": "Job", "metadata": meta, "spec": spec}


def controlled_by(job: dict, api_version: str, kind: str, owner: str) -> bool:
    refs = (job.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("controller") and r.get("kind") == kind and r.get("apiVersion") == api_version
               and r.get("name") == owner for r in refs)


def create_owned(api: Any, ns: str, manifest: dict[str, Any]) -> str:
    try:
        rawcalls.call(api, "POST", rawcalls.object_path(JOB_GROUP, JOB_VERSION, ns, "jobs"), body=manifest)
    except ApiException as err:
        if _status(err) == 409:
            return "done"
        raise
    return "applied"


def delete_owned(api: Any, ns: str, job_name: str, uid: str, owner: tuple[str, str, str]) -> str:
    """`owner`: (apiVersion, kind, name) of the controller the vcjob must have."""
    path = rawcalls.object_path(JOB_GROUP, JOB_VERSION, ns, "jobs", job_name)
    job = rawcalls.read(api, path)
    if job is None or (uid and job["metadata"].get("uid") != uid):
        return "done"  # gone, or another vcjob of the name now
    if not controlled_by(job, *owner):
        raise Refused(f"vcjob {ns}/{job_name} is not controlled by {owner[1]} {ns}/{owner[2]}")
    try:
        rawcalls.call(api, "DELETE", path, body={"preconditions": {"uid": job["metadata"].get("uid")}})
    except ApiException as err:
        if _status(err) in (404, 409):
            return "done"
        raise
    return "applied"


def replace_status(actuator: Any, path: str, uid: str, status: Any) -> str:
    """`path`: the object's; `actuator.stale` counts a status computed for another incarnation."""
    patch = [{"op": "test", "path": "/metadata/uid", "value": uid},
             {"op": "add", "path": "/status", "value": msgspec.to_builtins(status)}]
    for attempt in range(2):
        obj = rawcalls.read(actuator.api, path)
        if obj is None:
            return "dropped"
        if obj["metadata"].get("uid") != uid:  # deleted and made again meanwhile
            actuator.stale += 1
            return "dropped"
        try:
            rawcalls.call(actuator.api, "PATCH", path + "/status", body=patch, content_type=rawcalls.JSON_PATCH)
        except ApiException as err:
            if _status(err) == 404:
                return "dropped"
            if _status(err) in (409, 422) and attempt == 0:  # the uid's test: read it again
                continue
            raise
        return "applied"
    raise AssertionError("unreachable")
