"""`render_job`: every object a vcjob turns into, computed offline (like `helm template`).

The list is: the vcjob after the mutating webhook (so users see the
defaults), its PodGroup, the PVCs the controller creates for `volumeClaim`
volumes, each pod `<job>-<task>-<index>` as the controller would create it
(version 0, retry 0, with every plugin's OnPodCreate applied), then the
objects of the plugins' OnJobAdd (ConfigMaps, Services, NetworkPolicies,
Secrets) in plugin order.

With `job_forwarding` (the job's queue has `extendClusters`) the job is shown
as Volcano's syncJob writes it, annotated `volcano.sh/job-forwarding: "true"`;
the PodGroup copies that annotation and every pod gets the key as a label and
an annotation.

Inputs that a cluster would supply are made up deterministically: namespace
`default` when absent, a uid derived from `<namespace>/<name>` (uuid5) when
absent, and the status the controller has written by the time it creates the
pods (`Pending`, minAvailable, the plugins' controlledResources). Nothing here
is random; the ssh key pair, if one is needed, is passed in.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping
from typing import Any

from statemachines.admission.mutate import DEFAULT_SCHEDULER, mutate_job
from statemachines.manifests.pod import build_pod, claim_names, mark_forwarding
from statemachines.manifests.podgroup import build_podgroup
from statemachines.plugins import ApplyObject, on_job_add
from statemachines.plugins.base import owner_reference
from statemachines.plugins.ssh import fill_ssh_keys
from statemachines.plugins.status_mounter import NAME as STATUS_MOUNTER
from statemachines.plugins.status_mounter import status_mounter_configmap

RENDER_NAMESPACE = "urn:vcbus:render"


def render_uid(namespace: str, name: str) -> str:
    """A stable stand-in for the uid the API server would assign."""
    return str(uuid.uuid5(uuid.uuid5(uuid.NAMESPACE_URL, RENDER_NAMESPACE), f"{namespace}/{name}"))


def prepare(job: dict[str, Any], *, namespace: str = "default") -> dict[str, Any]:
    """A copy of `job` with a namespace and a uid (made up when absent)."""
    result = copy.deepcopy(job)
    meta = result.setdefault("metadata", {})
    meta.setdefault("namespace", namespace)
    if not meta.get("namespace"):
        meta["namespace"] = namespace
    if not meta.get("uid"):
        meta["uid"] = render_uid(meta["namespace"], str(meta.get("name", "")))
    return result


def initial_status(job: dict[str, Any]) -> dict[str, Any]:
    """The status at first pod creation: Pending, minAvailable copied, no counts yet."""
    return {"state": {"phase": "Pending"}, "minAvailable": int((job.get("spec") or {}).get("minAvailable") or 0)}


def volume_claims(job: dict[str, Any]) -> list[dict[str, Any]]:
    """The PVCs the controller creates: one per volume with a `volumeClaim` spec."""
    meta = job.get("metadata") or {}
    claims = []
    for volume, name in zip((job.get("spec") or {}).get("volumes") or [], claim_names(job), strict=True):
        if volume.get("volumeClaim") is None:
            continue
        claims.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {
                    "name": name,
                    "namespace": meta.get("namespace", ""),
                    "ownerReferences": [owner_reference(job)],
                },
                "spec": copy.deepcopy(volume["volumeClaim"]),
            }
        )
    return claims


def render_job(
    job: dict[str, Any],
    *,
    scheduler_name: str = DEFAULT_SCHEDULER,
    namespace: str = "default",
    status: dict[str, Any] | None = None,
    ssh_keys: tuple[str, str] | None = None,
    priorities: Mapping[str, int] | None = None,
    job_forwarding: bool = False,
) -> list[dict[str, Any]]:
    """Every object of `job`, mutated job first (see the module docstring).

    Args:
        job: a vcjob manifest as the user wrote it.
        scheduler_name: the mutating webhook's default scheduler name.
        namespace: used when the job names none.
        status: the job status the plugins see at pod creation (default:
            `initial_status`); status-mounter env values come from it.
        ssh_keys: (private PEM, public OpenSSH line) for the ssh Secret when
            the plugin generates keys; without it the Secret lacks them.
        priorities: PriorityClass values, for PodGroup minResources.
        job_forwarding: the job's queue has `extendClusters`: the job as
            syncJob annotates it (`volcano.sh/job-forwarding: "true"`, which
            the PodGroup copies) and its pods marked with that key.

    Raises:
        statemachines.plugins.PluginError: a plugin refused (e.g. ray without head task).
    """
    mutated = mutate_job(prepare(job, namespace=namespace), scheduler_name=scheduler_name)
    if job_forwarding:
        mutated = mark_forwarding(mutated)  # the controller's first write, before it creates anything
    live = copy.deepcopy(mutated)
    live["status"] = copy.deepcopy(status) if status is not None else initial_status(mutated)
    added = on_job_add(live)
    live["status"]["controlledResources"] = added.controlled_resources
    objects: list[dict[str, Any]] = [mutated, build_podgroup(live, priorities)]
    objects += volume_claims(live)
    version = int(live["status"].get("version") or 0)
    retry = int(live["status"].get("retryCount") or 0)
    for task in (live.get("spec") or {}).get("tasks") or []:
        for index in range(int(task.get("replicas") or 0)):
            objects.append(
                build_pod(
                    live, task.get("name", ""), index, version=version, retry_count=retry, job_forwarding=job_forwarding
                )
            )
    for effect in added.effects:
        if isinstance(effect, ApplyObject):
            manifest = effect.manifest
            if effect.fill_ssh_keys and ssh_keys is not None:
                manifest = fill_ssh_keys(manifest, *ssh_keys)
            if effect.plugin == STATUS_MOUNTER:  # as the status projection refreshes it right after the write
                manifest = status_mounter_configmap(live, live["status"]) or manifest
            objects.append(copy.deepcopy(manifest))
    return objects
