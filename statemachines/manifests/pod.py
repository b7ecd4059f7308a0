"""Pure pod construction: what the job controller sends for pod `<job>-<task>-<index>`.

`build_pod` restates `createJobPod` (name, owner, labels, annotations,
scheduler and priority class, job volumes) and then runs every plugin's
OnPodCreate. Where upstream is random it is deterministic here:

- the pod volume for a job volume is named `<job>-<12 chars>` where the 12
  characters come from sha256(`<job uid>/<pod name>/<claim name>`) in base 36
  (upstream: 12 random `[0-9a-z]`, different per pod);
- a job volume whose `volumeClaimName` is still empty (the controller fills it
  in at initiation) uses `pvc_name(job, i)`: `<job>-pvc-<12 chars>` from
  sha256(`<job uid>/volume/<i>`) (upstream: random, retried until unused).
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from statemachines.plugins import registry
from statemachines.plugins.base import (
    DEFAULT_TASK_SPEC,
    JOB_NAME_KEY,
    JOB_NAMESPACE_KEY,
    TASK_INDEX_KEY,
    TASK_SPEC_KEY,
    owner_reference,
    pod_name,
)

QUEUE_NAME_KEY = "volcano.sh/queue-name"
JOB_VERSION_KEY = "volcano.sh/job-version"
TEMPLATE_UID_KEY = "volcano.sh/template-uid"
RETRY_COUNT_KEY = "volcano.sh/job-retry-count"
GROUP_NAME_KEY = "scheduling.k8s.io/group-name"
NUMA_POLICY_KEY = "volcano.sh/numa-topology-policy"
FORWARDING_KEY = "volcano.sh/job-forwarding"
PARTITION_ID_KEY = "volcano.sh/partition-id"
PREEMPTABLE_KEY = "volcano.sh/preemptable"
COOLDOWN_KEY = "volcano.sh/cooldown-time"
REVOCABLE_ZONE_KEY = "volcano.sh/revocable-zone"
JDB_MIN_AVAILABLE_KEY = "volcano.sh/jdb-min-available"
JDB_MAX_UNAVAILABLE_KEY = "volcano.sh/jdb-max-unavailable"

_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def stable_suffix(seed: str, length: int = 12) -> str:
    """`length` characters of [0-9a-z] derived from sha256(seed)."""
    number = int.from_bytes(hashlib.sha256(seed.encode()).digest(), "big")
    chars = []
    for _ in range(length):
        number, digit = divmod(number, 36)
        chars.append(_BASE36[digit])
    return "".join(chars)


def pvc_name(job: dict[str, Any], index: int) -> str:
    """The PVC name the controller would generate for `spec.volumes[index]` (deterministic)."""
    meta = job.get("metadata") or {}
    seed = "{}/volume/{}".format(meta.get("uid", ""), index)
    return "{}-pvc-{}".format(meta.get("name", ""), stable_suffix(seed))


def claim_names(job: dict[str, Any]) -> list[str]:
    """The claim name of every `spec.volumes[i]` (given, or the deterministic generated one)."""
    volumes = (job.get("spec") or {}).get("volumes") or []
    return [volume.get("volumeClaimName") or pvc_name(job, i) for i, volume in enumerate(volumes)]


def group_name(job: dict[str, Any]) -> str:
    """PodGroup name and pod annotation `scheduling.k8s.io/group-name`: `<job>-<uid>`."""
    meta = job.get("metadata") or {}
    return f"{meta.get('name', '')}-{meta.get('uid', '')}"


def find_task(job: dict[str, Any], task_name: str) -> dict[str, Any]:
    for task in (job.get("spec") or {}).get("tasks") or []:
        if task.get("name", "") == task_name:
            return task
    raise KeyError(f"job has no task {task_name!r}")


def _job_volumes(pod: dict[str, Any], job: dict[str, Any]) -> None:
    spec = pod["spec"]
    seen: set[str] = set()
    volumes = (job.get("spec") or {}).get("volumes") or []
    meta = job.get("metadata") or {}
    uid, job_name, name_of_pod = meta.get("uid", ""), meta.get("name", ""), pod["metadata"]["name"]
    for volume, claim in zip(volumes, claim_names(job), strict=True):
        if claim in seen:
            continue
        seen.add(claim)
        name = "{}-{}".format(job_name, stable_suffix(f"{uid}/{name_of_pod}/{claim}"))
        spec["volumes"] = list(spec.get("volumes") or []) + [
            {"name": name, "persistentVolumeClaim": {"claimName": claim}}
        ]
        for container in spec.get("containers") or []:
            container["volumeMounts"] = list(container.get("volumeMounts") or []) + [
                {"name": name, "mountPath": volume.get("mountPath", "")}
            ]


def mark_forwarding(job: dict[str, Any]) -> dict[str, Any]:
    """A copy of `job` as syncJob writes it when its queue has extendClusters: `volcano.sh/job-forwarding: "true"`."""
    meta = dict(job.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), FORWARDING_KEY: "true"}
    return {**job, "metadata": meta}


def build_pod(
    job: dict[str, Any],
    task_name: str,
    index: int,
    *,
    version: int,
    retry_count: int,
    job_forwarding: bool = False,
    run_plugins: bool = True,
) -> dict[str, Any]:
    """The pod the controller creates for replica `index` of task `task_name`.

    Args:
        job: the vcjob manifest (after admission). Read, never modified. Its
            `status` is what the plugins see (status-mounter env values), with
            `version` and `retryCount` replaced by the arguments below.
        task_name: a task of `job.spec.tasks`.
        index: replica index, 0-based.
        version: `status.version` to stamp (`volcano.sh/job-version`).
        retry_count: `status.retryCount` to stamp (`volcano.sh/job-retry-count`).
        job_forwarding: the queue has extendClusters (adds `volcano.sh/job-forwarding`).
        run_plugins: run every plugin's OnPodCreate (the controller always does).

    Returns:
        A new Pod manifest (`apiVersion: v1`, `kind: Pod`, metadata, spec).

    Raises:
        KeyError: no task of that name.
        statemachines.plugins.PluginError: a plugin refused the pod; upstream
            then stops creating pods for this sync.
    """
    task = find_task(job, task_name)
    meta = job.get("metadata") or {}
    spec = job.get("spec") or {}
    name = str(meta.get("name", ""))
    template = copy.deepcopy(task.get("template") or {})
    template_meta = template.get("metadata") or {}
    pod_spec = template.get("spec") or {}
    if not pod_spec.get("schedulerName"):
        pod_spec["schedulerName"] = spec.get("schedulerName", "")
    if not pod_spec.get("priorityClassName") and spec.get("priorityClassName"):
        pod_spec["priorityClassName"] = spec["priorityClassName"]
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": pod_name(name, task_name, index),
            "namespace": meta.get("namespace", ""),
            "ownerReferences": [owner_reference(job)],
        },
        "spec": pod_spec,
    }
    _job_volumes(pod, job)
    key = task_name or DEFAULT_TASK_SPEC
    queue = spec.get("queue", "")
    annotations = dict(template_meta.get("annotations") or {})
    annotations.update(
        {
            TASK_INDEX_KEY: str(index),
            TASK_SPEC_KEY: key,
            GROUP_NAME_KEY: group_name(job),
            JOB_NAME_KEY: name,
            QUEUE_NAME_KEY: queue,
            JOB_VERSION_KEY: str(version),
            TEMPLATE_UID_KEY: f"{name}-{task_name}",
            RETRY_COUNT_KEY: str(retry_count),
        }
    )
    if task.get("topologyPolicy"):
        annotations[NUMA_POLICY_KEY] = task["topologyPolicy"]
    job_annotations = meta.get("annotations") or {}
    for copied in (PREEMPTABLE_KEY, COOLDOWN_KEY, REVOCABLE_ZONE_KEY):
        if copied in job_annotations:
            annotations[copied] = job_annotations[copied]
    if JDB_MIN_AVAILABLE_KEY in job_annotations:
        annotations[JDB_MIN_AVAILABLE_KEY] = job_annotations[JDB_MIN_AVAILABLE_KEY]
    elif JDB_MAX_UNAVAILABLE_KEY in job_annotations:
        annotations[JDB_MAX_UNAVAILABLE_KEY] = job_annotations[JDB_MAX_UNAVAILABLE_KEY]
    labels = dict(template_meta.get("labels") or {})
    labels.update(
        {
            TASK_INDEX_KEY: str(index),
            JOB_NAME_KEY: name,
            TASK_SPEC_KEY: key,
            JOB_NAMESPACE_KEY: meta.get("namespace", ""),
            QUEUE_NAME_KEY: queue,
        }
    )
    job_labels = meta.get("labels") or {}
    for copied in (PREEMPTABLE_KEY, COOLDOWN_KEY):
        if copied in job_labels:
            labels[copied] = job_labels[copied]
    if job_forwarding:
        annotations[FORWARDING_KEY] = "true"
        labels[FORWARDING_KEY] = "true"
    partition = task.get("partitionPolicy")
    if partition is not None:
        size = int(partition.get("partitionSize") or 0)
        labels[PARTITION_ID_KEY] = str(index // size if size > 0 else 0)
    pod["metadata"]["labels"] = labels
    pod["metadata"]["annotations"] = annotations
    if not run_plugins:
        return pod
    status = dict(job.get("status") or {})
    status["version"] = version
    status["retryCount"] = retry_count
    return registry.on_pod_create(pod, {**job, "status": status})
