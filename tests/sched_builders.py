"""Builders for the scheduler tests: Kubernetes objects as dicts, a cache fed with them, a session.

- `node()`, `queue()`, `podgroup()`, `pod()`, `priority_class()` build the objects the
  scheduler folds (Volcano's webhook defaults where tests do not care: queue weight 1,
  state Open, reclaimable);
- `Cluster` folds objects into a `SchedulerCache` as watch records with increasing seq and
  runs sessions on it (`session()`), optionally applying the session's own outputs (the
  way the service does) and confirming binds with pod records (`land_binds()`);
- `outs_of()` picks outputs by type.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from projections.scheduler import SchedulerCache
from statemachines import outputs as o
from statemachines.scheduler.config import DEFAULT_CONFIG, SchedulerConfig, config_from_dict
from statemachines.scheduler.session import SessionResult, run_session

NS = "default"
T0 = "2026-01-01T00:00:00Z"
GI = 1024**3


def node(name: str, cpu: str = "4", memory: str = "16Gi", pods: str = "110", *, labels: dict | None = None,
         taints: list | None = None, unschedulable: bool = False, extra: dict | None = None) -> dict:
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
    spec: dict[str, Any] = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels or {"kubernetes.io/hostname": name},
                     "creationTimestamp": T0},
        "spec": spec,
        "status": {"allocatable": allocatable, "capacity": allocatable},
    }


def queue(name: str = "default", weight: int = 1, *, state: str = "Open", capability: dict | None = None,
          guarantee: dict | None = None, reclaimable: bool = True, priority: int = 0, parent: str = "",
          created: str = T0, allocated: dict | None = None) -> dict:
    spec: dict[str, Any] = {"weight": weight, "reclaimable": reclaimable}
    if capability:
        spec["capability"] = capability
    if guarantee:
        spec["guarantee"] = {"resource": guarantee}
    if priority:
        spec["priority"] = priority
    if parent:
        spec["parent"] = parent
    status: dict[str, Any] = {"state": state}
    if allocated is not None:
        status["allocated"] = allocated
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name, "uid": f"uid-q-{name}", "creationTimestamp": created},
        "spec": spec,
        "status": status,
    }


def podgroup(name: str, min_member: int, *, queue: str = "default", phase: str = "", min_resources: dict | None = None,
             min_task_member: dict | None = None, priority_class: str = "", owner: str | None = None,
             namespace: str = NS, created: str = T0, conditions: list | None = None) -> dict:
    spec: dict[str, Any] = {"minMember": min_member, "queue": queue}
    if min_resources is not None:
        spec["minResources"] = min_resources
    if min_task_member:
        spec["minTaskMember"] = min_task_member
    if priority_class:
        spec["priorityClassName"] = priority_class
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": f"uid-pg-{name}", "creationTimestamp": created}
    if owner:
        meta["ownerReferences"] = [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": owner,
                                    "uid": f"uid-job-{owner}", "controller": True}]
    status: dict[str, Any] = {}
    if phase:
        status["phase"] = phase
    if conditions:
        status["conditions"] = conditions
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": meta, "spec": spec,
            "status": status}


def pod(name: str, group: str | None, *, cpu: str | None = "1", memory: str | None = "1Gi", role: str = "",
        node: str = "", phase: str = "Pending", priority: int | None = None, namespace: str = NS,
        created: str = T0, annotations: dict | None = None, labels: dict | None = None,
        node_selector: dict | None = None, affinity: dict | None = None, tolerations: list | None = None,
        init_containers: list | None = None, extra: dict | None = None, deleting: bool = False,
        nominated: str = "", preemption_policy: str = "", priority_class: str = "", scheduler: str = "volcano",
        uid: str | None = None, gates: list | None = None) -> dict:
    requests: dict[str, Any] = {}
    if cpu is not None:
        requests["cpu"] = cpu
    if memory is not None:
        requests["memory"] = memory
    requests.update(extra or {})
    ann = dict(annotations or {})
    if group:
        ann["scheduling.k8s.io/group-name"] = group
    if role:
        ann["volcano.sh/task-spec"] = role
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "main", "image": "busybox", "resources": {"requests": requests} if requests else {}}],
    }
    if node:
        spec["nodeName"] = node
    if priority is not None:
        spec["priority"] = priority
    if node_selector:
        spec["nodeSelector"] = node_selector
    if affinity:
        spec["affinity"] = affinity
    if tolerations:
        spec["tolerations"] = tolerations
    if init_containers:
        spec["initContainers"] = init_containers
    if preemption_policy:
        spec["preemptionPolicy"] = preemption_policy
    if priority_class:
        spec["priorityClassName"] = priority_class
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}", "annotations": ann,
                            "creationTimestamp": created, "labels": labels or {}}
    if deleting:
        meta["deletionTimestamp"] = T0
    status: dict[str, Any] = {"phase": phase}
    if nominated:
        status["nominatedNodeName"] = nominated
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def priority_class(name: str, value: int, *, default: bool = False) -> dict:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}, "value": value,
            "globalDefault": default}


def record(obj: dict, event: str = "ADDED", time: str | None = None) -> bytes:
    rec: dict[str, Any] = {"type": event, "object": obj}
    if time:
        rec["time"] = time
    return json.dumps(rec).encode()


def outs_of(outputs: Iterable[o.Output], kind: type) -> list:
    return [x for x in outputs if isinstance(x, kind)]


class Cluster:
    """A scheduler cache fed object by object, and sessions run on it."""

    def __init__(self, *objects: dict, config: SchedulerConfig | dict | None = None, time: str = "2026-01-01T00:01:00Z") -> None:
        self.cache = SchedulerCache()
        self.seq = 0
        self.number = 0
        self.time = time
        self.log: list[bytes] = []
        if isinstance(config, dict):
            config = config_from_dict(config)
        self.config = config or DEFAULT_CONFIG
        self.objects: dict[tuple[str, str], dict] = {}
        for obj in objects:
            self.add(obj)

    def add(self, obj: dict, event: str = "ADDED") -> None:
        self.seq += 1
        data = record(obj, event, self.time)
        self.log.append(data)
        self.cache.apply(self.seq, data)
        meta = obj["metadata"]
        key = (obj["kind"], f"{meta.get('namespace', '')}/{meta['name']}")
        if event == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = obj

    def update(self, obj: dict) -> None:
        self.add(obj, "MODIFIED")

    def get(self, kind: str, name: str, namespace: str = NS) -> dict:
        return self.objects[(kind, f"{namespace if kind not in ('Node', 'Queue', 'PriorityClass') else ''}/{name}")]

    def session(self, *, apply: bool = True) -> SessionResult:
        self.number += 1
        result = run_session(self.cache.snapshot(), self.config, seq=self.cache.position, number=self.number,
                             time=self.time)
        if apply:
            self.cache.apply_outputs(result.outputs)
        return result

    def indexed_and_scanned(self) -> tuple[SessionResult, SessionResult]:
        """One session on the current snapshot with the node index and one scanning every node."""
        snapshot = self.cache.snapshot()
        fast = run_session(snapshot, self.config, seq=1, number=1, time="t")
        slow = run_session(snapshot, self.config, seq=1, number=1, time="t", index_nodes=False)
        assert [(b.name, b.node) for b in fast.binds] == [(b.name, b.node) for b in slow.binds]
        return fast, slow

    def land_binds(self, result: SessionResult, phase: str = "Pending") -> None:
        """What the actuator and kubelet would do: the bound pods show their node."""
        for bind in result.binds:
            obj = json.loads(json.dumps(self.get("Pod", bind.name, bind.namespace)))
            obj["spec"]["nodeName"] = bind.node
            obj["status"]["phase"] = phase
            self.update(obj)

    def write_statuses(self, result: SessionResult) -> None:
        """What the actuator would do with status writes: the objects come back with them."""
        for out in result.outputs:
            if isinstance(out, o.UpdatePodGroupStatus):
                ns = out.job.split("/", 1)[0]
                obj = json.loads(json.dumps(self.get("PodGroup", out.name, ns)))
                obj["status"] = out.status
                self.update(obj)
            elif isinstance(out, o.UpdateQueueStatus) and out.allocated is not None:
                obj = json.loads(json.dumps(self.get("Queue", out.queue)))
                obj.setdefault("status", {})["allocated"] = out.allocated
                self.update(obj)
