"""PodTopologySpread's filter for whenUnsatisfiable DoNotSchedule (kube-scheduler
`pkg/scheduler/framework/plugins/podtopologyspread/filtering.go`), and the raw score of the
ScheduleAnyway constraints (`scoring.go`; nodeorder normalizes it) from the same counts.

Per constraint the domains are the values of its topology key on the eligible nodes: nodes
carrying every constraint's key and, under the default inclusion policies, matching the pod's
nodeSelector and required node affinity (nodeAffinityPolicy Honor) whatever their taints
(nodeTaintsPolicy Ignore). A domain's count is the pods of the pod's namespace matching the
selector, not being deleted, on its eligible nodes. A node fails when its domain's count, plus
one if the pod matches its own selector, exceeds the smallest domain's count by more than
maxSkew (the smallest is 0 while there are fewer domains than minDomains). Per-node match
counts are kept incrementally from the session's allocate events.

The score also applies kube-scheduler's system-default constraints to a pod without constraints of
its own, over the selector of the Services, ReplicationControllers, ReplicaSets and StatefulSets
that select it (`statemachines.scheduler.workloads`), as Volcano configures it (`defaultingType:
System`); the filter has none to apply (they are all ScheduleAnyway).
"""

from __future__ import annotations

import math
from typing import Callable

from statemachines.scheduler.constraints import Spread
from statemachines.scheduler.fiterrors import UNRESOLVABLE, UNSCHEDULABLE
from statemachines.scheduler.labels import matches
from statemachines.scheduler.objects import TopologySpreadConstraint
from statemachines.scheduler.plugins.interpod import Buckets, Placed
from statemachines.scheduler.workloads import HOSTNAME, SYSTEM_DEFAULT, Workloads

CONSTRAINTS = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL = CONSTRAINTS + " (missing required label)"


class NodeCounts:
    """Pods of one namespace matching one selector, per node index; an empty selector counts none
    (kube-scheduler's `countPodsMatchSelector`), though a pod matches it for its own +1. `nonzero`
    holds the indexes of the nodes with a count, so a domain's total costs the matching pods, not
    the nodes."""

    __slots__ = ("namespace", "selector", "nodes", "nonzero")

    def __init__(self, namespace: str, selector, size: int) -> None:
        self.namespace = namespace
        self.selector = selector
        self.nodes = [0] * size
        self.nonzero: set[int] = set()

    def add(self, index: int, delta: int) -> None:
        n = self.nodes[index] = self.nodes[index] + delta
        if n:
            self.nonzero.add(index)
        else:
            self.nonzero.discard(index)

    def matches(self, fact) -> bool:
        return bool(self.selector) and fact.namespace == self.namespace and matches(self.selector, fact.labels)


class TopologySpread:
    def __init__(self, ssn, placed: Placed, node_included: Callable[..., bool]) -> None:
        self.ssn = ssn
        self.placed = placed
        self.node_included = node_included  # (placement, node fact, honor affinity, honor taints) -> bool
        self.counts: dict[tuple, NodeCounts] = {}
        self.buckets = Buckets()
        self.eligible: dict[tuple, list] = {}
        self.eligible_indexes: dict[tuple, frozenset[int]] = {}
        self.workloads = Workloads(ssn.snapshot.workloads)
        self.defaults: dict[tuple, tuple[Spread, ...]] = {}

    def _counts(self, namespace: str, selector) -> NodeCounts:
        key = (namespace, selector)
        counts = self.counts.get(key)
        if counts is None:
            nodes = self.ssn.nodes
            counts = self.counts[key] = NodeCounts(namespace, selector, len(nodes))
            for task in self.placed.candidates(selector):
                if counts.matches(task.fact):
                    counts.add(nodes[task.node].index, 1)
            self.buckets.add(selector, counts)
        return counts

    def changed(self, task, delta: int) -> None:
        node = self.ssn.nodes.get(task.node)
        if node is None or not self.buckets:
            return
        fact = task.fact
        for counts in self.buckets.candidates(fact.labels):
            if counts.matches(fact):
                counts.add(node.index, delta)

    def _eligible(self, fact, keys: tuple[str, ...], honor_affinity: bool, honor_taints: bool) -> list:
        placement = fact.placement
        key = (placement.key, keys, honor_affinity, honor_taints)
        nodes = self.eligible.get(key)
        if nodes is None:
            nodes = self.eligible[key] = [
                node
                for node in self.ssn.node_list
                if all(k in node.fact.labels for k in keys)
                and self.node_included(placement, node.fact, honor_affinity, honor_taints)
            ]
        return nodes

    def _eligible_indexes(self, fact, keys: tuple[str, ...], honor_affinity: bool, honor_taints: bool) -> frozenset[int]:
        key = (fact.placement.key, keys, honor_affinity, honor_taints)
        indexes = self.eligible_indexes.get(key)
        if indexes is None:
            indexes = self.eligible_indexes[key] = frozenset(
                node.index for node in self._eligible(fact, keys, honor_affinity, honor_taints))
        return indexes

    def soft(self, fact) -> tuple[tuple[Spread, ...], bool] | None:
        """The pod's ScheduleAnyway constraints and whether a scored node must carry every key
        (`requireAllTopologies`), or None when it has none: its own, or, when it has no
        constraints at all, the system-default ones over its DefaultSelector (kube-scheduler's
        `buildDefaultConstraints`), which do not require the keys."""
        constraints = fact.constraints
        if constraints is not None and (constraints.spread or constraints.soft_spread):
            return (constraints.soft_spread, True) if constraints.soft_spread else None
        selector = self.workloads.selector(fact)
        if selector is None:
            return None
        defaults = self.defaults.get(selector)
        if defaults is None:
            defaults = self.defaults[selector] = tuple(
                Spread(TopologySpreadConstraint(max_skew=skew, topology_key=key, when_unsatisfiable="ScheduleAnyway"),
                       selector)
                for key, skew in SYSTEM_DEFAULT
            )
        return defaults, False

    def raw_scores(self, fact, candidates: list) -> list[int | None] | None:
        """kube-scheduler's PreScore and Score (`podtopologyspread/scoring.go`) for the pod's
        ScheduleAnyway constraints (`soft`) over the candidate nodes: per node (None for a node
        without every constraint's key when they are required, which NormalizeScore gives 0), the
        sum over the constraints whose key the node carries of the matching pods in its domain times
        log(domains + 2), plus maxSkew - 1, rounded. A hostname constraint counts the node's own
        pods, over as many domains as scored nodes; another counts, per value of the candidates
        (the empty value for those without the key, when the keys are not required), the pods on
        every node with that value that passes the constraint's inclusion policies (and carries
        all the keys, when required). None when the pod has no such constraint."""
        found = self.soft(fact)
        if found is None:
            return None
        soft, require_all = found
        keys = tuple(dict.fromkeys(s.topology_key for s in soft)) if require_all else ()
        scored = [node for node in candidates if all(k in node.fact.labels for k in keys)] if keys else candidates
        node_list = self.ssn.node_list
        terms = []
        for s in soft:
            matching = self._counts(fact.namespace, s.selector)
            counts = matching.nodes
            key = s.topology_key
            if key == HOSTNAME:
                terms.append((key, None, counts, math.log(len(scored) + 2), s.max_skew - 1))
                continue
            domains = dict.fromkeys((node.fact.labels.get(key, "") for node in scored), 0)
            eligible = self._eligible_indexes(fact, keys, s.honor_affinity, s.honor_taints)
            for index in matching.nonzero:  # the nodes with matching pods: the others add 0
                if index in eligible:
                    value = node_list[index].fact.labels.get(key, "")
                    if value in domains:
                        domains[value] += counts[index]
            terms.append((key, domains, counts, math.log(len(domains) + 2), s.max_skew - 1))
        out: list[int | None] = []
        for node in candidates:
            labels = node.fact.labels
            if keys and not all(k in labels for k in keys):
                out.append(None)
                continue
            score = 0.0
            for key, domains, counts, weight, skew in terms:
                value = labels.get(key)
                if value is None:
                    continue
                n = counts[node.index] if domains is None else domains[value]
                score += n * weight + skew
            out.append(math.floor(score + 0.5))  # Go's math.Round of a non-negative score
        return out

    def prepare(self, fact):
        """(The per-node check of this task's hard constraints, the (key, value) pairs of the domains
        that fail, the keys a node must carry), or None when the task has none."""
        constraints = fact.constraints
        if constraints is None or not constraints.spread:
            return None
        keys = tuple(dict.fromkeys(s.topology_key for s in constraints.spread))
        prepared = []
        pairs: list[tuple[str, str]] = []
        for s in constraints.spread:
            counts = self._counts(fact.namespace, s.selector).nodes
            domains: dict[str, int] = {}
            for node in self._eligible(fact, keys, s.honor_affinity, s.honor_taints):
                value = node.fact.labels[s.topology_key]
                domains[value] = domains.get(value, 0) + counts[node.index]
            least = min(domains.values()) if domains else 0
            if len(domains) < s.min_domains:
                least = 0
            own = 1 if matches(s.selector, fact.labels) else 0
            limit = s.max_skew + least - own
            prepared.append((s.topology_key, limit, domains))
            pairs.extend((s.topology_key, value) for value, n in domains.items() if n > limit)

        def check(labels: dict[str, str]) -> tuple[int, str] | None:
            for key, limit, domains in prepared:
                value = labels.get(key)
                if value is None:
                    return (UNRESOLVABLE, MISSING_LABEL)
                if domains.get(value, 0) > limit:
                    return (UNSCHEDULABLE, CONSTRAINTS)
            return None

        return check, pairs, keys
