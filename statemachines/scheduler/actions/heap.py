"""`util.PriorityQueue`: a binary heap whose keys are evaluated at push time (reference §2.7).

Entries carry a push counter after the key, so equal keys pop in push order and items are
never compared themselves."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class KeyHeap(Generic[T]):
    __slots__ = ("_key", "_items", "_count")

    def __init__(self, key: Callable[[T], Any]) -> None:
        self._key = key
        self._items: list[tuple[Any, int, T]] = []
        self._count = 0

    def push(self, item: T) -> None:
        self._count += 1
        heapq.heappush(self._items, (self._key(item), self._count, item))

    def pop(self) -> T:
        return heapq.heappop(self._items)[2]

    def __len__(self) -> int:
        return len(self._items)

    def __bool__(self) -> bool:
        return bool(self._items)
