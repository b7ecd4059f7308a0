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
"""

from __future__ import annotations

from statemachines.scheduler.actions.placement import MIN_NODES_TO_FIND, node_score, num_to_find
from statemachines.scheduler.framework import Session
from statemachines.scheduler.resources import EPS
from statemachines.scheduler.accounting import NodeState
from statemachines.scheduler.state import TaskState

NONE = (-1, 0.0, 0)


class NodeIndex:
    __slots__ = ("ssn", "task", "size", "n", "count", "best", "grown", "synced", "static", "pod_count", "processed")

    def __init__(self, ssn: Session, task: TaskState) -> None:
        self.ssn = ssn
        self.task = task  # a representative: every task of the signature gives the same answers
        nodes = ssn.node_list
        self.n = len(nodes)
        size = 1
        while size < self.n:
            size *= 2
        self.size = size
        self.count = [0] * (2 * size)
        self.best: list[tuple] = [NONE] * (2 * size)
        self.grown = [0] * self.n  # node.grown when the leaf was computed
        filters = ssn.filters
        self.static = filters.static(task.fact.placement, ssn.node_facts) if filters is not None else None
        self.pod_count = ssn.check_pod_count
        self.synced = len(ssn.node_changes)
        self.processed = (0, 0)  # (first node, how many) the last choose() examined, as the scan would
        count, best = self.count, self.best
        grown = self.grown
        for node in nodes:
            feasible, value = self._leaf(node)
            grown[node.index] = node.grown
            count[size + node.index] = feasible
            best[size + node.index] = value
        for i in range(size - 1, 0, -1):
            count[i] = count[2 * i] + count[2 * i + 1]
            left, right = best[2 * i], best[2 * i + 1]
            best[i] = left if left >= right else right

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
        count, best, size = self.count, self.best, self.size
        parents = set()
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
            count[i] = feasible
            best[i] = value
            parents.add(i // 2)
        self._recompute(parents)

    def _recompute(self, parents: set[int]) -> None:
        count, best = self.count, self.best
        while parents:
            above = set()
            for i in parents:
                count[i] = count[2 * i] + count[2 * i + 1]
                left, right = best[2 * i], best[2 * i + 1]
                best[i] = left if left >= right else right
                if i > 1:
                    above.add(i // 2)
            parents = above

    def _set_leaves(self, leaves: dict[int, tuple[int, tuple]]) -> dict[int, tuple[int, tuple]]:
        """Set leaves (node index -> (feasible, value)); returns what they held."""
        count, best, size = self.count, self.best, self.size
        saved = {}
        parents = set()
        for index, (feasible, value) in leaves.items():
            i = size + index
            saved[index] = (count[i], best[i])
            count[i] = feasible
            best[i] = value
            parents.add(i // 2)
        self._recompute(parents)
        return saved

    def _count(self, lo: int, hi: int) -> int:
        """Feasible leaves in [lo, hi)."""
        total = 0
        count = self.count
        lo += self.size
        hi += self.size
        while lo < hi:
            if lo & 1:
                total += count[lo]
                lo += 1
            if hi & 1:
                hi -= 1
                total += count[hi]
            lo //= 2
            hi //= 2
        return total

    def _max(self, lo: int, hi: int) -> tuple:
        out = NONE
        best = self.best
        lo += self.size
        hi += self.size
        while lo < hi:
            if lo & 1:
                if best[lo] > out:
                    out = best[lo]
                lo += 1
            if hi & 1:
                hi -= 1
                if best[hi] > out:
                    out = best[hi]
            lo //= 2
            hi //= 2
        return out

    def _kth(self, k: int) -> int:
        """Index of the k-th (1-based) feasible leaf overall."""
        count = self.count
        i = 1
        while i < self.size:
            if count[2 * i] >= k:
                i = 2 * i
            else:
                k -= count[2 * i]
                i = 2 * i + 1
        return i - self.size

    def choose(self, masked: set[int] | None = None) -> NodeState | None:
        """The node the scan would choose, advancing the session's offset like the scan; None if
        no node is feasible (offset untouched: the caller's scan for the fit errors moves it).
        `masked`: node indexes that fail for this task alone, left out of this choice."""
        self.sync()
        if not masked:
            return self._choose()
        saved = self._set_leaves({index: (0, NONE) for index in masked})
        try:
            return self._choose()
        finally:
            self._set_leaves(saved)

    def _choose(self) -> NodeState | None:
        feasible = self.count[1]
        if feasible == 0:
            return None
        n = self.n
        ssn = self.ssn
        want = num_to_find(n)
        if n <= MIN_NODES_TO_FIND or feasible <= want:
            value = self.best[1]
            self.processed = (ssn.node_offset if n > MIN_NODES_TO_FIND else 0, n)  # every node: the offset stays
        else:
            start = ssn.node_offset
            before = self._count(0, start)
            after = feasible - before
            k = want + 1
            if k <= after:
                stop = self._kth(before + k)  # the overflowing node, processed but not a candidate
                value = self._max(start, stop)
                processed = stop - start + 1
            else:
                stop = self._kth(k - after)
                value = self._max(start, n)
                tail = self._max(0, stop)
                if tail > value:
                    value = tail
                processed = n - start + stop + 1
            self.processed = (start, processed)
            ssn.node_offset = (start + processed) % n
        return ssn.node_list[-value[2]]
