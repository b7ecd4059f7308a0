"""The Services, ReplicationControllers, ReplicaSets and StatefulSets that give a pod its
system-default topology spreading, and the constraints built from them.

Volcano's nodeorder plugin configures kube-scheduler's PodTopologySpread score with
`defaultingType: System` (pkg/scheduler/plugins/nodeorder/nodeorder.go). A pod without
topologySpreadConstraints of its own then gets kube-scheduler's system-default constraints
(`systemDefaultConstraints`, plugins/podtopologyspread/plugin.go: ScheduleAnyway on
`kubernetes.io/hostname` with maxSkew 3 and on `topology.kubernetes.io/zone` with maxSkew 5),
whose selector is `helper.DefaultSelector` (plugins/helper/spread.go):

- the selectors of the Services of the pod's namespace that select it (a Service without a
  selector selects nothing), merged into one label set;
- then, when the pod's controller (its owner reference with `controller: true`) is a
  `v1` ReplicationController of that name in the pod's namespace, its selector merged in too;
  when it is an `apps/v1` ReplicaSet or StatefulSet, the requirements of its label selector added
  (a nil selector adds nothing, nor does one that does not parse);
- an empty result: no default constraints.

Volcano's scheduler cache lists the four kinds (`informerFactory` in pkg/scheduler/cache/cache.go,
the ReplicationControllers, ReplicaSets and StatefulSets under the WorkLoadSupport gate, on by
default). The facts here are folded by the scheduler cache; `Workloads` indexes a snapshot's
for one session.
"""

from __future__ import annotations

from statemachines.scheduler import objects as o
from statemachines.scheduler.labels import Selector, compile_selector

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
# kube-scheduler's systemDefaultConstraints: (topologyKey, maxSkew), both ScheduleAnyway
SYSTEM_DEFAULT = ((HOSTNAME, 3), (ZONE, 5))
# the controllers DefaultSelector reads, by (apiVersion's group/version, kind)
CONTROLLER_KINDS = {("v1", "ReplicationController"), ("apps/v1", "ReplicaSet"), ("apps/v1", "StatefulSet")}
_OPERATORS = {"In": True, "NotIn": True, "Exists": False, "DoesNotExist": False}  # operator -> needs values


def workload_key(obj) -> str:
    """`<Kind>/<namespace>/<name>`: one map holds the four kinds."""
    meta = obj.metadata
    return f"{type(obj).__name__}/{meta.namespace}/{meta.name}"


def workload_fact(obj) -> tuple[str, str, object]:
    """(kind, namespace, selector) of a Service, ReplicationController, ReplicaSet or StatefulSet.

    A Service's or ReplicationController's selector is its label map as sorted (key, value) pairs,
    None when it has none; a ReplicaSet's or StatefulSet's the requirements of its label selector
    (`metav1.LabelSelectorAsSelector`), None when it is nil or does not parse (either adds nothing)."""
    kind = type(obj).__name__
    selector: object
    if isinstance(obj, (o.Service, o.ReplicationController)):
        raw = obj.spec.selector
        selector = tuple(sorted(raw.items())) if raw else None
    else:
        selector = label_selector(obj.spec.selector)
    return kind, obj.metadata.namespace, selector


def label_selector(selector: o.LabelSelector | None) -> Selector | None:
    """A workload's label selector as requirements; None for a nil one or one `LabelSelectorAsSelector`
    refuses (an unknown operator, In/NotIn without values, Exists/DoesNotExist with values)."""
    if selector is None:
        return None
    for r in selector.match_expressions or ():
        needs = _OPERATORS.get(r.operator)
        if needs is None or needs != bool(r.values):
            return None
    return compile_selector(selector)


def controller_of(meta: o.Meta) -> tuple[str, str, str] | None:
    """(apiVersion, kind, name) of the pod's controller, if DefaultSelector reads its kind
    (`metav1.GetControllerOfNoCopy`: the first owner reference with `controller: true`)."""
    for ref in meta.owner_references or ():
        if ref.get("controller") is True:
            api, kind = str(ref.get("apiVersion") or ""), str(ref.get("kind") or "")
            if (api, kind) in CONTROLLER_KINDS:
                return api, kind, str(ref.get("name") or "")
            return None
    return None


class Workloads:
    """A snapshot's workload facts, indexed for one session: `selector(fact)` is the pod's
    DefaultSelector, None when empty (computed once per pod)."""

    def __init__(self, facts: dict[str, tuple[str, str, object]]) -> None:
        # namespace -> a Service selector's first (key, value) -> the selectors: a pod is matched against
        # the selectors one of its own labels anchors, not every Service of its namespace
        self.services: dict[str, dict[tuple[str, str], list[tuple[tuple[str, str], ...]]]] = {}
        self.controllers: dict[tuple[str, str, str], object] = {}  # (kind, namespace, name) -> selector
        for key in sorted(facts):
            kind, namespace, selector = facts[key]
            if kind == "Service":
                if selector is not None:
                    pairs: tuple[tuple[str, str], ...] = selector  # type: ignore[assignment]  # a Service's: label pairs (workload_fact)
                    self.services.setdefault(namespace, {}).setdefault(pairs[0], []).append(pairs)
            else:
                self.controllers[(kind, namespace, key.split("/", 2)[2])] = selector
        self.any = bool(self.services or self.controllers)
        self._memo: dict[str, Selector | None] = {}

    def selector(self, fact) -> Selector | None:
        if not self.any:
            return None
        memo = self._memo
        if fact.uid in memo:
            return memo[fact.uid]
        labels = fact.labels
        merged: dict[str, str] = {}
        services = self.services.get(fact.namespace)
        if services:
            for pair in labels.items():
                for selector in services.get(pair, ()):
                    if all(labels.get(k) == v for k, v in selector):
                        merged.update(selector)
        extra: Selector = ()
        controller = fact.controller
        if controller is not None:
            _, kind, name = controller
            found = self.controllers.get((kind, fact.namespace, name), ())
            if kind == "ReplicationController":
                if found:
                    merged.update(found)  # type: ignore[call-overload]  # an RC's selector: label pairs (workload_fact)
            elif found:
                extra = found  # type: ignore[assignment]  # a ReplicaSet's or StatefulSet's: a Selector (workload_fact)
        result: Selector | None = tuple((k, "In", (v,)) for k, v in sorted(merged.items())) + extra
        if not result:
            result = None
        memo[fact.uid] = result
        return result
