"""InterPodAffinity's filter (kube-scheduler `pkg/scheduler/framework/plugins/interpodaffinity/filtering.go`)
and the counts its score reads (`scoring.go`; nodeorder normalizes them), over the session's pods:
those on nodes at open and those placed since (allocated or pipelined), so tasks placed earlier
in the session, of the same gang or another, count at once.

A pod counts while it is on a node and not being deleted (a pod the session evicts stops
counting, as Volcano's DeallocateFunc removes it from the node's pods). Counts are kept
incrementally: per distinct required term set (or preferred term) of an incoming pod, the pods
matching it per (topology key, value) of their nodes; per distinct anti-affinity term, and per
distinct weighted preferred term, of a placed pod, where its holders are. Terms are bucketed by
a label every match must carry, so placing a pod touches only the terms it could match. The
three checks and their statuses are kube-scheduler's: affinity (UnschedulableAndUnresolvable),
the pod's anti-affinity and the existing pods' anti-affinity (Unschedulable).
"""

from __future__ import annotations

from statemachines.scheduler.constraints import Term
from statemachines.scheduler.fiterrors import UNRESOLVABLE, UNSCHEDULABLE
from statemachines.scheduler.labels import anchor
from statemachines.scheduler.model import RELEASING
from statemachines.scheduler.state import TaskState

AFFINITY = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
NO_LABELS: dict[str, str] = {}


class Counts:
    """Pods matching every one of `terms`, per (topology key, value) of their node. `ns_labels` and
    `missing` are `Term.matches`': the session's namespace labels, and the labels of a namespace
    without its object (None for the incoming pod's terms, {} for a placed pod's)."""

    __slots__ = ("terms", "keys", "pairs", "ns_labels", "missing")

    def __init__(self, terms: tuple[Term, ...], ns_labels: dict[str, dict[str, str]],
                 missing: dict[str, str] | None = None) -> None:
        self.terms = terms
        self.keys = tuple(dict.fromkeys(t.topology_key for t in terms))
        self.pairs: dict[tuple[str, str], int] = {}
        self.ns_labels = ns_labels
        self.missing = missing

    def matches(self, fact) -> bool:
        for term in self.terms:
            if not term.matches(fact.namespace, fact.labels, self.ns_labels, self.missing):
                return False
        return True

    def add(self, labels: dict[str, str], delta: int) -> None:
        pairs = self.pairs
        for key in self.keys:
            value = labels.get(key)
            if value is None:
                continue
            pair = (key, value)
            n = pairs.get(pair, 0) + delta
            if n:
                pairs[pair] = n
            else:
                pairs.pop(pair, None)


class Buckets:
    """Items keyed by a selector's anchor label, found again from a pod's labels."""

    __slots__ = ("by_label", "general")

    def __init__(self) -> None:
        self.by_label: dict[tuple[str, str], list] = {}
        self.general: list = []

    def add(self, selector, item) -> None:
        label = anchor(selector)
        if label is None:
            self.general.append(item)
        else:
            self.by_label.setdefault(label, []).append(item)

    def candidates(self, labels: dict[str, str]) -> list:
        by_label = self.by_label
        if not by_label:
            return self.general
        out = list(self.general)
        for pair in labels.items():
            items = by_label.get(pair)
            if items:
                out.extend(items)
        return out

    def __bool__(self) -> bool:
        return bool(self.by_label or self.general)


class Placed:
    """The session's pods that count (on a node, not being deleted), by label: a new count starts from
    the pods carrying its selector's anchor label, not from every pod."""

    def __init__(self, ssn) -> None:
        self.all: dict[str, TaskState] = {}
        self.by_label: dict[tuple[str, str], dict[str, TaskState]] = {}
        for node in ssn.node_list:
            for task in node.tasks.values():
                if task.status != RELEASING:
                    self.changed(task, 1)

    def changed(self, task, delta: int) -> None:
        uid = task.uid
        if delta > 0:
            self.all[uid] = task
            for pair in task.fact.labels.items():
                self.by_label.setdefault(pair, {})[uid] = task
        else:
            self.all.pop(uid, None)
            for pair in task.fact.labels.items():
                bucket = self.by_label.get(pair)
                if bucket is not None:
                    bucket.pop(uid, None)

    def candidates(self, selector) -> list:
        """The pods that may match `selector` (all of them when it has no anchor)."""
        label = anchor(selector)
        if label is None:
            return list(self.all.values())
        return list(self.by_label.get(label, {}).values())


class InterPod:
    """The session's inter-pod affinity counts (one per session, fed by the allocate events)."""

    def __init__(self, ssn, placed: Placed) -> None:
        self.ssn = ssn
        self.placed = placed
        self.ns_labels = ssn.snapshot.namespaces
        self.counts: dict[tuple, Counts] = {}
        self.count_buckets = Buckets()
        self.holders: dict[tuple, Counts] = {}  # anti-affinity term key -> where its holders are
        self.holder_buckets = Buckets()
        self.soft_holders: dict[tuple, tuple[int, Counts]] = {}  # (weight, preferred term key) -> the same
        self.soft_buckets = Buckets()
        nodes = ssn.nodes
        for task in placed.all.values():
            self._holder(task, nodes[task.node].fact.labels, 1)

    def _counts(self, terms: tuple[Term, ...]) -> Counts:
        key = tuple(t.key for t in terms)
        counts = self.counts.get(key)
        if counts is None:
            counts = self.counts[key] = Counts(terms, self.ns_labels)
            nodes = self.ssn.nodes
            selector = terms[0].selector  # a match matches every term, the first too
            for task in self.placed.candidates(selector):
                if counts.matches(task.fact):
                    counts.add(nodes[task.node].fact.labels, 1)
            self.count_buckets.add(selector, counts)
        return counts

    def _holder(self, task, labels: dict[str, str], delta: int) -> None:
        constraints = task.fact.constraints
        if constraints is None:
            return
        for term in constraints.anti:
            holder = self.holders.get(term.key)
            if holder is None:
                holder = self.holders[term.key] = Counts((term,), self.ns_labels, NO_LABELS)
                self.holder_buckets.add(term.selector, holder)
            holder.add(labels, delta)
        for weight, term in constraints.preferred:
            key = (weight, term.key)
            soft = self.soft_holders.get(key)
            if soft is None:
                soft = self.soft_holders[key] = (weight, Counts((term,), self.ns_labels, NO_LABELS))
                self.soft_buckets.add(term.selector, soft)
            soft[1].add(labels, delta)

    def changed(self, task, delta: int) -> None:
        """A task was placed on (+1) or left (-1) its node (`task.node`)."""
        node = self.ssn.nodes.get(task.node)
        if node is None:
            return
        labels = node.fact.labels
        fact = task.fact
        for counts in self.count_buckets.candidates(fact.labels):
            if counts.matches(fact):
                counts.add(labels, delta)
        self._holder(task, labels, delta)

    def existing(self, fact) -> list[tuple[str, str]]:
        """The (key, value) pairs where a placed pod's anti-affinity term matches this pod."""
        out = []
        for holder in self.holder_buckets.candidates(fact.labels):
            if holder.pairs and holder.matches(fact):
                out.extend(holder.pairs)
        return out

    def scored(self, fact) -> bool:
        """Whether InterPodAffinity's score can tell nodes apart for this pod: it has preferred terms,
        or a placed pod's preferred term matches it."""
        constraints = fact.constraints
        if constraints is not None and constraints.preferred:
            return True
        if not self.soft_buckets:
            return False
        for _, holder in self.soft_buckets.candidates(fact.labels):
            if holder.pairs and holder.matches(fact):
                return True
        return False

    def topology_score(self, fact) -> dict[tuple[str, str], int]:
        """kube-scheduler's PreScore (`interpodaffinity/scoring.go`, hardPodAffinityWeight 0 as Volcano
        configures it): per (topology key, value), the weights of the pod's preferred terms times the
        placed pods there matching them, and the weights of the placed pods' preferred terms that
        match the pod; anti-affinity's negated."""
        out: dict[tuple[str, str], int] = {}
        constraints = fact.constraints
        for weight, term in constraints.preferred if constraints is not None else ():
            for pair, n in self._counts((term,)).pairs.items():
                out[pair] = out.get(pair, 0) + weight * n
        if self.soft_buckets:
            for weight, holder in self.soft_buckets.candidates(fact.labels):
                if holder.pairs and holder.matches(fact):
                    for pair, n in holder.pairs.items():
                        out[pair] = out.get(pair, 0) + weight * n
        return out

    def prepare(self, fact):
        """kube-scheduler's PreFilter for one task: (a per-node check of the node's labels, the
        (key, value) pairs outside which every node passes, or None when the nodes that fail cannot
        be listed that way: required affinity), or None when nothing applies."""
        forbidden = self.existing(fact)
        constraints = fact.constraints
        affinity = anti = None
        first_of_series = False
        if constraints is not None:
            if constraints.affinity:
                affinity = self._counts(constraints.affinity)
                first_of_series = not affinity.pairs and affinity.matches(fact)
            if constraints.anti:
                anti = [(t.topology_key, self._counts((t,)).pairs) for t in constraints.anti]
        if affinity is None and not anti and not forbidden:
            return None
        forbidden_set = set(forbidden)
        pairs = None
        if affinity is None:
            pairs = list(forbidden_set)
            for key, counts in anti or ():
                pairs.extend(pair for pair in counts if pair[0] == key)

        def check(labels: dict[str, str]) -> tuple[int, str] | None:
            if affinity is not None:
                pairs = affinity.pairs
                exist = True
                for term in affinity.terms:
                    value = labels.get(term.topology_key)
                    if value is None:
                        return (UNRESOLVABLE, AFFINITY)
                    if pairs.get((term.topology_key, value), 0) <= 0:
                        exist = False
                if not exist and not first_of_series:
                    return (UNRESOLVABLE, AFFINITY)
            if anti:
                for key, pairs in anti:
                    value = labels.get(key)
                    if value is not None and pairs.get((key, value), 0) > 0:
                        return (UNSCHEDULABLE, ANTI_AFFINITY)
            if forbidden_set:
                for pair in labels.items():
                    if pair in forbidden_set:
                        return (UNSCHEDULABLE, EXISTING_ANTI_AFFINITY)
            return None

        return check, pairs
