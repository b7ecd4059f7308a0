"""A pod as the scheduler sees it: its request (`Resreq`), status, role, priority and placement.

Computed once per pod record (`pkg/scheduler/api/job_info.go` NewTaskInfo, `pod_info.go`
GetPodResourceRequest): the request sums the containers, takes the maximum with the init
containers (restartable init containers, i.e. sidecars, run beside everything), adds `pods: 1`
and the overhead; the k8s scoring's request with its non-zero defaults is kept beside it.
"""

from __future__ import annotations

import re
from typing import Any

from statemachines.scheduler import objects as o
from statemachines.scheduler.constraints import compile_constraints
from statemachines.scheduler.images import pod_images
from statemachines.scheduler.labels import requirements, selector_terms
from statemachines.scheduler.model import (
    DEFAULT_MEMORY,
    DEFAULT_MILLI_CPU,
    GROUP_NAME,
    PREEMPTABLE,
    QUEUE_ALLOCATION_GATE,
    TASK_PRIORITY,
    TASK_SPEC,
    _parse_bool,
    _res_dump,
    task_status,
)
from statemachines.scheduler.resources import PODS, Res, from_resource_list
from statemachines.scheduler.volumelimits import inline_volumes
from statemachines.scheduler.volumes import pod_claims
from statemachines.scheduler.workloads import controller_of


class Placement:
    """What a task needs of a node beyond resources: the static predicate inputs.

    Tasks of one role of one job share it (same template), so static predicate results are
    cached per (placement, node)."""

    __slots__ = ("node_selector", "terms", "tolerations", "preferred", "key")

    def __init__(self, spec: o.PodSpec) -> None:
        self.node_selector = tuple(sorted((spec.node_selector or {}).items()))
        affinity = spec.affinity.node_affinity if spec.affinity else None
        required = affinity.required_during_scheduling_ignored_during_execution if affinity else None
        self.terms = selector_terms(required) if required is not None else None
        self.tolerations = tuple((t.key, t.operator, t.value, t.effect) for t in spec.tolerations or ())
        # preferred node affinity terms: (weight, (matchExpressions, matchFields)), for nodeorder's score
        self.preferred = tuple(
            (term.weight, (requirements(term.preference.match_expressions), requirements(term.preference.match_fields)))
            for term in (affinity.preferred_during_scheduling_ignored_during_execution if affinity else None) or ()
        )
        self.key = (self.node_selector, self.terms, self.tolerations, self.preferred)




def _requests(spec: o.PodSpec, where: str) -> tuple[Res, float, float]:
    """`GetPodResourceRequest` (containers, sidecar-aware init containers, pods: 1, overhead)
    plus the k8s scoring request with non-zero defaults (cpu, memory)."""
    total = Res()
    nz_cpu = nz_mem = 0.0
    for i, c in enumerate(spec.containers or ()):
        req = from_resource_list(c.resources.requests, f"{where}.containers[{i}].resources.requests")
        total.add(req)
        reqs = c.resources.requests or {}
        nz_cpu += req.cpu if "cpu" in reqs else DEFAULT_MILLI_CPU
        nz_mem += req.mem if "memory" in reqs else DEFAULT_MEMORY
    sidecars = Res()
    init_max = Res()
    nz_sidecar_cpu = nz_sidecar_mem = nz_init_cpu = nz_init_mem = 0.0
    for i, c in enumerate(spec.init_containers or ()):
        req = from_resource_list(c.resources.requests, f"{where}.initContainers[{i}].resources.requests")
        reqs = c.resources.requests or {}
        c_cpu = req.cpu if "cpu" in reqs else DEFAULT_MILLI_CPU
        c_mem = req.mem if "memory" in reqs else DEFAULT_MEMORY
        if c.restart_policy == "Always":
            total.add(req)
            sidecars.add(req)
            effective = sidecars.copy()
            nz_cpu += c_cpu
            nz_mem += c_mem
            nz_sidecar_cpu += c_cpu
            nz_sidecar_mem += c_mem
            e_cpu, e_mem = nz_sidecar_cpu, nz_sidecar_mem
        else:
            effective = req.plus(sidecars)
            e_cpu, e_mem = c_cpu + nz_sidecar_cpu, c_mem + nz_sidecar_mem
        _set_max(init_max, effective)
        nz_init_cpu = max(nz_init_cpu, e_cpu)
        nz_init_mem = max(nz_init_mem, e_mem)
    _set_max(total, init_max)
    total.sc[PODS] = total.sc.get(PODS, 0.0) + 1
    nz_cpu = max(nz_cpu, nz_init_cpu)
    nz_mem = max(nz_mem, nz_init_mem)
    if spec.overhead:
        overhead = from_resource_list(spec.overhead, f"{where}.overhead")
        total.add(overhead)
        nz_cpu += overhead.cpu
        nz_mem += overhead.mem
    return total, nz_cpu, nz_mem


def _set_max(target: Res, other: Res) -> None:
    target.cpu = max(target.cpu, other.cpu)
    target.mem = max(target.mem, other.mem)
    for name, value in other.sc.items():
        if name not in target.sc or value > target.sc[name]:
            target.sc[name] = value


_INDEX = re.compile(r"\+?[0-9]+\Z")


def _name_index(name: str) -> int | None:
    """The task-order fallback index: the integer after the last '-' (>= 3 dash-separated parts)."""
    parts = name.split("-")
    if len(parts) < 3 or not _INDEX.match(parts[-1]):
        return None
    return int(parts[-1])


class TaskFact:
    """A pod as a scheduler task."""

    __slots__ = (
        "key",
        "namespace",
        "name",
        "uid",
        "group",
        "role",
        "priority",
        "req",
        "best_effort",
        "nz_cpu",
        "nz_mem",
        "preemptable",
        "status",
        "node",
        "nominated",
        "creation",
        "preemption_never",
        "gated",
        "only_volcano_gate",
        "placement",
        "priority_class",
        "index",
        "scheduler_name",
        "scalars",
        "score_sig",
        "scheduled_condition",
        "labels",
        "constraints",
        "unevaluated",
        "images",
        "containers",
        "claims",
        "inline_volumes",
        "controller",
    )

    def __init__(self, pod: o.Pod) -> None:
        meta, spec = pod.metadata, pod.spec
        # not named `annotations`: CPython 3.11 compiles `x.get(...)` without its method-call fast
        # path when a local shares its name with a module-level import (`from __future__ import annotations`)
        notes = meta.annotations or {}
        labels = meta.labels or {}
        self.namespace = meta.namespace
        self.name = meta.name
        self.key = f"{meta.namespace}/{meta.name}"
        self.uid = meta.uid or self.key
        group = notes.get(GROUP_NAME, "")
        self.group = f"{meta.namespace}/{group}" if group else ""
        self.role = notes.get(TASK_SPEC) or labels.get(TASK_SPEC) or ""
        priority = spec.priority if spec.priority is not None else 1
        raw_priority = notes.get(TASK_PRIORITY)
        if raw_priority is not None:
            try:
                value = int(raw_priority)
                if -(2**31) <= value < 2**31:
                    priority = value
            except ValueError:
                pass
        self.priority = priority
        self.req, self.nz_cpu, self.nz_mem = _requests(spec, f"Pod {self.key} spec")
        self.best_effort = self.req.is_empty()
        preemptable = True
        for source in (notes, labels):
            if PREEMPTABLE in source:
                parsed = _parse_bool(source[PREEMPTABLE])
                preemptable = bool(parsed)
                break
        self.preemptable = preemptable
        self.node = spec.node_name
        self.status = task_status(pod.status.phase, spec.node_name, meta.deletion_timestamp is not None)
        self.nominated = pod.status.nominated_node_name
        self.creation = meta.creation_timestamp or ""
        self.preemption_never = spec.preemption_policy == "Never"
        gates = spec.scheduling_gates or ()
        self.gated = bool(gates)
        self.only_volcano_gate = len(gates) == 1 and gates[0].name == QUEUE_ALLOCATION_GATE
        self.placement = Placement(spec)
        self.priority_class = spec.priority_class_name
        self.index = _name_index(meta.name)
        self.scheduler_name = spec.scheduler_name
        self.scalars = tuple(sorted(self.req.sc.items()))
        self.images, self.containers = pod_images(spec)  # ImageLocality's
        self.claims = pod_claims(meta.name, spec)  # VolumeZone's, VolumeBinding's and NodeVolumeLimits'
        self.inline_volumes = inline_volumes(spec)  # NodeVolumeLimits'
        self.score_sig = (self.req.key(), self.nz_cpu, self.nz_mem, self.images, self.containers)
        self.labels = labels
        self.constraints, self.unevaluated = compile_constraints(spec, meta.namespace, labels)
        self.controller = controller_of(meta)  # a ReplicationController, ReplicaSet or StatefulSet: default spreading
        self.scheduled_condition: tuple[str, str] | None = None  # PodScheduled=False (reason, message)
        for cond in pod.status.conditions or ():
            if cond.type == "PodScheduled" and cond.status == "False":
                self.scheduled_condition = (cond.reason, cond.message)

    def with_state(self, status: str, node: str) -> TaskFact:
        """A copy in an assumed state (Binding after our BindPod, Releasing after our EvictPod)."""
        clone = object.__new__(TaskFact)
        for slot in TaskFact.__slots__:
            setattr(clone, slot, getattr(self, slot))
        clone.status = status
        clone.node = node
        return clone

    def dump(self) -> dict[str, Any]:
        return {
            "uid": self.uid,
            "group": self.group,
            "role": self.role,
            "priority": self.priority,
            "request": _res_dump(self.req),
            "status": self.status,
            "node": self.node,
            "nominated": self.nominated,
            "preemptable": self.preemptable,
        }
