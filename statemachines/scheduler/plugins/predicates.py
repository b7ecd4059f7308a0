"""predicates plugin (`pkg/scheduler/plugins/predicates/predicates.go`, reference §5.4): the node filters.

The dynamic checks run per evaluation: the pod count (`node(s) pod number exceeded`, status
Unschedulable, evaluation continues). The stable filters depend only on the node object and
the pod's placement (nodeSelector, required node affinity, tolerations), so they are computed
once per (placement, node) and session: NodeUnschedulable, NodeAffinity, TaintToleration, in
that order; each failure is UnschedulableAndUnresolvable and ends the node's evaluation.
Messages are kube-scheduler's (`pkg/scheduler/framework/plugins/{nodeunschedulable,
nodeaffinity,tainttoleration}` in Kubernetes).
"""

from __future__ import annotations

from statemachines.scheduler.config import PluginOption, arg_bool
from statemachines.scheduler.fiterrors import (
    NODE_AFFINITY,
    NODE_UNSCHEDULABLE,
    UNRESOLVABLE,
)
from statemachines.scheduler.framework import Session
from statemachines.scheduler.model import NodeFact
from statemachines.scheduler.tasks import Placement

NAME = "predicates"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


class Filters:
    """The enabled stable filters of this session and their per-placement results."""

    def __init__(self, *, node_affinity: bool = True, taint_toleration: bool = True) -> None:
        self.node_affinity = node_affinity
        self.taint_toleration = taint_toleration
        self.cache: dict[tuple, list[tuple[int, str] | None]] = {}
        self.keep = True  # False: nothing is cached (run_session(cache_predicates=False))

    def static(self, placement: Placement, nodes: list[NodeFact]) -> list[tuple[int, str] | None]:
        """Per node (by session index): the first stable-filter failure, or None."""
        if not self.keep:
            return [self.check(placement, node) for node in nodes]
        key = placement.key
        result = self.cache.get(key)
        if result is None:
            result = self.cache[key] = [self.check(placement, node) for node in nodes]
        return result

    def check(self, placement: Placement, node: NodeFact) -> tuple[int, str] | None:
        if node.unschedulable and not tolerates(placement.tolerations, UNSCHEDULABLE_TAINT, "", "NoSchedule"):
            return (UNRESOLVABLE, NODE_UNSCHEDULABLE)
        if self.node_affinity and not matches_affinity(placement, node):
            return (UNRESOLVABLE, NODE_AFFINITY)
        if self.taint_toleration:
            for taint in node.taints:
                if taint.effect not in ("NoSchedule", "NoExecute"):
                    continue
                if not tolerates(placement.tolerations, taint.key, taint.value, taint.effect):
                    return (UNRESOLVABLE, f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}")
        return None


def tolerates(tolerations: tuple, key: str, value: str, effect: str) -> bool:
    """`TolerationsTolerateTaint` (core/v1 Toleration.ToleratesTaint)."""
    for t_key, operator, t_value, t_effect in tolerations:
        if t_effect and t_effect != effect:
            continue
        if t_key and t_key != key:
            continue
        if not t_key and operator != "Exists":
            continue
        if operator == "Exists":
            return True
        if operator in ("", "Equal") and t_value == value:
            return True
    return False


def matches_affinity(placement: Placement, node: NodeFact) -> bool:
    labels = node.labels
    for key, value in placement.node_selector:
        if labels.get(key) != value:
            return False
    terms = placement.terms
    if terms is None:
        return True
    for expressions, fields in terms:
        if not expressions and not fields:
            continue  # an empty term matches nothing
        if all(_requirement(labels, r) for r in expressions) and all(
            _requirement({"metadata.name": node.name}, r) for r in fields
        ):
            return True
    return False


def _requirement(labels: dict[str, str], req: tuple[str, str, tuple[str, ...]]) -> bool:
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


def open_plugin(ssn: Session, option: PluginOption) -> None:
    if not option.enabled("predicate"):
        return
    args = option.arguments
    ssn.filters = Filters(
        node_affinity=arg_bool(args, "predicate.NodeAffinityEnable", True),
        taint_toleration=arg_bool(args, "predicate.TaintTolerationEnable", True),
    )
    ssn.check_pod_count = True
    ssn.add("pre_predicate", NAME, lambda task: None)
    ssn.add("predicate", NAME, lambda task, node: None)
