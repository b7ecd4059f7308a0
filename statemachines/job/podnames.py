"""A task's expected pod names, `<job>-<task>-<i>` for i < replicas, without holding them.

The controller reconciles a task's pods against the names it expects (Volcano's
`syncJob`). For a task with many replicas a list and a set of every name cost
about 200 bytes per replica for as long as the job lives, pods or not; a
`PodNames` costs the same whatever the replica count: it iterates the names in
index order, has a length, and answers membership by parsing (`<prefix><i>`
with `i` a decimal without leading zeros below `replicas`), which is exactly
membership in the set of generated names. `LAZY_FROM` is where the controller
switches to it: below, a frozenset's membership test is faster.
"""

from __future__ import annotations

from collections.abc import Iterator

LAZY_FROM = 1024
"""Tasks with at least this many replicas get a `PodNames` rather than a list and a set."""


class PodNames:
    __slots__ = ("prefix", "replicas")

    def __init__(self, prefix: str, replicas: int) -> None:
        self.prefix = prefix
        self.replicas = max(replicas, 0)

    def __len__(self) -> int:
        return self.replicas

    def __iter__(self) -> Iterator[str]:
        prefix = self.prefix
        return (f"{prefix}{i}" for i in range(self.replicas))

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str) or not name.startswith(self.prefix):
            return False
        tail = name[len(self.prefix):]
        if not tail or not tail.isascii() or not tail.isdigit() or (tail[0] == "0" and len(tail) > 1):
            return False
        return int(tail) < self.replicas

    def __repr__(self) -> str:
        return f"PodNames({self.prefix!r}, {self.replicas})"
