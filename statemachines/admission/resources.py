"""Pod-level resource arithmetic: requests/limits of a pod spec and its ResourceQuota usage.

Restates `resourcehelper.PodRequests`/`PodLimits` (containers summed, init
containers as a maximum, restartable "sidecar" init containers added, overhead,
pod-level `spec.resources` overriding cpu/memory/hugepages) and the quota
evaluator's `PodUsageFunc`, which Volcano uses for PodGroup `minResources`.
The pod is built from a task template without Kubernetes defaulting, exactly
as upstream does.
"""

from __future__ import annotations

from typing import Any

from statemachines.admission.quantity import Quantity, add_lists, parse_list

_NATIVE_COMPUTE = ("cpu", "memory", "ephemeral-storage")


def is_native(name: str) -> bool:
    """`helper.IsNativeResource`: no domain, or a `kubernetes.io/` one."""
    return "/" not in name or "kubernetes.io/" in name


def max_lists(left: dict[str, Quantity], right: dict[str, Quantity]) -> dict[str, Quantity]:
    result = dict(left)
    for name, quantity in right.items():
        if name not in result or result[name] < quantity:
            result[name] = quantity
    return result


def pod_totals(spec: dict[str, Any], kind: str, *, pod_level: bool = True) -> dict[str, Quantity]:
    """`PodRequests`/`PodLimits` (`kind` = "requests"/"limits") of a pod built from `spec`.

    With `pod_level=False` this is `AggregateContainerRequests/Limits`: no
    overhead and no pod-level override.
    """
    total: dict[str, Quantity] = {}
    for container in spec.get("containers") or []:
        total = add_lists(total, parse_list((container.get("resources") or {}).get(kind)))
    sidecars: dict[str, Quantity] = {}
    init_max: dict[str, Quantity] = {}
    for container in spec.get("initContainers") or []:
        own = parse_list((container.get("resources") or {}).get(kind))
        if container.get("restartPolicy") == "Always":
            total = add_lists(total, own)
            sidecars = add_lists(sidecars, own)
            init_max = max_lists(init_max, sidecars)
        else:
            init_max = max_lists(init_max, add_lists(own, sidecars))
    total = max_lists(total, init_max)
    if not pod_level:
        return total
    overhead = parse_list(spec.get("overhead"))
    if kind == "requests":
        total = add_lists(total, overhead)
    else:
        total = add_lists(total, {n: q for n, q in overhead.items() if n in total})
    for name, quantity in parse_list((spec.get("resources") or {}).get(kind)).items():
        if name in ("cpu", "memory") or name.startswith("hugepages-"):
            total[name] = quantity
    return total


def pod_quota_usage(spec: dict[str, Any]) -> dict[str, Quantity]:
    """Volcano's `GetPodQuotaUsage`: the ResourceQuota usage of one pod, plus bare extended names."""
    requests, limits = pod_totals(spec, "requests"), pod_totals(spec, "limits")
    usage = {"count/pods": Quantity(1), "pods": Quantity(1)}
    for name in _NATIVE_COMPUTE:
        if name in requests:
            usage[name] = requests[name]
            usage[f"requests.{name}"] = requests[name]
        if name in limits:
            usage[f"limits.{name}"] = limits[name]
    for name, quantity in requests.items():
        if name.startswith("hugepages-"):
            usage[name] = quantity
            usage[f"requests.{name}"] = quantity
        elif not is_native(name) and not name.startswith("requests."):
            usage[f"requests.{name}"] = quantity
            usage[name] = quantity
    return usage
