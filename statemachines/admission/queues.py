"""Queue admission (`/queues/mutate`, `/queues/validate`) and the queue view the job webhook reads.

- `QueueIndex`: the queues the webhook's lister would return (by name, and
  children by `spec.parent`);
- `queue_patch(queue)`: CREATE defaults (hierarchy annotations under `root`,
  reclaimable true, weight 1), JSON-pointer paths escaped;
- `validate_queue(operation, queue, old, index)`: the first error text, or None.
  CREATE/UPDATE: quantity/state/hierarchy-annotation field errors (aggregated
  like `utilerrors.NewAggregate`), parent rules, root protection and the
  hierarchical resource rules; DELETE: `default`/`root`, allocated pods (opt-in)
  and child queues.
"""

from __future__ import annotations

from typing import Any

from statemachines.admission.fields import FieldError, invalid
from statemachines.admission.quantity import parse_or_none
from statemachines.admission.queue_resources import hierarchical_resource_error, queue_name, queue_spec
from statemachines.admission.semantic import semantic_equal

HIERARCHY_KEY = "volcano.sh/hierarchy"
HIERARCHY_WEIGHTS_KEY = "volcano.sh/hierarchy-weights"


class QueueIndex:
    """Queue objects by name, plus the `spec.parent` index."""

    def __init__(self, queues: list[dict[str, Any]]) -> None:
        self.queues = {str((q.get("metadata") or {}).get("name", "")): q for q in queues}

    def get(self, name: str) -> dict[str, Any] | None:
        return self.queues.get(name)

    def children(self, name: str) -> list[dict[str, Any]]:
        return [q for _, q in sorted(self.queues.items()) if (q.get("spec") or {}).get("parent", "") == name]

    @staticmethod
    def not_found(name: str) -> str:
        return f'queue.scheduling.volcano.sh "{name}" not found'


def default_queues() -> QueueIndex:
    """What `vcbus validate` assumes without `--queues`: a queue `default` in state Open."""
    return QueueIndex([{"metadata": {"name": "default"}, "spec": {"weight": 1}, "status": {"state": "Open"}}])


def _annotations(queue: dict[str, Any]) -> dict[str, str]:
    return (queue.get("metadata") or {}).get("annotations") or {}


def queue_patch(queue: dict[str, Any]) -> list[dict[str, Any]]:
    """The mutating webhook's JSON Patch for a queue CREATE."""
    patch: list[dict[str, Any]] = []
    hierarchy = _annotations(queue).get(HIERARCHY_KEY, "")
    weights = _annotations(queue).get(HIERARCHY_WEIGHTS_KEY, "")
    if hierarchy and weights and not hierarchy.startswith("root"):
        for key, value in ((HIERARCHY_KEY, f"root/{hierarchy}"), (HIERARCHY_WEIGHTS_KEY, f"1/{weights}")):
            patch.append({"op": "add", "path": "/metadata/annotations/" + key.replace("/", "~1"), "value": value})
    if queue_spec(queue).get("reclaimable") is None:
        patch.append({"op": "add", "path": "/spec/reclaimable", "value": True})
    if not queue_spec(queue).get("weight"):
        patch.append({"op": "add", "path": "/spec/weight", "value": 1})
    return patch


def _field_errors(queue: dict[str, Any], index: QueueIndex) -> list[FieldError]:
    spec = queue_spec(queue)
    errs: list[FieldError] = []
    capability = {k: parse_or_none(v) for k, v in (spec.get("capability") or {}).items()}
    deserved = {k: parse_or_none(v) for k, v in (spec.get("deserved") or {}).items()}
    guarantee = {k: parse_or_none(v) for k, v in ((spec.get("guarantee") or {}).get("resource") or {}).items()}
    for kind, listed in (("capability", capability), ("deserved", deserved)):
        for name, q in sorted(listed.items()):
            if q is not None and q.sign() < 0:
                errs.append(invalid(f"requestBody.spec.{kind}.{name}", str(q), "must be greater than or equal to 0"))
    for name, g in sorted(guarantee.items()):
        if g is None:
            continue
        if g.sign() < 0:
            errs.append(invalid(f"requestBody.spec.guarantee.resource.{name}", str(g), "must be greater than or equal to 0"))
        d = deserved.get(name)
        if name not in deserved:
            errs.append(invalid(f"requestBody.spec.deserved.{name}", "<nil>", f"deserved[{name}] must be >= guarantee[{name}]={g}"))
        elif d is not None and d < g:
            errs.append(invalid(f"requestBody.spec.deserved.{name}", str(d), f"deserved[{name}]={d} must be >= guarantee[{name}]={g}"))
    for name, d in sorted(deserved.items()):
        c = capability.get(name)
        if d is not None and c is not None and c < d:
            errs.append(invalid(f"requestBody.spec.deserved.{name}", str(d), f"deserved[{name}]={d} must be <= capability[{name}]={c}"))
    state = ((queue.get("status") or {}).get("state")) or ""
    if state and state not in ("Open", "Closed"):
        errs.append(invalid("requestBody.spec.state", state, "queue state must be in [Open Closed]"))
    errs += _hierarchy_errors(queue, index)
    return errs


def _hierarchy_errors(queue: dict[str, Any], index: QueueIndex) -> list[FieldError]:
    path = "requestBody.metadata.annotations"
    hierarchy = _annotations(queue).get(HIERARCHY_KEY, "")
    weights = _annotations(queue).get(HIERARCHY_WEIGHTS_KEY, "")
    if not hierarchy and not weights:
        return []
    if len(hierarchy.split("/")) != len(weights.split("/")):
        return [invalid(path, hierarchy, f"{HIERARCHY_KEY} must have the same length with {HIERARCHY_WEIGHTS_KEY}")]
    for weight in weights.split("/"):
        try:
            number = float(weight)
        except ValueError:
            return [invalid(path, weights, f'{weight} in the {weights} is invalid number: strconv.ParseFloat: parsing "{weight}": invalid syntax')]
        if number <= 0:
            return [invalid(path, weights, f"{weight} in the {weights} must be larger than 0")]
    for other_name, other in sorted(index.queues.items()):
        other_hierarchy = _annotations(other).get(HIERARCHY_KEY, "")
        if other_hierarchy and other_name != queue_name(queue) and other_hierarchy.startswith(hierarchy + "/"):
            return [invalid(path, hierarchy, f"{hierarchy} is not allowed to be in the sub path of {other_hierarchy} of queue {other_name}")]
    return []


def aggregate(errs: list[FieldError]) -> str:
    """`utilerrors.NewAggregate(...).Error()`: one message bare, several as `[e1, e2]`."""
    texts = list(dict.fromkeys(str(e) for e in errs))
    return texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"


def _parent_error(queue: dict[str, Any], index: QueueIndex, max_depth: int) -> str | None:
    name, parent = queue_name(queue), queue_spec(queue).get("parent", "")
    if parent in ("", "root"):
        return None
    if parent == name:
        return f"queue {name} cannot use itself as parent"
    depth, cursor = 1, parent
    while cursor not in ("", "root"):
        depth += 1
        if depth > max_depth:
            return f"queue {name} exceeds the maximum allowed depth of {max_depth}"
        found = index.get(cursor)
        if found is None:
            return f"failed to get parent queue {cursor} of queue {name}: {QueueIndex.not_found(cursor)}"
        cursor = queue_spec(found).get("parent", "")
    parent_queue = index.get(parent)
    if parent_queue is None:
        return f"failed to get parent queue of queue {name}: {QueueIndex.not_found(parent)}"
    if not index.children(parent):
        pods = parse_or_none(((parent_queue.get("status") or {}).get("allocated") or {}).get("pods", 0))
        if pods is not None and pods.sign():
            return f"queue {parent} cannot be the parent queue of queue {name} because it has allocated Pods: {pods.ceil_value()}"
    return None


def validate_queue(
    operation: str,
    queue: dict[str, Any],
    old: dict[str, Any] | None,
    index: QueueIndex,
    *,
    max_depth: int = 5,
    root_protection: bool = True,
    allocated_pods_check: bool = False,
) -> str | None:
    """The queue validating webhook: the error text, or None when allowed."""
    name = queue_name(queue)
    if operation in ("CREATE", "UPDATE"):
        errs = _field_errors(queue, index)
        if errs:
            return aggregate(errs)
        if operation == "CREATE" or queue_spec(old).get("parent", "") != queue_spec(queue).get("parent", ""):
            problem = _parent_error(queue, index, max_depth)
            if problem:
                return problem
        old_spec, new_spec = queue_spec(old), queue_spec(queue)
        changed = [
            not semantic_equal({"capability": new_spec.get("capability")}, {"capability": old_spec.get("capability")}),
            not semantic_equal({"deserved": new_spec.get("deserved")}, {"deserved": old_spec.get("deserved")}),
            not semantic_equal(new_spec.get("guarantee"), old_spec.get("guarantee")),
        ]
        if root_protection and operation == "UPDATE" and name == "root" and old is not None and any(changed):
            return "root queue's resource attributes (capability, deserved, guarantee) cannot be modified"
        needs = name != "root" and (
            operation == "CREATE" or queue_spec(old).get("parent", "") != queue_spec(queue).get("parent", "") or any(changed)
        )
        return hierarchical_resource_error(queue, index) if needs else None
    if operation == "DELETE":
        if name in ("default", "root"):
            return f"`{name}` queue can not be deleted"
        found = index.get(name)
        if found is None:
            return QueueIndex.not_found(name)
        if allocated_pods_check:
            pods = parse_or_none(((found.get("status") or {}).get("allocated") or {}).get("pods", 0))
            if pods is not None and pods.sign():
                return f"queue {name} cannot be deleted because it has allocated Pods: {pods.ceil_value()}"
        children = [queue_name(c) for c in index.children(name)]
        if children:
            return f"queue {name} can not be deleted because it has {len(children)} child queues: {', '.join(children)}"
        return None
    return f"invalid operation `{operation}`, expect operation to be `CREATE`, `UPDATE` or `DELETE`"
