"""predicates plugin (`pkg/scheduler/plugins/predicates/predicates.go`, reference §5.4): the node filters.

The dynamic checks run per evaluation: the pod count (`node(s) pod number exceeded`, status
Unschedulable, evaluation continues) first; after the stable filters, for a node that passed
them, the filters that depend on the pods around: NodePorts (`plugins/ports.py`),
InterPodAffinity (`plugins/interpod.py`), VolumeZone, PodTopologySpread DoNotSchedule
(`plugins/spread.py`) and VolumeBinding (`volumes.py`, whose PreFilters run at PrePredicate), in
Volcano's filter order, each Unschedulable failure kept and an
UnschedulableAndUnresolvable one ending the node's evaluation. The stable filters depend only on the node object and
the pod's placement (nodeSelector, required node affinity, tolerations), so they are computed
once per (placement, node) and session: NodeUnschedulable, NodeAffinity, TaintToleration, in
that order; each failure is UnschedulableAndUnresolvable and ends the node's evaluation.
Messages are kube-scheduler's (`pkg/scheduler/framework/plugins/{nodeunschedulable,
nodeaffinity,tainttoleration}` in Kubernetes).
"""

from __future__ import annotations

from typing import cast

from statemachines.scheduler.config import PluginOption, SchedulerConfig, arg_bool
from statemachines.scheduler.constraints import unevaluated_counts
from statemachines.scheduler.fiterrors import (
    NODE_AFFINITY,
    NODE_UNSCHEDULABLE,
    UNRESOLVABLE,
)
from statemachines.scheduler.framework import Session
from statemachines.scheduler.labels import requirement
from statemachines.scheduler.model import ALLOCATED, PIPELINED, NodeFact
from statemachines.scheduler.plugins import ports
from statemachines.scheduler.plugins.interpod import InterPod, Placed
from statemachines.scheduler.plugins.spread import TopologySpread
from statemachines.scheduler.tasks import Placement, TaskFact
from statemachines.scheduler.volumelimits import VolumeLimits
from statemachines.scheduler.volumes import Prepared, VolumeBinder, prefilter

NAME = "predicates"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
NOT_EVALUATED = "vcbus's scheduler does not evaluate"


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
            taint = untolerated(placement, node)
            if taint is not None:
                return (UNRESOLVABLE, f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}")
        return None


class PodIndexes:
    """The session's placed pods and the inter-pod counts over them (InterPodAffinity's, PodTopologySpread's),
    each made on first use and kept up to date from the allocate events; one per session, shared by
    the predicates' filters and nodeorder's scores (`pod_indexes`)."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.placed = Placed(ssn)
        self._interpod: InterPod | None = None
        self._spread: TopologySpread | None = None
        ssn.allocate_handlers.append(lambda task: self.changed(task, 1))
        ssn.deallocate_handlers.append(lambda task: self.changed(task, -1))

    def changed(self, task, delta: int) -> None:
        self.placed.changed(task, delta)
        if self._interpod is not None:
            self._interpod.changed(task, delta)
        if self._spread is not None:
            self._spread.changed(task, delta)

    def interpod(self) -> InterPod:
        if self._interpod is None:
            self._interpod = InterPod(self.ssn, self.placed)
        return self._interpod

    def spread(self) -> TopologySpread:
        if self._spread is None:
            self._spread = TopologySpread(self.ssn, self.placed, node_included)
        return self._spread


def pod_indexes(ssn: Session) -> PodIndexes:
    """The session's `PodIndexes`, made on the first call (at plugin open, before any allocation)."""
    if ssn.pod_indexes is None:
        ssn.pod_indexes = PodIndexes(ssn)
    return cast(PodIndexes, ssn.pod_indexes)  # set here only (the session holds it untyped: plugins import it)


class VolumeChecks:
    """VolumeZone's and VolumeBinding's PreFilter per task (`volumes.prefilter`), once per session; with
    VolumeBinding, its Reserve and Unreserve as the predicates plugin runs them on allocate and deallocate
    (`volumes.VolumeBinder`: the static PVs assumed for unbound WaitForFirstConsumer claims)."""

    def __init__(self, ssn: Session, *, zone: bool, binding: bool) -> None:
        self.ssn = ssn
        self.zone = zone
        self.binding = binding
        self.prepared: dict[str, Prepared] = {}
        self.binder = VolumeBinder(ssn.snapshot.volumes) if binding else None
        if self.binder is not None:
            ssn.volume_binder = self.binder
            ssn.allocate_handlers.append(self.reserve)
            ssn.deallocate_handlers.append(self.unreserve)

    def reserve(self, task) -> None:
        """Reserve: a task placed (allocated or pipelined; not one un-evicted) assumes its node's PVs."""
        if task.status not in (ALLOCATED, PIPELINED) or not task.fact.claims:
            return
        prepared = self.get(task.fact)
        if prepared is not None and prepared.unbound and self.binder is not None:
            self.binder.reserve(task.uid, prepared.unbound, self.ssn.nodes[task.node].fact.labels)

    def unreserve(self, task) -> None:
        if self.binder is not None and self.binder.bindings:
            self.binder.unreserve(task.uid)

    def get(self, fact: TaskFact) -> Prepared | None:
        """The task's checks; None when it has no claim."""
        if not fact.claims:
            return None
        prepared = self.prepared.get(fact.uid)
        if prepared is None:
            prepared = self.prepared[fact.uid] = prefilter(self.ssn.snapshot, fact, zone=self.zone,
                                                           binding=self.binding, binder=self.binder)
        return prepared

    def pre_predicate(self, task) -> str | None:
        prepared = self.get(task.fact)
        if prepared is None:
            return None
        if prepared.error:
            return prepared.error
        return f"{NOT_EVALUATED} {prepared.unevaluated}" if prepared.unevaluated else None


class Dynamic:
    """The filters that depend on the pods placed so far (NodePorts, InterPodAffinity, PodTopologySpread),
    and the volume filters (VolumeZone, VolumeBinding), which depend on the task's claims."""

    def __init__(self, ssn: Session, *, node_ports: bool = True, pod_affinity: bool = True,
                 topology_spread: bool = True, volumes: VolumeChecks | None = None,
                 volume_limits: bool = True) -> None:
        self.ssn = ssn
        self.volumes = volumes
        self.limits = VolumeLimits(ssn.snapshot) if volume_limits and ssn.snapshot.csinodes else None
        self.node_ports = node_ports
        self.labels: dict[str, dict] = {}
        self.interpod = pod_indexes(ssn).interpod() if pod_affinity else None
        self.spread = pod_indexes(ssn).spread() if topology_spread else None

    def applies(self, fact: TaskFact) -> bool:
        """Whether any of these filters can fail a node for this task (else the node index answers)."""
        if fact.constraints is not None and fact.constraints.filtered:
            return True
        if self.volumes is not None and fact.claims:
            return True
        if self.limits is not None and (fact.claims or fact.inline_volumes):
            return True
        return self.interpod is not None and bool(self.interpod.existing(fact))

    def prepare(self, fact: TaskFact):
        """The task's per-node check (node -> statuses, () when it passes), or None when nothing applies."""
        prepared = self._prepare(fact)
        return prepared[0] if prepared is not None else None

    def failing(self, fact: TaskFact):
        """(The per-node check, the indexes of the nodes it fails) without examining every node, or
        None when those nodes cannot be listed from labels (host ports, required pod affinity)."""
        prepared = self._prepare(fact)
        if prepared is None or prepared[1] is None:
            return None
        run, pairs, keys = prepared
        nodes = self.ssn.node_list
        candidates: set[int] = set()
        for key, value in pairs:
            candidates.update(self._by_label(key).get(value, ()))
        for key in keys:
            candidates.update(self._by_label(key).get(None, ()))
        return run, {i for i in candidates if run(nodes[i])}

    def _by_label(self, key: str) -> dict:
        """Node indexes by their value of label `key` (None: the nodes without it)."""
        index = self.labels.get(key)
        if index is None:
            index = self.labels[key] = {}
            for node in self.ssn.node_list:
                index.setdefault(node.fact.labels.get(key), []).append(node.index)
        return index

    def _prepare(self, fact: TaskFact):
        """(run, pairs, keys): the check; the (key, value) pairs outside which nodes pass, None if
        not enumerable; the labels a node must carry."""
        checks = []
        pairs: list | None = []
        keys: tuple = ()
        if self.node_ports:
            check = ports.prepare(fact)
            if check is not None:
                checks.append((check, False))
                pairs = None
        if self.interpod is not None:
            prepared = self.interpod.prepare(fact)
            if prepared is not None:
                checks.append((prepared[0], True))
                pairs = None if pairs is None or prepared[1] is None else pairs + prepared[1]
        limited = self.limits.prepare(fact) if self.limits is not None else None
        if limited is not None:
            checks.append((limited, False))
            pairs = None
        volumes = self.volumes.get(fact) if self.volumes is not None else None
        if volumes is not None and volumes.topologies:
            checks.append((volumes.zone, True))
            pairs = None
        if self.spread is not None:
            prepared = self.spread.prepare(fact)
            if prepared is not None:
                checks.append((prepared[0], True))
                if pairs is not None:
                    pairs = pairs + prepared[1]
                keys = prepared[2]
        if volumes is not None and (volumes.bound or volumes.unbound):
            checks.append((volumes.binding, True))
            pairs = None
        if not checks:
            return None

        def run(node) -> tuple:
            statuses: tuple = ()
            labels = node.fact.labels
            for check, by_labels in checks:
                status = check(labels) if by_labels else check(node)
                if status is not None:
                    statuses = statuses + (status,)
                    if status[0] == UNRESOLVABLE:
                        break
            return statuses

        return run, pairs, keys


def untolerated(placement: Placement, node: NodeFact):
    """The first NoSchedule/NoExecute taint of the node the placement does not tolerate, or None."""
    for taint in node.taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not tolerates(placement.tolerations, taint.key, taint.value, taint.effect):
            return taint
    return None


def node_included(placement: Placement, node: NodeFact, honor_affinity: bool, honor_taints: bool) -> bool:
    """PodTopologySpread's node inclusion policies."""
    if honor_affinity and not matches_affinity(placement, node):
        return False
    return not (honor_taints and untolerated(placement, node) is not None)


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
    for term in terms:
        if matches_term(term, node):
            return True
    return False


def matches_term(term: tuple, node: NodeFact) -> bool:
    """A node selector term (matchExpressions, matchFields); an empty term matches nothing."""
    expressions, fields = term
    if not expressions and not fields:
        return False
    labels = node.labels
    return all(requirement(labels, r) for r in expressions) and all(
        requirement({"metadata.name": node.name}, r) for r in fields
    )


def unevaluated(task) -> str | None:
    """PrePredicate: a pod asking for something vcbus does not evaluate waits, saying what."""
    field = task.fact.unevaluated
    return f"{NOT_EVALUATED} {field}" if field else None


def volume_flags(option: PluginOption) -> tuple[bool, bool]:
    """`predicate.VolumeZoneEnable`, `predicate.VolumeBindingEnable`."""
    args = option.arguments
    return arg_bool(args, "predicate.VolumeZoneEnable", True), arg_bool(args, "predicate.VolumeBindingEnable", True)


def unevaluated_pods(snapshot, config: SchedulerConfig) -> dict[str, int]:
    """The pending pods a session holds back with "does not evaluate", per field (/metrics): a field of
    the pod's own, or an unbound WaitForFirstConsumer claim, found from its PVC and StorageClass as
    VolumeBinding's PreFilter finds it (when the predicates plugin runs VolumeBinding)."""
    option = next((p for tier in config.tiers for p in tier.plugins if p.name == NAME), None)
    zone, binding = volume_flags(option) if option is not None and option.enabled("predicate") else (False, False)

    def claims(fact: TaskFact) -> str:
        if not fact.claims:
            return ""
        prepared = prefilter(snapshot, fact, zone=zone, binding=binding)
        return "" if prepared.error else prepared.unevaluated

    return unevaluated_counts(snapshot.tasks.values(), claims if binding else None)


def open_plugin(ssn: Session, option: PluginOption) -> None:
    if not option.enabled("predicate"):
        return
    args = option.arguments
    ssn.filters = Filters(
        node_affinity=arg_bool(args, "predicate.NodeAffinityEnable", True),
        taint_toleration=arg_bool(args, "predicate.TaintTolerationEnable", True),
    )
    ssn.check_pod_count = True
    zone, binding = volume_flags(option)
    volumes = VolumeChecks(ssn, zone=zone, binding=binding) if zone or binding else None
    ssn.dynamic = Dynamic(
        ssn,
        node_ports=arg_bool(args, "predicate.NodePortsEnable", True),
        pod_affinity=arg_bool(args, "predicate.PodAffinityEnable", True),
        topology_spread=arg_bool(args, "predicate.PodTopologySpreadEnable", True),
        volumes=volumes,
        volume_limits=arg_bool(args, "predicate.NodeVolumeLimitsEnable", True),
    )
    if volumes is None:
        ssn.add("pre_predicate", NAME, unevaluated)
    else:
        ssn.add("pre_predicate", NAME, lambda task: unevaluated(task) or volumes.pre_predicate(task))
    ssn.add("predicate", NAME, lambda task, node: None)
