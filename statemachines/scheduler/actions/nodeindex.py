"""A per-signature index of the nodes, so placing a task does not scan every node.

Tasks with the same requests and placement (every pod of one role, and often of many jobs)
see the same feasibility and scores on a node until that node changes. `NodeIndex` keeps,
for one such signature, a segment tree over the nodes (in session order, i.e. by name) whose
leaves hold whether the node passes allocate's checks (FutureIdle fit, pod count, stable
filters) and, if so, `(gradient, score, -index)`: 1 for the Idle gradient, 0 for FutureIdle
only. Internal nodes hold the count of feasible leaves and the best value below them.

`choose()` answers exactly what the scan in `placement.Search.predicate_nodes` followed by
`placement.best_node` answers - the first `num_to_find` feasible nodes from the rotating
offset, the first non-empty gradient, the highest score, the smallest name - in O(log n):
find the position of the (k+1)-th feasible node from the offset, take the range maximum
before it. Node changes are read lazily from the session's change log, so an index costs
nothing while unused; a node that did not fit is re-evaluated only if it freed something since. Only the failure *messages* need the scan (when nothing fits), which
the caller then runs.

A task whose filters depend on the pods placed so far (inter-pod affinity, topology spread)
shares the index of its signature: `choose(masked)` leaves out the nodes those filters (and the
predicate error cache) fail for this task alone, then puts them back; `processed` tells which
nodes the scan would have examined, so the caller records their failures as the scan would.

A task whose only score normalized over the candidates is PodTopologySpread's (ScheduleAnyway
constraints, its own or the system-default ones a Service gives it) is answered by `choose_spread`.
Its raw score on a node is fixed by the node's values of the constraints' keys (its zone, whether it
has a hostname label), except on the nodes holding matching pods (a hostname constraint counts a
node's own pods; `TopologySpread.touched`, the pods of one job: few). So the index keeps, per set of
keys, a `Partition` of the nodes by those values, a tree per class over the same leaves (with the
count of Idle-gradient leaves); a choice finds the scan's window in the main tree, then per class
the candidates of the chosen gradient (how many: the domains and the number of scored nodes the raw
score needs), the raw score of the class and of each touched candidate, the bounds NormalizeScore
reads, and per class its best untouched candidate (the touched ones masked): the node with the
highest total is the scan's, ties to the smallest name, including totals that only equal after the
float addition (the smallest base score that reaches the top total is found per class).
"""

from __future__ import annotations

import math
import struct
from bisect import bisect_left

from statemachines.scheduler.accounting import NodeState
from statemachines.scheduler.actions.placement import MIN_NODES_TO_FIND, node_score, num_to_find
from statemachines.scheduler.actions.segtree import NONE, Tree
from statemachines.scheduler.framework import Session
from statemachines.scheduler.resources import EPS
from statemachines.scheduler.state import TaskState


class Partition:
    """The nodes split into classes by their values of some labels (`spec`: (key, by value), by
    presence only when not by value): per class its members' node indexes in order, one member's
    labels and a tree over the members' leaves (with the Idle-gradient counts)."""

    __slots__ = ("members", "labels", "trees", "class_of", "rank", "parents")

    def __init__(self, spec: tuple[tuple[str, bool], ...], nodes: list[NodeState], leaves: Tree) -> None:
        by_class: dict[tuple, int] = {}
        self.members: list[list[int]] = []
        self.labels: list[dict[str, str]] = []
        self.class_of = [0] * len(nodes)
        self.rank = [0] * len(nodes)
        for node in nodes:
            labels = node.fact.labels
            key = tuple(labels.get(k) if by_value else k in labels for k, by_value in spec)
            c = by_class.get(key)
            if c is None:
                c = by_class[key] = len(self.members)
                self.members.append([])
                self.labels.append(labels)
            self.class_of[node.index] = c
            self.rank[node.index] = len(self.members[c])
            self.members[c].append(node.index)
        self.trees = [Tree([leaves.leaf(i) for i in m], idle=True) for m in self.members]
        self.parents: list[set[int]] = [set() for _ in self.members]

    def set(self, index: int, feasible: int, value: tuple) -> None:
        c = self.class_of[index]
        self.trees[c].set(self.rank[index], feasible, value, self.parents[c])

    def flush(self) -> None:
        for tree, parents in zip(self.trees, self.parents, strict=True):
            if parents:
                tree.recompute(parents)
                parents.clear()

    def spans(self, ranges: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
        """Per class, the ranks of its members within the node index ranges (non-empty ones)."""
        out = []
        for members in self.members:
            spans = []
            for lo, hi in ranges:
                a, b = bisect_left(members, lo), bisect_left(members, hi)
                if a < b:
                    spans.append((a, b))
            out.append(spans)
        return out


class NodeIndex:
    __slots__ = ("ssn", "task", "n", "tree", "grown", "synced", "static", "pod_count", "processed", "partitions")

    def __init__(self, ssn: Session, task: TaskState) -> None:
        self.ssn = ssn
        self.task = task  # a representative: every task of the signature gives the same answers
        nodes = ssn.node_list
        self.n = len(nodes)
        filters = ssn.filters
        self.static = filters.static(task.fact.placement, ssn.node_facts) if filters is not None else None
        self.pod_count = ssn.check_pod_count
        self.synced = len(ssn.node_changes)
        self.processed = (0, 0)  # (first node, how many) the last choose() examined, as the scan would
        self.grown = [node.grown for node in nodes]  # node.grown when the leaf was computed
        self.tree = Tree([self._leaf(node) for node in nodes])
        self.partitions: dict[tuple, Partition] = {}

    def _leaf(self, node: NodeState) -> tuple[int, tuple]:
        task = self.task
        if self.static is not None and self.static[node.index] is not None:
            return 0, NONE
        if self.pod_count and node.fact.max_pods <= node.npods:
            return 0, NONE
        req = task.req
        fut = node.future
        if req.cpu - fut.cpu >= EPS or req.mem - fut.mem >= EPS:
            return 0, NONE
        fsc = fut.sc
        scalars = task.fact.scalars
        for name, value in scalars:
            if value - fsc.get(name, 0.0) >= EPS:
                return 0, NONE
        idle = node.idle
        gradient = 1
        if req.cpu - idle.cpu >= EPS or req.mem - idle.mem >= EPS:
            gradient = 0
        else:
            isc = idle.sc
            for name, value in scalars:
                if value - isc.get(name, 0.0) >= EPS:
                    gradient = 0
                    break
        return 1, (gradient, node_score(self.ssn, task, node), -node.index)

    def sync(self) -> None:
        """Re-evaluate the nodes changed since the last use, then their ancestors level by level."""
        changes = self.ssn.node_changes
        if self.synced == len(changes):
            return
        dirty = set(changes[self.synced :])
        self.synced = len(changes)
        nodes = self.ssn.node_list
        tree = self.tree
        count, best, size = tree.count, tree.best, tree.size
        parents: set[int] = set()
        partitions = self.partitions.values()
        grown = self.grown
        for index in dirty:
            node = nodes[index]
            i = size + index
            if not count[i] and grown[index] == node.grown:
                continue  # it did not fit and has only lost resources since
            grown[index] = node.grown
            feasible, value = self._leaf(node)
            if count[i] == feasible and best[i] == value:
                continue
            tree.set(index, feasible, value, parents)
            for partition in partitions:
                partition.set(index, feasible, value)
        tree.recompute(parents)
        for partition in partitions:
            partition.flush()

    def choose(self, masked: set[int] | None = None) -> NodeState | None:
        """The node the scan would choose, advancing the session's offset like the scan; None if
        no node is feasible (offset untouched: the caller's scan for the fit errors moves it).
        `masked`: node indexes that fail for this task alone, left out of this choice."""
        self.sync()
        if not masked:
            return self._best(self._window())
        saved = self.tree.replace({index: (0, NONE) for index in masked})
        try:
            return self._best(self._window())
        finally:
            self.tree.replace(saved)

    def _window(self) -> list[tuple[int, int]] | None:
        """The node index ranges, in node order, of the candidates the scan would find (the first
        `num_to_find` feasible nodes from the offset), advancing the offset as the scan; None when
        no node is feasible."""
        tree = self.tree
        feasible = tree.total()
        if feasible == 0:
            return None
        n = self.n
        ssn = self.ssn
        want = num_to_find(n)
        if n <= MIN_NODES_TO_FIND or feasible <= want:
            self.processed = (ssn.node_offset if n > MIN_NODES_TO_FIND else 0, n)  # every node: the offset stays
            return [(0, n)]
        start = ssn.node_offset
        before = tree.count_in(0, start)
        after = feasible - before
        k = want + 1
        if k <= after:
            stop = tree.kth(before + k)  # the overflowing node, processed but not a candidate
            ranges = [(start, stop)]
            processed = stop - start + 1
        else:
            stop = tree.kth(k - after)
            ranges = [(0, stop), (start, n)]
            processed = n - start + stop + 1
        self.processed = (start, processed)
        ssn.node_offset = (start + processed) % n
        return ranges

    def _top(self, ranges: list[tuple[int, int]]) -> tuple:
        tree = self.tree
        if ranges[0] == (0, self.n):
            return tree.top()
        return max(tree.max_in(lo, hi) for lo, hi in ranges)

    def _best(self, ranges: list[tuple[int, int]] | None) -> NodeState | None:
        if ranges is None:
            return None
        return self.ssn.node_list[-self._top(ranges)[2]]

    def _partition(self, spec: tuple[tuple[str, bool], ...]) -> Partition:
        partition = self.partitions.get(spec)
        if partition is None:
            partition = self.partitions[spec] = Partition(spec, self.ssn.node_list, self.tree)
        return partition

    def choose_spread(self, fact, scorer, masked: set[int] | None = None) -> NodeState | None:
        """The node the scan would choose for a task whose one normalized score is `scorer`'s
        (`plugins.nodeorder.SpreadScorer`), as `choose` (`masked` too); see the module docstring."""
        self.sync()
        spread = scorer.spread
        found = spread.soft(fact)
        partition = self._partition(spread.partition(found))  # made from the leaves unmasked
        if not masked:
            return self._choose_spread(fact, scorer, found, partition, ())
        saved = self.tree.replace({index: (0, NONE) for index in masked})
        try:
            return self._choose_spread(fact, scorer, found, partition, masked)
        finally:
            self.tree.replace(saved)

    def _choose_spread(self, fact, scorer, found, partition: Partition, masked) -> NodeState | None:
        ranges = self._window()
        if ranges is None:
            return None
        tree = self.tree
        gradient = self._top(ranges)[0]
        spread = scorer.spread
        trees = partition.trees
        spans = partition.spans(ranges)
        sizes = []  # per class, its candidates of the gradient
        for c, class_spans in enumerate(spans):
            t = trees[c]
            count = t.idle_in if gradient == 1 else t.count_in
            sizes.append(sum(count(a, b) for a, b in class_spans))
        class_of = partition.class_of
        rank = partition.rank
        holes: dict[int, list[int]] = {}  # per class, the ranks of its masked and touched candidates
        for index in masked:  # masked in the main tree only: not candidates
            c = class_of[index]
            feasible, value = trees[c].leaf(rank[index])
            if feasible and value[0] == gradient and _within(index, ranges):
                sizes[c] -= 1
                holes.setdefault(c, []).append(rank[index])
        labels = partition.labels
        soft = spread.soft_score(fact, found, [(labels[c], k) for c, k in enumerate(sizes) if k])
        untouched = list(sizes)
        touched = []
        for index in spread.touched(fact, found):
            feasible, value = tree.leaf(index)
            if feasible and value[0] == gradient and _within(index, ranges):
                touched.append(index)
                untouched[class_of[index]] -= 1
                holes.setdefault(class_of[index], []).append(rank[index])
        node_list = self.ssn.node_list
        class_raw = {c: soft.raw(labels[c], None) for c, k in enumerate(untouched) if k}
        touched_raw = [(index, soft.raw(node_list[index].fact.labels, index)) for index in touched]
        low, high = scorer.bounds(list(class_raw.values()) + [raw for _, raw in touched_raw])
        extra = scorer.extra
        entries: list[tuple] = []  # (total, class or None, the class's extra score, its best leaf or the touched node's index)
        for c, raw in class_raw.items():
            e = extra(raw, low, high)
            class_spans = spans[c] = _without(spans[c], holes.get(c))
            top = max(trees[c].max_in(a, b) for a, b in class_spans)
            entries.append((top[1] + e, c, e, top))
        for index, raw in touched_raw:
            entries.append((tree.leaf(index)[1][1] + extra(raw, low, high), None, 0.0, index))
        best = max(entry[0] for entry in entries)
        winner = self.n
        for total, c, e, x in entries:
            if total != best:
                continue
            if c is None:
                index = x
            else:  # the smallest name among the class's untouched candidates whose total reaches the best
                least = _least_addend(best, e)
                if least >= x[1]:  # only the best base does: the tree's own tie-break, the smallest name
                    index = -x[2]
                else:
                    key = (gradient, least, -self.n)
                    for a, b in spans[c]:
                        pos = trees[c].first_at_least(a, b, key)
                        if pos is not None:
                            index = partition.members[c][pos]
                            break
            if index < winner:
                winner = index
        return node_list[winner]


def _within(index: int, ranges: list[tuple[int, int]]) -> bool:
    return any(lo <= index < hi for lo, hi in ranges)


def _without(spans: list[tuple[int, int]], holes: list[int] | None) -> list[tuple[int, int]]:
    """The spans (ascending) with the positions `holes` taken out."""
    if not holes:
        return spans
    out = []
    holes = sorted(holes)
    for a, b in spans:
        for h in holes:
            if a <= h < b:
                if a < h:
                    out.append((a, h))
                a = h + 1
        if a < b:
            out.append((a, b))
    return out


def _least_addend(total: float, e: float) -> float:
    """The smallest float x with x + e >= total in float arithmetic (the addition is monotone in x):
    bracketed by steps of total's unit in the last place, then bisected over the floats between."""
    hi = total - e
    step = math.ulp(total)
    while hi + e < total:
        hi += step
    lo = hi - step
    while lo + e >= total:
        step *= 2
        lo = hi - step
    a, b = _ordinal(lo), _ordinal(hi)  # lo + e < total <= hi + e
    while b - a > 1:
        m = (a + b) // 2
        if _from_ordinal(m) + e >= total:
            b = m
        else:
            a = m
    return _from_ordinal(b)


def _ordinal(x: float) -> int:
    """The float's rank among all floats (the same order; 0.0 and -0.0 both 0)."""
    bits = struct.unpack("<q", struct.pack("<d", x))[0]
    return bits if bits >= 0 else -(bits & 0x7FFFFFFFFFFFFFFF)


def _from_ordinal(k: int) -> float:
    bits = k if k >= 0 else (-k) | (1 << 63)
    return struct.unpack("<d", struct.pack("<Q", bits))[0]
