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
from collections.abc import Callable

from statemachines.scheduler.constraints import Spread
from statemachines.scheduler.fiterrors import UNRESOLVABLE, UNSCHEDULABLE
from statemachines.scheduler.labels import matches
from statemachines.scheduler.objects import TopologySpreadConstraint
from statemachines.scheduler.plugins.interpod import Buckets, Placed
from statemachines.scheduler.workloads import HOSTNAME, SYSTEM_DEFAULT, Workloads

CONSTRAINTS = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL = CONSTRAINTS + " (missing required label)"
MAX_SCORE = 100


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


class SoftScore:
    """The raw scores of one pod's ScheduleAnyway constraints over one set of candidates
    (`TopologySpread.soft_score`)."""

    __slots__ = ("keys", "terms")

    def __init__(self, keys: tuple[str, ...], terms: list[tuple]) -> None:
        self.keys = keys  # the keys a scored node must carry (when required)
        self.terms = terms  # (key, domain counts or None for the hostname, node counts, weight, maxSkew - 1)

    def raw(self, labels: dict[str, str], index: int | None) -> int | None:
        """A node's raw score (None for a node without every key when they are required, which
        NormalizeScore gives 0): the sum over the constraints whose key the node carries of the
        matching pods in its domain times log(domains + 2), plus maxSkew - 1, rounded. `index`:
        the node's, for a hostname constraint's count of its own pods (None: a node without any)."""
        keys = self.keys
        if keys and not all(k in labels for k in keys):
            return None
        score = 0.0
        for key, domains, counts, weight, skew in self.terms:
            value = labels.get(key)
            if value is None:
                continue
            if domains is not None:
                score += domains[value] * weight + skew
            else:  # the hostname: the node's own pods
                score += (counts[index] if index is not None else 0) * weight + skew
        return math.floor(score + 0.5)  # Go's math.Round of a non-negative score


def bounds(raw: list[int | None]) -> tuple[int, int]:
    """(lowest, highest) of the raw scores NormalizeScore reads (the None ones left out; highest at least 0)."""
    valid = [r for r in raw if r is not None]
    return min(valid, default=0), max(valid + [0])


def normalized(raw: int | None, low: int, high: int) -> int:
    """PodTopologySpread's NormalizeScore of one node: 0 for a node without the required keys,
    100 when the highest raw score is 0, else 100 * (highest + lowest - raw) // highest."""
    if raw is None:
        return 0
    if high == 0:
        return MAX_SCORE
    return MAX_SCORE * (high + low - raw) // high


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
        ScheduleAnyway constraints (`soft`) over the candidate nodes, per node (`SoftScore.raw`);
        None when the pod has no such constraint."""
        found = self.soft(fact)
        if found is None:
            return None
        prepared = self.soft_score(fact, found, [(node.fact.labels, 1) for node in candidates])
        return [prepared.raw(node.fact.labels, node.index) for node in candidates]

    def soft_score(self, fact, found: tuple[tuple[Spread, ...], bool], groups: list[tuple[dict, int]]) -> SoftScore:
        """PreScore over candidate nodes given as (labels, how many nodes carry them): the scored
        nodes are those carrying every constraint's key when the keys are required (`soft`'s
        second answer), else all. A hostname constraint counts a node's own pods, over as many
        domains as scored nodes; another counts, per value of the scored nodes (the empty value for
        those without the key, when the keys are not required), the pods on every node with that
        value that passes the constraint's inclusion policies (and carries all the keys, when
        required)."""
        soft, require_all = found
        keys = tuple(dict.fromkeys(s.topology_key for s in soft)) if require_all else ()
        scored = [(labels, n) for labels, n in groups if all(k in labels for k in keys)] if keys else groups
        count = sum(n for _, n in scored)
        node_list = self.ssn.node_list
        terms: list[tuple] = []
        for s in soft:
            matching = self._counts(fact.namespace, s.selector)
            counts = matching.nodes
            key = s.topology_key
            if key == HOSTNAME:
                terms.append((key, None, counts, math.log(count + 2), s.max_skew - 1))
                continue
            domains = dict.fromkeys((labels.get(key, "") for labels, _ in scored), 0)
            eligible = self._eligible_indexes(fact, keys, s.honor_affinity, s.honor_taints)
            for index in matching.nonzero:  # the nodes with matching pods: the others add 0
                if index in eligible:
                    value = node_list[index].fact.labels.get(key, "")
                    if value in domains:
                        domains[value] += counts[index]
            terms.append((key, domains, counts, math.log(len(domains) + 2), s.max_skew - 1))
        return SoftScore(keys, terms)

    def partition(self, found: tuple[tuple[Spread, ...], bool]) -> tuple[tuple[str, bool], ...]:
        """The labels a node's raw score reads apart from its own matching pods: (key, by value) per
        constraint key, by presence only for a hostname constraint (each node its own domain)."""
        return tuple((key, key != HOSTNAME) for key in dict.fromkeys(s.topology_key for s in found[0]))

    def touched(self, fact, found: tuple[tuple[Spread, ...], bool]) -> set[int]:
        """The nodes whose raw score their own matching pods change (a hostname constraint's counts):
        every other node scores as any node with the same `partition` labels."""
        out: set[int] = set()
        for s in found[0]:
            if s.topology_key == HOSTNAME:
                out |= self._counts(fact.namespace, s.selector).nonzero
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
