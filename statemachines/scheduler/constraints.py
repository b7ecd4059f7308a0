"""What a pod asks of the pods around it: required pod affinity and anti-affinity, hard topology
spread constraints and host ports (filters); preferred pod affinity and anti-affinity and
ScheduleAnyway spread constraints (nodeorder's scores), compiled once per pod record; and the
first field that affects placement but that vcbus's scheduler does not evaluate.

The shapes follow kube-scheduler's (`pkg/scheduler/framework/types.go` AffinityTerm,
`plugins/podtopologyspread/common.go` topologySpreadConstraint, `plugins/nodeports`): a
term's namespaces default to the pod's own (neither `namespaces` nor `namespaceSelector`), an
empty namespaceSelector means every namespace, a non-empty one the namespaces whose labels it
matches (besides those listed), matchLabelKeys/mismatchLabelKeys add the pod's own label values
to the selector.
"""

from __future__ import annotations

import re

from statemachines.scheduler import objects as o
from statemachines.scheduler.labels import Selector, compile_selector, matches, with_label_keys
from statemachines.scheduler.model import PENDING


class Term:
    """One pod (anti-)affinity term (kube-scheduler's `framework.AffinityTerm`).

    A pod matches it when its labels match `selector` and its namespace is one of `namespaces`
    (None: every namespace, an empty namespaceSelector) or has labels `ns_selector` matches
    (None: a nil namespaceSelector, which matches no namespace)."""

    __slots__ = ("namespaces", "ns_selector", "selector", "topology_key", "key")

    def __init__(self, namespaces: frozenset[str] | None, selector: Selector | None, topology_key: str,
                 ns_selector: Selector | None = None) -> None:
        self.namespaces = namespaces
        self.ns_selector = ns_selector
        self.selector = selector
        self.topology_key = topology_key
        self.key = (None if namespaces is None else tuple(sorted(namespaces)), selector, topology_key, ns_selector)

    def matches(self, namespace: str, labels: dict[str, str], ns_labels: dict[str, dict[str, str]],
                missing: dict[str, str] | None = None) -> bool:
        """Whether a pod of `namespace` with `labels` matches, `ns_labels` holding each namespace's
        labels. A namespace without its Namespace object has the labels `missing`: None (it matches
        no namespaceSelector) for the incoming pod's own terms, whose selector kube-scheduler turns
        into the names of the namespaces it lists (`mergeAffinityTermNamespacesIfNotEmpty`); {} for
        a placed pod's terms, matched against the incoming pod's namespace labels
        (`GetNamespaceLabelsSnapshot`: no namespace, no labels)."""
        if self.namespaces is not None and namespace not in self.namespaces:
            if self.ns_selector is None:
                return False
            own = ns_labels.get(namespace, missing)
            if own is None or not matches(self.ns_selector, own):
                return False
        return matches(self.selector, labels)


class Spread:
    """One topology spread constraint (DoNotSchedule: a filter, ScheduleAnyway: a score)."""

    __slots__ = ("max_skew", "topology_key", "selector", "min_domains", "honor_affinity", "honor_taints", "key")

    def __init__(self, c: o.TopologySpreadConstraint, selector: Selector | None) -> None:
        self.max_skew = c.max_skew
        self.topology_key = c.topology_key
        self.selector = selector
        self.min_domains = c.min_domains if c.min_domains is not None else 1
        self.honor_affinity = (c.node_affinity_policy or "Honor") == "Honor"
        self.honor_taints = (c.node_taints_policy or "Ignore") == "Honor"
        self.key = (self.max_skew, self.topology_key, selector, self.min_domains, self.honor_affinity, self.honor_taints)


class Constraints:
    """The pod's inter-pod constraints (None on the task when it has none)."""

    __slots__ = ("affinity", "anti", "spread", "ports", "preferred", "soft_spread", "filtered")

    def __init__(self, affinity: tuple[Term, ...], anti: tuple[Term, ...], spread: tuple[Spread, ...],
                 ports: tuple[tuple[str, str, int], ...], preferred: tuple[tuple[int, Term], ...] = (),
                 soft_spread: tuple[Spread, ...] = ()) -> None:
        self.affinity = affinity
        self.anti = anti
        self.spread = spread
        self.ports = ports  # (hostIP, protocol, hostPort)
        # preferred terms as (weight, term): affinity's weights positive, anti-affinity's negated
        self.preferred = preferred
        self.soft_spread = soft_spread  # whenUnsatisfiable ScheduleAnyway
        self.filtered = bool(affinity or anti or spread or ports)  # a filter applies (not only scores)


def _terms(raw: list[o.PodAffinityTerm] | None, namespace: str, labels: dict[str, str]) -> tuple[Term, ...]:
    out = []
    for term in raw or ():
        ns_selector = compile_selector(term.namespace_selector)
        namespaces: frozenset[str] | None
        if ns_selector == ():
            namespaces = None  # an empty namespaceSelector: every namespace
        elif ns_selector is None and not term.namespaces:
            namespaces = frozenset((namespace,))  # neither: the pod's own namespace
        else:
            namespaces = frozenset(term.namespaces or ())
        selector = compile_selector(term.label_selector)
        selector = with_label_keys(selector, labels, term.match_label_keys, "In")
        selector = with_label_keys(selector, labels, term.mismatch_label_keys, "NotIn")
        out.append(Term(namespaces, selector, term.topology_key, ns_selector or None))
    return tuple(out)


def host_ports(spec: o.PodSpec) -> tuple[tuple[str, str, int], ...]:
    """The (hostIP, protocol, hostPort) a pod's restartable init containers (sidecars, which run as long as
    the pod) and containers claim (`GetHostPorts`, hostPort > 0)."""
    ports = []
    sidecars = [c for c in spec.init_containers or () if c.restart_policy == "Always"]
    for c in (*sidecars, *(spec.containers or ())):
        for p in c.ports or ():
            if p.host_port > 0:
                ports.append((p.host_ip or "0.0.0.0", p.protocol or "TCP", p.host_port))
    return tuple(ports)


_INDEX = re.compile(r"\[[0-9]+\]")


def unevaluated_counts(tasks, found=None) -> dict[str, int]:
    """Pending pods (task facts) held back by a field vcbus does not evaluate, per field with its
    list indexes dropped (`spec.volumes[].persistentVolumeClaim`): what /metrics counts. `found(fact)`
    names the field a session finds from other objects ("" if none), for a pod whose own record
    names none."""
    counts: dict[str, int] = {}
    for fact in tasks:
        if fact.status != PENDING:
            continue
        unevaluated = fact.unevaluated or (found(fact) if found is not None else "")
        if unevaluated:
            field = _INDEX.sub("[]", unevaluated.split(":", 1)[0])
            counts[field] = counts.get(field, 0) + 1
    return counts


def compile_constraints(spec: o.PodSpec, namespace: str, labels: dict[str, str]) -> tuple[Constraints | None, str]:
    """The pod's constraints, and the first placement field vcbus does not evaluate ("" if none)."""
    problems: list[str] = []
    affinity = spec.affinity
    pod_aff = affinity.pod_affinity if affinity else None
    pod_anti = affinity.pod_anti_affinity if affinity else None
    aff_terms: tuple[Term, ...] = ()
    anti_terms: tuple[Term, ...] = ()
    soft: list[tuple[int, Term]] = []
    for raw, sign in ((pod_aff, 1), (pod_anti, -1)):
        if raw is None:
            continue
        hard = _terms(raw.required_during_scheduling_ignored_during_execution, namespace, labels)
        if sign > 0:
            aff_terms = hard
        else:
            anti_terms = hard
        weighted = raw.preferred_during_scheduling_ignored_during_execution or ()
        terms = _terms([w.pod_affinity_term for w in weighted], namespace, labels)
        soft.extend((sign * w.weight, term) for w, term in zip(weighted, terms, strict=True) if w.weight)
    spread: list[Spread] = []
    soft_spread: list[Spread] = []
    for i, c in enumerate(spec.topology_spread_constraints or ()):
        if c.when_unsatisfiable not in ("DoNotSchedule", "ScheduleAnyway"):
            problems.append(f"spec.topologySpreadConstraints[{i}].whenUnsatisfiable: {c.when_unsatisfiable}")
            continue
        selector = with_label_keys(compile_selector(c.label_selector), labels, c.match_label_keys, "In")
        (spread if c.when_unsatisfiable == "DoNotSchedule" else soft_spread).append(Spread(c, selector))
    if spec.resource_claims:
        problems.append("spec.resourceClaims")
    if spec.resources is not None and spec.resources.requests:
        problems.append("spec.resources.requests")
    ports = host_ports(spec)
    constraints = None
    if aff_terms or anti_terms or spread or ports or soft or soft_spread:
        constraints = Constraints(aff_terms, anti_terms, tuple(spread), ports, tuple(soft), tuple(soft_spread))
    return constraints, problems[0] if problems else ""
