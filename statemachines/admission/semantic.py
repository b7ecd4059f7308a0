"""Kubernetes *semantic* equality (`apiequality.Semantic.DeepEqual`) on JSON-like manifests.

Go compares typed values. For struct fields an absent field and its zero
value are the same thing, so on untyped dicts a missing key, `None`, `[]`,
`{}`, `""`, `0` and `false` are all equal. Go *maps* are different: their key
sets must match (only nil and empty maps are equal); the JSON keys holding
maps in a job spec are listed in `MAP_KEYS`. Resource lists (`QUANTITY_MAPS`)
and `sizeLimit` compare quantities by value (`"1"` == `"1000m"`). The one Go
distinction lost is a pointer to a zero value versus nil.
"""

from __future__ import annotations

from typing import Any

from statemachines.admission.quantity import Quantity, QuantityError

QUANTITY_MAPS = frozenset({"requests", "limits", "overhead", "capacity", "capability", "deserved", "resource"})
MAP_KEYS = QUANTITY_MAPS | {"plugins", "labels", "annotations", "nodeSelector", "matchLabels", "data", "binaryData"}


def _empty(value: Any) -> bool:
    if value is None or value is False or value == "" or value == [] or value == {}:
        return True
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0


def _same_quantity(left: Any, right: Any) -> bool:
    if left == right:
        return True
    try:
        return Quantity.parse(left) == Quantity.parse(right)
    except QuantityError:
        return False


def _map_equal(left: Any, right: Any, *, quantities: bool) -> bool:
    if not isinstance(left, dict) or not isinstance(right, dict):
        return semantic_equal(left, right)
    if set(left) != set(right):
        return False
    if quantities:
        return all(_same_quantity(left[k], right[k]) for k in left)
    return all(semantic_equal(left[k], right[k]) for k in left)


def semantic_equal(left: Any, right: Any) -> bool:
    """Whether `left` and `right` are semantically equal (see the module docstring)."""
    if _empty(left) and _empty(right):
        return True
    if isinstance(left, dict) and isinstance(right, dict):
        for key in set(left) | set(right):
            a, b = left.get(key), right.get(key)
            if _empty(a) and _empty(b):
                continue
            if key in MAP_KEYS:
                same = _map_equal(a, b, quantities=key in QUANTITY_MAPS)
            elif key == "sizeLimit":
                same = _same_quantity(a, b)
            else:
                same = semantic_equal(a, b)
            if not same:
                return False
        return True
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(semantic_equal(a, b) for a, b in zip(left, right, strict=True))
    return bool(left == right)
