"""The PodGroup of a vcjob (`createOrUpdatePodGroup`, `calcPGMinResources`), as pure functions.

- `build_podgroup(job)`: the PodGroup the controller creates (`<job>-<uid>`,
  job labels/annotations copied wholesale, minMember, minTaskMember, queue,
  priorityClassName, minResources, networkTopology, subGroupPolicy);
- `update_podgroup(pg, job)`: the PodGroup after the controller's update rule,
  or None when nothing differs (labels and annotations are never updated);
- `min_resources(job)`: Kubernetes quota usage of the pods needed to reach
  `spec.minAvailable`, highest task priority first.

Task priorities come from PriorityClass objects, which the domain cannot look
up: pass `priorities` (PriorityClass name -> value); unknown names count 0.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from statemachines.admission.quantity import Quantity, add_lists, parse_list, print_list
from statemachines.admission.resources import pod_quota_usage
from statemachines.manifests.pod import PARTITION_ID_KEY, group_name
from statemachines.plugins.base import TASK_SPEC_KEY, owner_reference


def min_task_member(task: dict[str, Any]) -> int:
    """`minAvailable`; else minPartitions*partitionSize when both are non-zero; else replicas."""
    if task.get("minAvailable") is not None:
        return int(task["minAvailable"])
    partition = task.get("partitionPolicy") or {}
    minimum, size = int(partition.get("minPartitions") or 0), int(partition.get("partitionSize") or 0)
    if minimum and size:
        return minimum * size
    return int(task.get("replicas") or 0)


def _times(usage: dict[str, Quantity], count: int) -> dict[str, Quantity]:
    total: dict[str, Quantity] = {}
    for _ in range(max(count, 0)):  # repeated Add, as upstream (keeps the first operand's format)
        total = add_lists(total, usage)
    return total


def min_resources(job: dict[str, Any], priorities: Mapping[str, int] | None = None) -> dict[str, str]:
    """`calcPGMinResources`: the summed quota usage of the first `spec.minAvailable` pods."""
    priorities = priorities or {}
    spec = job.get("spec") or {}
    tasks = list(spec.get("tasks") or [])
    job_min = int(spec.get("minAvailable") or 0)
    total_min = sum(
        int(t["minAvailable"]) if t.get("minAvailable") is not None else int(t.get("replicas") or 0) for t in tasks
    )
    ordered = sorted(
        tasks,
        key=lambda t: -int(priorities.get(((t.get("template") or {}).get("spec") or {}).get("priorityClassName", ""), 0)),
    )

    def usage(task: dict[str, Any]) -> dict[str, Quantity]:
        return pod_quota_usage(((task.get("template") or {}).get("spec")) or {})

    result: dict[str, Quantity] = {}
    if job_min < total_min:
        count = job_min
        for task in ordered:
            replicas = int(task.get("replicas") or 0)
            if count <= replicas:
                result = add_lists(result, _times(usage(task), count))
                break
            result = add_lists(result, _times(usage(task), replicas))
            count -= replicas
        return print_list(result)
    pods = 0
    for task in ordered:
        if task.get("minAvailable") is None:
            continue
        valid = min(int(task["minAvailable"]), job_min - pods)
        result = add_lists(result, _times(usage(task), valid))
        pods += valid
        if pods >= job_min:
            return print_list(result)
    left_count = job_min - pods
    for task in ordered:
        left = int(task.get("replicas") or 0)
        if task.get("minAvailable") is not None:
            if int(task["minAvailable"]) == left:
                continue
            left -= int(task["minAvailable"])
        take = left if left_count >= left else left_count
        result = add_lists(result, _times(usage(task), take))
        left_count -= take
        if left_count <= 0:
            break
    return print_list(result)


def _network_topology(spec: dict[str, Any] | None, *, both: bool) -> dict[str, Any] | None:
    if spec is None:
        return None
    result: dict[str, Any] = {"mode": spec.get("mode", "")}
    if both:
        if spec.get("highestTierAllowed") is not None:
            result["highestTierAllowed"] = spec["highestTierAllowed"]
        if spec.get("highestTierName"):
            result["highestTierName"] = spec["highestTierName"]
    elif spec.get("highestTierAllowed") is not None:
        result["highestTierAllowed"] = spec["highestTierAllowed"]
    elif spec.get("highestTierName"):
        result["highestTierName"] = spec["highestTierName"]
    return result


def sub_group_policy(task: dict[str, Any]) -> dict[str, Any]:
    """The PodGroup `subGroupPolicy` entry of a task with a partitionPolicy."""
    partition = task.get("partitionPolicy") or {}
    entry: dict[str, Any] = {
        "name": task.get("name", ""),
        "subGroupSize": int(partition.get("partitionSize") or 0),
        "minSubGroups": int(partition.get("minPartitions") or 0),
        "labelSelector": {"matchLabels": {TASK_SPEC_KEY: task.get("name", "")}},
        "matchLabelKeys": [PARTITION_ID_KEY],
    }
    topology = _network_topology(partition.get("networkTopology"), both=True)
    if topology is not None:
        entry["networkTopology"] = topology
    return entry


def build_podgroup(job: dict[str, Any], priorities: Mapping[str, int] | None = None) -> dict[str, Any]:
    """The PodGroup the controller creates for `job` (status left empty for the scheduler)."""
    meta = job.get("metadata") or {}
    spec = job.get("spec") or {}
    tasks = list(spec.get("tasks") or [])
    pg_meta: dict[str, Any] = {"name": group_name(job), "namespace": meta.get("namespace", "")}
    if meta.get("annotations"):
        pg_meta["annotations"] = dict(meta["annotations"])
    if meta.get("labels"):
        pg_meta["labels"] = dict(meta["labels"])
    pg_meta["ownerReferences"] = [owner_reference(job)]
    pg_spec: dict[str, Any] = {
        "minMember": int(spec.get("minAvailable") or 0),
        "minTaskMember": {t.get("name", ""): min_task_member(t) for t in tasks},
        "queue": spec.get("queue", ""),
        "minResources": min_resources(job, priorities),
    }
    if spec.get("priorityClassName"):
        pg_spec["priorityClassName"] = spec["priorityClassName"]
    topology = _network_topology(spec.get("networkTopology"), both=False)
    if topology is not None:
        pg_spec["networkTopology"] = topology
    policies = [sub_group_policy(t) for t in tasks if t.get("partitionPolicy") is not None]
    if policies:
        pg_spec["subGroupPolicy"] = policies
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": pg_meta,
        "spec": pg_spec,
    }


def update_podgroup(
    podgroup: dict[str, Any], job: dict[str, Any], priorities: Mapping[str, int] | None = None
) -> dict[str, Any] | None:
    """The existing PodGroup after `shouldUpdateExistingPodGroup`, or None if unchanged."""
    new = copy.deepcopy(podgroup)
    spec = new.setdefault("spec", {})
    job_spec = job.get("spec") or {}
    changed = False
    if spec.get("priorityClassName", "") != job_spec.get("priorityClassName", ""):
        spec["priorityClassName"] = job_spec.get("priorityClassName", "")
        changed = True
    wanted = min_resources(job, priorities)
    have = {k: str(q) for k, q in parse_list(spec.get("minResources")).items()}
    if int(spec.get("minMember") or 0) != int(job_spec.get("minAvailable") or 0) or have != wanted:
        spec["minMember"] = int(job_spec.get("minAvailable") or 0)
        spec["minResources"] = wanted
        changed = True
    members = spec.get("minTaskMember")
    if members is None:
        members, changed = {}, True
    members = dict(members)
    for task in job_spec.get("tasks") or []:
        count = min_task_member(task)
        if members.get(task.get("name", "")) != count:
            members[task.get("name", "")] = count
            changed = True
    spec["minTaskMember"] = members
    old_policies = {p.get("name"): p for p in spec.get("subGroupPolicy") or []}
    new_policies, policies_changed = [], False
    for task in job_spec.get("tasks") or []:
        if task.get("partitionPolicy") is None:
            policies_changed |= task.get("name") in old_policies
            continue
        entry = sub_group_policy(task)
        new_policies.append(entry)
        policies_changed |= old_policies.get(task.get("name")) != entry
    if policies_changed:
        spec["subGroupPolicy"] = new_policies
        changed = True
    return new if changed else None
