"""The segment tree under `NodeIndex`: per position whether the node is feasible and its value
`(gradient, score, -index)` (`NONE` when not feasible); internal nodes hold the count of feasible
leaves below them, the best value below them and, when `idle` is kept, how many of those leaves
have the Idle gradient (1). Positions are the node indexes of the session for the index's main
tree, and the ranks of a class's nodes (by node index) for the trees of a `Partition`.
"""

from __future__ import annotations

import builtins

NONE = (-1, 0.0, 0)


class Tree:
    __slots__ = ("size", "count", "best", "idle")

    def __init__(self, leaves: list[tuple[int, tuple]], *, idle: bool = False) -> None:
        size = 1
        while size < len(leaves):
            size *= 2
        self.size = size
        count = self.count = [0] * (2 * size)
        best: list[tuple] = [NONE] * (2 * size)
        self.best = best
        self.idle = [0] * (2 * size) if idle else None
        for pos, (feasible, value) in enumerate(leaves):
            count[size + pos] = feasible
            best[size + pos] = value
            if self.idle is not None:
                self.idle[size + pos] = 1 if value[0] == 1 else 0
        self.recompute(set(range(size // 2, size)) if size > 1 else set())

    def leaf(self, pos: int) -> tuple[int, tuple]:
        i = self.size + pos
        return self.count[i], self.best[i]

    def set(self, pos: int, feasible: int, value: tuple, parents: set[int]) -> None:
        """Set one leaf; its parent goes to `parents` for `recompute`."""
        i = self.size + pos
        self.count[i] = feasible
        self.best[i] = value
        if self.idle is not None:
            self.idle[i] = 1 if value[0] == 1 else 0
        parents.add(i // 2)

    def replace(self, leaves: dict[int, tuple[int, tuple]]) -> dict[int, tuple[int, tuple]]:
        """Set leaves (position -> (feasible, value)) and their ancestors; returns what they held."""
        count, best, idle, size = self.count, self.best, self.idle, self.size
        saved = {}
        parents: set[int] = set()
        for pos, (feasible, value) in leaves.items():
            i = size + pos
            saved[pos] = (count[i], best[i])
            count[i] = feasible
            best[i] = value
            if idle is not None:
                idle[i] = 1 if value[0] == 1 else 0
            parents.add(i // 2)
        self.recompute(parents)
        return saved

    def recompute(self, parents: builtins.set[int]) -> None:  # builtins.: the method Tree.set shadows it here
        """The ancestors of changed leaves, level by level."""
        count, best, idle = self.count, self.best, self.idle
        while parents:
            above = set()
            for i in parents:
                left = 2 * i
                count[i] = count[left] + count[left + 1]
                a, b = best[left], best[left + 1]
                best[i] = a if a >= b else b
                if idle is not None:
                    idle[i] = idle[left] + idle[left + 1]
                if i > 1:
                    above.add(i // 2)
            parents = above

    def total(self) -> int:
        return self.count[1]

    def top(self) -> tuple:
        return self.best[1]

    def _sum(self, arr: list[int], lo: int, hi: int) -> int:
        total = 0
        lo += self.size
        hi += self.size
        while lo < hi:
            if lo & 1:
                total += arr[lo]
                lo += 1
            if hi & 1:
                hi -= 1
                total += arr[hi]
            lo //= 2
            hi //= 2
        return total

    def count_in(self, lo: int, hi: int) -> int:
        """Feasible leaves in [lo, hi)."""
        return self._sum(self.count, lo, hi)

    def idle_in(self, lo: int, hi: int) -> int:
        """Feasible leaves of the Idle gradient in [lo, hi) (trees made with `idle`)."""
        return self._sum(self.idle, lo, hi)  # type: ignore[arg-type]  # list[int] on the trees made with idle=True, the only ones asked

    def max_in(self, lo: int, hi: int) -> tuple:
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

    def kth(self, k: int) -> int:
        """Position of the k-th (1-based) feasible leaf overall."""
        count = self.count
        i = 1
        while i < self.size:
            if count[2 * i] >= k:
                i = 2 * i
            else:
                k -= count[2 * i]
                i = 2 * i + 1
        return i - self.size

    def first_at_least(self, lo: int, hi: int, key: tuple) -> int | None:
        """The smallest position in [lo, hi) whose value is >= `key`, None if there is none."""
        return self._first(1, 0, self.size, lo, hi, key)

    def _first(self, i: int, left: int, right: int, lo: int, hi: int, key: tuple) -> int | None:
        if right <= lo or hi <= left or self.best[i] < key:
            return None
        if right - left == 1:
            return left
        mid = (left + right) // 2
        found = self._first(2 * i, left, mid, lo, hi, key)
        if found is not None:
            return found
        return self._first(2 * i + 1, mid, right, lo, hi, key)
