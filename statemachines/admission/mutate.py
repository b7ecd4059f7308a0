"""Job mutating admission (`/jobs/mutate`, webhook `mutatejob.volcano.sh`), CREATE only.

`job_patch(job)` returns Volcano's JSON Patch, operations in this order, each
only when its condition holds:

1. add `/spec/queue` = `default` when the queue is empty;
2. add `/spec/schedulerName` = the webhook's first scheduler name (`volcano`);
3. add `/spec/maxRetry` = 3 when it is 0 (an explicit 0 counts as unset);
4. replace `/spec/tasks` when a task changed: empty name -> `default<i>`,
   hostNetwork without dnsPolicy -> `ClusterFirstWithHostNet`, null
   minAvailable -> minPartitions*partitionSize (partitionPolicy with
   minPartitions > 0) or replicas, maxRetry 0 -> 3;
5. add `/spec/minAvailable` = the sum of the (defaulted) task minAvailable when 0;
6. replace `/spec/plugins` whenever plugins is non-null: svc added (`[]`) for
   tensorflow/mpi/pytorch/ray, ssh added for mpi.

`mutate_job(job)` applies that patch to a copy. Inputs are never modified.
"""

from __future__ import annotations

import copy
from typing import Any

DEFAULT_QUEUE = "default"
DEFAULT_SCHEDULER = "volcano"
DEFAULT_MAX_RETRY = 3
SVC_FRAMEWORKS = ("tensorflow", "mpi", "pytorch", "ray")


def _mutate_tasks(tasks: list[dict[str, Any]]) -> bool:
    patched = False
    for index, task in enumerate(tasks):
        if not task.get("name"):
            task["name"] = f"default{index}"
            patched = True
        pod_spec = (task.get("template") or {}).get("spec")
        if pod_spec is not None and pod_spec.get("hostNetwork") and not pod_spec.get("dnsPolicy"):
            pod_spec["dnsPolicy"] = "ClusterFirstWithHostNet"
            patched = True
        if task.get("minAvailable") is None:
            partition = task.get("partitionPolicy")
            if partition is not None and int(partition.get("minPartitions") or 0) > 0:
                task["minAvailable"] = int(partition["minPartitions"]) * int(partition.get("partitionSize") or 0)
            else:
                task["minAvailable"] = int(task.get("replicas") or 0)
            patched = True
        if not task.get("maxRetry"):
            task["maxRetry"] = DEFAULT_MAX_RETRY
            patched = True
    return patched


def _plugins(plugins: dict[str, Any]) -> dict[str, list[str]]:
    result = {name: list(args or []) for name, args in plugins.items()}
    if any(name in plugins for name in SVC_FRAMEWORKS) and "svc" not in result:
        result["svc"] = []
    if "mpi" in plugins and "ssh" not in result:
        result["ssh"] = []
    return dict(sorted(result.items()))  # Go marshals map keys sorted


def job_patch(job: dict[str, Any], *, scheduler_name: str = DEFAULT_SCHEDULER) -> list[dict[str, Any]]:
    """The JSON Patch the mutating webhook answers for a CREATE of `job`."""
    spec = copy.deepcopy(job.get("spec") or {})
    patch: list[dict[str, Any]] = []
    if not spec.get("queue"):
        patch.append({"op": "add", "path": "/spec/queue", "value": DEFAULT_QUEUE})
    if not spec.get("schedulerName"):
        patch.append({"op": "add", "path": "/spec/schedulerName", "value": scheduler_name})
    if not spec.get("maxRetry"):
        patch.append({"op": "add", "path": "/spec/maxRetry", "value": DEFAULT_MAX_RETRY})
    tasks = list(spec.get("tasks") or [])
    if _mutate_tasks(tasks):
        patch.append({"op": "replace", "path": "/spec/tasks", "value": tasks})
    if not spec.get("minAvailable"):
        total = sum(
            int(t["minAvailable"]) if t.get("minAvailable") is not None else int(t.get("replicas") or 0) for t in tasks
        )
        patch.append({"op": "add", "path": "/spec/minAvailable", "value": total})
    if spec.get("plugins") is not None:
        patch.append({"op": "replace", "path": "/spec/plugins", "value": _plugins(spec["plugins"])})
    return patch


def apply_patch(obj: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    """Apply `add`/`replace` operations on object members (all the job webhook emits) to a copy."""
    result = copy.deepcopy(obj)
    for op in patch:
        if op["op"] not in ("add", "replace"):
            raise ValueError(f"unsupported patch op {op['op']!r}")
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        target = result
        for part in parts[:-1]:
            target = target.setdefault(part, {})
        target[parts[-1]] = copy.deepcopy(op["value"])
    return result


def mutate_job(job: dict[str, Any], *, scheduler_name: str = DEFAULT_SCHEDULER) -> dict[str, Any]:
    """`job` with the mutating webhook's defaults applied (a new dict)."""
    return apply_patch(job, job_patch(job, scheduler_name=scheduler_name))
