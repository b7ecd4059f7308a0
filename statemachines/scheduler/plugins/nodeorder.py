"""nodeorder plugin (`pkg/scheduler/plugins/nodeorder/nodeorder.go`, reference §5.7): kube-scheduler's
LeastAllocated (cpu and memory weighted 50/50, with the non-zero request defaults) and
BalancedAllocation (cpu, memory, nvidia.com/gpu), each times its weight, per node; and, normalized
over the candidate nodes as Volcano's BatchNodeOrder does, NodeAffinity (the pod's preferred terms:
the matching weights summed, scaled to 0-100 by the largest) and TaintToleration (PreferNoSchedule
taints the pod does not tolerate, counted, scaled to 100-0), times `nodeaffinity.weight` (2) and
`tainttoleration.weight` (3). Those two apply only to a pod with preferred terms, or on a session
with a PreferNoSchedule taint the pod does not tolerate: otherwise they give every node the same
value, which cannot change a choice.

Also normalized over the candidates: InterPodAffinity (the pod's preferred pod (anti-)affinity
terms against the placed pods, and the placed pods' preferred terms against the pod) and
PodTopologySpread (the pod's ScheduleAnyway constraints, or the system-default ones for a pod a
Service, ReplicationController, ReplicaSet or StatefulSet selects), times `podaffinity.weight` (2) and
`podtopologyspread.weight` (2), from the counts the predicates' InterPodAffinity and
PodTopologySpread filters keep (`plugins/interpod.py`, `plugins/spread.py`); each applies only
to a pod it can score (otherwise every node gets the same value).

ImageLocality (`images.image_score`: the pod's images the node holds, by size and by the share
of nodes holding them), per node and not normalized, times `imagelocality.weight` (1), as Volcano
runs it among its NodeOrderFn plugins; added only when some node reports images (otherwise it is 0
everywhere).
"""

from __future__ import annotations

from typing import cast

from statemachines.scheduler.accounting import NodeState
from statemachines.scheduler.config import PluginOption, arg_int
from statemachines.scheduler.framework import Session
from statemachines.scheduler.images import image_score
from statemachines.scheduler.plugins.predicates import matches_term, pod_indexes, tolerates
from statemachines.scheduler.plugins.spread import bounds, normalized
from statemachines.scheduler.state import TaskState

NAME = "nodeorder"
MAX_SCORE = 100
GPU = "nvidia.com/gpu"


def least_allocated(task: TaskState, node: NodeState) -> int:
    """k8s LeastAllocated: per resource (alloc - requested) * 100 // alloc, weighted 50/50."""
    alloc = node.alloc
    score = weight = 0
    cap = int(alloc.cpu)
    if cap:
        req = int(node.nz_cpu + task.fact.nz_cpu)
        score += 50 * ((cap - req) * MAX_SCORE // cap if req <= cap else 0)
        weight += 50
    cap = int(alloc.mem)
    if cap:
        req = int(node.nz_mem + task.fact.nz_mem)
        score += 50 * ((cap - req) * MAX_SCORE // cap if req <= cap else 0)
        weight += 50
    return score // weight if weight else 0


def balanced_allocation(task: TaskState, node: NodeState) -> int:
    """k8s BalancedAllocation: 100 * (1 - std of requested/allocatable fractions)."""
    alloc = node.alloc
    req = task.req
    fractions = []
    cap = int(alloc.cpu)
    if cap:
        fractions.append(min((node.rq_cpu + req.cpu) / cap, 1.0))
    cap = int(alloc.mem)
    if cap:
        fractions.append(min((node.rq_mem + req.mem) / cap, 1.0))
    pod_gpu = req.sc.get(GPU, 0.0)
    cap = int(alloc.sc.get(GPU, 0.0))
    if pod_gpu and cap:
        fractions.append(min((node.rq_gpu + pod_gpu) / cap, 1.0))
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = sum(fractions) / len(fractions)
        std = (sum((f - mean) ** 2 for f in fractions) / len(fractions)) ** 0.5
    else:
        std = 0.0
    return int((1 - std) * MAX_SCORE)


def combined(least: int, balanced: int):
    """One scorer for both (the hot loop calls one function per node)."""

    def score(task: TaskState, node: NodeState) -> float:
        total = 0.0
        if least:
            total += least_allocated(task, node) * least
        if balanced:
            total += balanced_allocation(task, node) * balanced
        return total

    return score


def image_locality(ssn: Session, weight: int):
    """ImageLocality's score times `weight` (totalNumNodes: the session's nodes, Volcano's node map)."""
    total = len(ssn.node_list)

    def score(task: TaskState, node: NodeState) -> float:
        images = node.fact.images
        if not images:
            return 0.0
        fact = task.fact
        return float(image_score(fact.images, fact.containers, images, total) * weight)

    return score


def node_affinity(weight: int):
    """NodeAffinity's score of the pod's preferred terms, DefaultNormalizeScore, times `weight`."""

    def needed(fact) -> bool:
        return bool(fact.placement.preferred)

    def score(fact, nodes: list[NodeState]) -> list[float]:
        terms = [(w, term) for w, term in fact.placement.preferred if w]
        raw = [sum(w for w, term in terms if matches_term(term, node.fact)) for node in nodes]
        top = max(raw, default=0)
        return [float(MAX_SCORE * r // top * weight) if top else 0.0 for r in raw]

    return needed, score


def prefer_no_schedule(placement, node) -> int:
    """TaintToleration's score: the node's PreferNoSchedule taints the pod's tolerations (of effect
    PreferNoSchedule or any) do not tolerate."""
    tolerations = tuple(t for t in placement.tolerations if t[3] in ("", "PreferNoSchedule"))
    return sum(1 for t in node.taints if t.effect == "PreferNoSchedule"
               and not tolerates(tolerations, t.key, t.value, t.effect))


def taint_toleration(ssn: Session, weight: int):
    """TaintToleration's score, reversed DefaultNormalizeScore, times `weight`."""
    tainted = [node.fact for node in ssn.node_list if any(t.effect == "PreferNoSchedule" for t in node.fact.taints)]
    needs: dict[tuple, bool] = {}

    def needed(fact) -> bool:
        placement = fact.placement
        answer = needs.get(placement.key)
        if answer is None:
            answer = needs[placement.key] = any(prefer_no_schedule(placement, node) for node in tainted)
        return answer

    def score(fact, nodes: list[NodeState]) -> list[float]:
        raw = [prefer_no_schedule(fact.placement, node.fact) for node in nodes]
        top = max(raw, default=0)
        return [float((MAX_SCORE - MAX_SCORE * r // top if top else MAX_SCORE) * weight) for r in raw]

    return needed, score


def pod_affinity(ssn: Session, weight: int):
    """InterPodAffinity's score (`interpodaffinity/scoring.go`): per node the topology scores of its
    label values summed, then kube-scheduler's NormalizeScore for it (min to max over the candidates
    scaled to 0-100; all 0 when they are equal), times `weight`."""
    interpod = pod_indexes(ssn).interpod()

    def score(fact, nodes: list[NodeState]) -> list[float]:
        topology = interpod.topology_score(fact)
        keys = tuple(dict.fromkeys(key for key, _ in topology))
        raw = []
        for node in nodes:
            labels = node.fact.labels
            raw.append(sum(topology.get((key, labels[key]), 0) for key in keys if key in labels))
        low, high = min(raw, default=0), max(raw, default=0)
        if high == low:
            return [0.0] * len(raw)
        return [float(int(MAX_SCORE * ((r - low) / (high - low))) * weight) for r in raw]

    return interpod.scored, score


class SpreadScorer:
    """PodTopologySpread's score of the ScheduleAnyway constraints, the pod's own or the system-default
    ones (`podtopologyspread/scoring.go`): the raw scores, then its NormalizeScore (a node without
    the constraints' keys when they are required 0; otherwise 100 * (max + min - score) // max over
    the others, 100 when the max is 0), times `weight`. The session keeps it as `spread_scorer`: the
    node index (actions/nodeindex.py) answers for a task only it scores, from the same pieces."""

    bounds = staticmethod(bounds)

    def __init__(self, ssn: Session, weight: int) -> None:
        self.spread = pod_indexes(ssn).spread()
        self.weight = weight

    def needed(self, fact) -> bool:
        return self.spread.soft(fact) is not None

    def extra(self, raw: int | None, low: int, high: int) -> float:
        """One node's weighted score from its raw score and the candidates' bounds."""
        return float(normalized(raw, low, high) * self.weight)

    def score(self, fact, nodes: list[NodeState]) -> list[float]:
        # a list: the session asks only when needed(fact), when the pod has ScheduleAnyway constraints
        raw = cast("list[int | None]", self.spread.raw_scores(fact, nodes))
        low, high = bounds(raw)
        extra = self.extra
        return [extra(r, low, high) for r in raw]


def open_plugin(ssn: Session, option: PluginOption) -> None:
    if not option.enabled("node_order"):
        return
    args = option.arguments
    least = arg_int(args, "leastrequested.weight", 1)
    balanced = arg_int(args, "balancedresource.weight", 1)
    if least or balanced:
        ssn.scorers.append(combined(least, balanced))
    images = arg_int(args, "imagelocality.weight", 1)
    if images and any(node.fact.images for node in ssn.node_list):
        ssn.scorers.append(image_locality(ssn, images))
    affinity = arg_int(args, "nodeaffinity.weight", 2)
    if affinity:
        ssn.batch_scorers.append(node_affinity(affinity))
    taints = arg_int(args, "tainttoleration.weight", 3)
    if taints:
        ssn.batch_scorers.append(taint_toleration(ssn, taints))
    inter = arg_int(args, "podaffinity.weight", 2)
    if inter:
        ssn.batch_scorers.append(pod_affinity(ssn, inter))
    spread = arg_int(args, "podtopologyspread.weight", 2)
    if spread:
        scorer = ssn.spread_scorer = SpreadScorer(ssn, spread)
        ssn.batch_scorers.append((scorer.needed, scorer.score))
