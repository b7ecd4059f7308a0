"""Every pending timer of the engine, earliest due first.

One heap for all controllers (the job controller's delayed actions, the garbage
collector's ttl timers), ordered by (due, order) where `order` counts timers in
the order they were registered, so equal due times fire in registration order.
A cancelled timer stays in the heap and is skipped when popped; `index` holds
the timers that can still fire, by id (a TIMER record names one).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from statemachines.timers.rules import Timer


class TimerHeap:
    __slots__ = ("heap", "index", "order")

    def __init__(self) -> None:
        self.heap: list[tuple[str, int, Timer]] = []  # heap by (due, order)
        self.index: dict[str, Timer] = {}
        self.order = 0

    def next_order(self) -> int:
        self.order += 1
        return self.order

    def push(self, timer: Timer) -> None:
        heapq.heappush(self.heap, (timer.due, timer.order, timer))
        self.index[timer.id] = timer

    def discard(self, timer: Timer) -> None:
        """`timer` can no longer fire (cancelled, or firing now)."""
        self.index.pop(timer.id, None)

    def pop_due(self, now: str) -> Iterator[Timer]:
        """The live timers due by `now`, one at a time (a fired one may push more)."""
        while self.heap and self.heap[0][0] <= now:
            _, _, timer = heapq.heappop(self.heap)
            if not timer.cancelled:
                yield timer

    def take(self, timer_id: str) -> Timer | None:
        """The live timer a TIMER record names, out of the heap; None if it cannot fire."""
        timer = self.index.get(timer_id)
        if timer is None or timer.cancelled:
            return None
        self.heap = [t for t in self.heap if t[2] is not timer]
        heapq.heapify(self.heap)
        return timer

    def pending(self) -> list[Timer]:
        return sorted((t for _, _, t in self.heap if not t.cancelled), key=lambda t: (t.due, t.order))
