"""Hierarchical queue resource rules of the queue validating webhook (`validateHierarchicalQueueResources`).

Resources are compared the way the scheduler's `api.Resource` does: cpu in
millicores, memory in bytes, every other resource (scalar) in thousandths
(`pods` in units), `count/*` quota names ignored; `LessPartly` with default
Zero. Messages print a `Resource` as `cpu <m>, memory <b>[, <name> <v>...]`
with two decimals, and single values with `formatResourceWithType`.

The rules, for a queue that is not `root`:
- its capability may not exceed the nearest ancestor's capability per resource;
- the guarantee and deserved of all children of its parent (itself included)
  may not exceed the parent's;
- its capability may not be below the largest capability in any child subtree;
- the guarantee and deserved of its children may not exceed its own.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Protocol

from statemachines.admission.quantity import Quantity, QuantityError

_MIN_RESOURCE = 0.1


class Queues(Protocol):
    def get(self, name: str) -> dict[str, Any] | None: ...

    def children(self, name: str) -> list[dict[str, Any]]: ...


class Resource:
    """The scheduler's `api.Resource` (only what the webhook uses)."""

    def __init__(self, raw: dict[str, Any] | None = None) -> None:
        self.cpu = 0.0
        self.memory = 0.0
        self.scalars: dict[str, float] = {}
        for name, value in (raw or {}).items():
            try:
                quantity = Quantity.parse(value)
            except QuantityError:
                continue
            if name == "cpu":
                self.cpu += quantity.milli_value()
            elif name == "memory":
                self.memory += quantity.ceil_value()
            elif name == "pods":
                self.scalars[name] = self.scalars.get(name, 0.0) + quantity.ceil_value()
            elif not name.startswith("count/"):
                self.scalars[name] = self.scalars.get(name, 0.0) + quantity.milli_value()

    def add(self, other: Resource) -> None:
        self.cpu += other.cpu
        self.memory += other.memory
        for name, value in other.scalars.items():
            self.scalars[name] = self.scalars.get(name, 0.0) + value

    def names(self) -> list[str]:
        names = (["cpu"] if self.cpu >= _MIN_RESOURCE else []) + (["memory"] if self.memory >= _MIN_RESOURCE else [])
        return names + [name for name, value in sorted(self.scalars.items()) if value >= _MIN_RESOURCE]

    def get(self, name: str) -> float:
        if name == "cpu":
            return self.cpu
        if name == "memory":
            return self.memory
        return self.scalars.get(name, 0.0)

    def less_partly(self, other: Resource) -> bool:
        """`LessPartly(other, Zero)`: some dimension of self is below other's."""
        if self.cpu < other.cpu or self.memory < other.memory:
            return True
        if any(name not in self.scalars for name in other.scalars):
            return True
        return any(value < other.scalars.get(name, 0.0) for name, value in self.scalars.items())

    def __str__(self) -> str:
        text = f"cpu {self.cpu:.2f}, memory {self.memory:.2f}"
        return text + "".join(f", {name} {value:.2f}" for name, value in sorted(self.scalars.items()))


def format_value(name: str, value: float) -> str:
    """`formatResourceWithType`: cpu as a milli quantity, memory as BinarySI, others `%.2f`."""
    if name == "cpu":
        return str(Quantity(Fraction(int(value), 1000)))
    if name == "memory":
        return str(Quantity(int(value), "BinarySI"))
    return f"{value:.2f}"


def queue_spec(queue: dict[str, Any] | None) -> dict[str, Any]:
    return (queue or {}).get("spec") or {}


def queue_name(queue: dict[str, Any]) -> str:
    return str((queue.get("metadata") or {}).get("name", ""))


def _guarantee(queue: dict[str, Any]) -> Resource:
    return Resource((queue_spec(queue).get("guarantee") or {}).get("resource"))


def _ancestor_capability(queue: dict[str, Any], name: str, index: Queues) -> float | None:
    parent = queue_spec(queue).get("parent", "")
    while parent not in ("", "root"):
        found = index.get(parent)
        if found is None:
            return None
        if queue_spec(found).get("capability") is not None:
            value = Resource(queue_spec(found)["capability"]).get(name)
            if value > 0:
                return value
        parent = queue_spec(found).get("parent", "")
    return None


def _subtree_max(queue: dict[str, Any], name: str, index: Queues) -> float:
    if queue_spec(queue).get("capability") is not None:
        value = Resource(queue_spec(queue)["capability"]).get(name)
        if value > 0:
            return value
    return max((_subtree_max(child, name, index) for child in index.children(queue_name(queue))), default=0.0)


def _sum_error(label: str, children: list[dict[str, Any]], parent: dict[str, Any]) -> str | None:
    limits = {"guarantee": _guarantee(parent), "deserved": Resource(queue_spec(parent).get("deserved"))}
    totals = {"guarantee": Resource(), "deserved": Resource()}
    for child in children:
        for kind, part in (("guarantee", _guarantee(child)), ("deserved", Resource(queue_spec(child).get("deserved")))):
            totals[kind].add(part)
            if limits[kind].less_partly(totals[kind]):
                return (
                    f"{label} validation failed: sum of children's {kind} ({totals[kind]}) "
                    f"exceeds parent's {kind} limit ({limits[kind]})"
                )
    return None


def hierarchical_resource_error(queue: dict[str, Any], index: Queues) -> str | None:
    """The first hierarchical resource violation, or None."""
    name, parent_name = queue_name(queue), queue_spec(queue).get("parent", "")
    if parent_name not in ("", "root"):
        parent = index.get(parent_name)
        if parent is None:
            return f'parent queue {parent_name} not found: queue.scheduling.volcano.sh "{parent_name}" not found'
        if queue_spec(queue).get("capability") is not None:
            own = Resource(queue_spec(queue)["capability"])
            for resource in own.names():
                limit = _ancestor_capability(queue, resource, index)
                if limit is not None and own.get(resource) > limit:
                    return (
                        f"queue {name} capability[{resource}]={format_value(resource, own.get(resource))} "
                        f"exceeds its ancestor's capability={format_value(resource, limit)}"
                    )
        siblings = [s for s in index.children(parent_name) if queue_name(s) != name] + [queue]
        problem = _sum_error(f"parent queue {parent_name}", siblings, parent)
        if problem:
            return problem
    children = index.children(name)
    if not children:
        return None
    if queue_spec(queue).get("capability") is not None:
        own = Resource(queue_spec(queue)["capability"])
        for resource in own.names():
            largest = max(_subtree_max(child, resource, index) for child in children)
            if own.get(resource) < largest:
                return (
                    f"queue {name} capability[{resource}]={format_value(resource, own.get(resource))} "
                    f"is smaller than its descendants' max capability={format_value(resource, largest)}"
                )
    return _sum_error(f"queue {name}", children, queue)
