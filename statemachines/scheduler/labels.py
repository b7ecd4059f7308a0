"""Label requirements and selectors, as the scheduler matches them against node and pod labels.

A requirement is `(key, operator, values)`; a selector is a tuple of requirements that must
all hold (`metav1.LabelSelectorAsSelector`: matchLabels become `In` of one value). `None`
stands for a nil selector, which matches nothing; `()` matches everything.
"""

from __future__ import annotations

from typing import Any

Requirement = tuple[str, str, tuple[str, ...]]
Selector = tuple[Requirement, ...]


def requirement(labels: dict[str, str], req: Requirement) -> bool:
    key, operator, values = req
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt"):
        if not present or len(values) != 1:
            return False
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if operator == "Gt" else have < want
    return False


def matches(selector: Selector | None, labels: dict[str, str]) -> bool:
    if selector is None:
        return False
    for req in selector:
        if not requirement(labels, req):
            return False
    return True


def compile_selector(selector: Any) -> Selector | None:
    """A `LabelSelector` view (objects.LabelSelector) as a selector; None for a nil one."""
    if selector is None:
        return None
    reqs = [(k, "In", (v,)) for k, v in sorted((selector.match_labels or {}).items())]
    reqs.extend((r.key, r.operator, tuple(r.values or ())) for r in selector.match_expressions or ())
    return tuple(reqs)


def requirements(reqs: Any) -> tuple[Requirement, ...]:
    """`Requirement` views (objects.Requirement) as requirements."""
    return tuple((r.key, r.operator, tuple(r.values or ())) for r in reqs or ())


def selector_terms(selector: Any) -> tuple:
    """A `NodeSelector` view's terms as (matchExpressions, matchFields) requirement tuples."""
    return tuple((requirements(term.match_expressions), requirements(term.match_fields))
                 for term in selector.node_selector_terms or ())


def with_label_keys(selector: Selector | None, labels: dict[str, str], keys: Any, operator: str) -> Selector | None:
    """`matchLabelKeys` (operator In) / `mismatchLabelKeys` (NotIn): the pod's own values of `keys` added."""
    if selector is None or not keys:
        return selector
    extra = tuple((k, operator, (labels[k],)) for k in keys if k in labels)
    return selector + extra


def anchor(selector: Selector | None) -> tuple[str, str] | None:
    """A (key, value) every matching pod carries (the first single-valued `In`), to bucket selectors by."""
    for key, operator, values in selector or ():
        if operator == "In" and len(values) == 1:
            return key, values[0]
    return None
