"""Finding and choosing nodes for a task: the hot loop of every action.

- `Search.predicate_nodes` is `PredicateHelper.PredicateNodes` (`pkg/scheduler/util/predicate_helper.go`)
  with allocate's own check first (`InitResreq <= FutureIdle`, `Insufficient <first dimension>`),
  then the predicates plugin (pod count, then the cached stable filters). With more than 100
  nodes it stops after `num_to_find` feasible nodes, starting at the session's rotating
  offset, which advances by the nodes examined (Volcano keeps it in a process-wide atomic;
  vcbus starts every session at 0, so the same cut gives the same choice). The per-call
  predicate error cache (tasks of one job and role reuse a node's failure) is honoured.
- `best_node` splits the feasible nodes into the Idle gradient and the FutureIdle gradient,
  scores the first non-empty one and takes the highest score, ties going to the smallest
  node name (Volcano picks uniformly at random).

Node scores are cached per (task scoring signature, node, node version): tasks of one role
share a signature and an allocation changes one node, so most scores are reused.
"""

from __future__ import annotations

from statemachines.scheduler.accounting import NodeState
from statemachines.scheduler.fiterrors import (
    NODE_POD_NUMBER_EXCEEDED,
    UNRESOLVABLE,
    UNSCHEDULABLE,
    FitError,
    FitErrors,
    fit_error,
)
from statemachines.scheduler.framework import Session
from statemachines.scheduler.resources import EPS
from statemachines.scheduler.state import TaskState

MIN_NODES_TO_FIND = 100
MIN_PERCENTAGE = 5
BASELINE_PERCENTAGE = 50


def num_to_find(n: int) -> int:
    """`CalculateNumOfFeasibleNodesToFind` with the default flags."""
    if n <= MIN_NODES_TO_FIND:
        return n
    percentage = BASELINE_PERCENTAGE - n // 125
    if percentage < MIN_PERCENTAGE:
        percentage = MIN_PERCENTAGE
    return max(n * percentage // 100, MIN_NODES_TO_FIND)


def insufficient(task: TaskState, node: NodeState) -> str | None:
    """The first dimension where req > FutureIdle (with EPS), as `Insufficient <name>`."""
    req = task.req
    fut = node.future
    if req.cpu - fut.cpu >= EPS:
        return "Insufficient cpu"
    if req.mem - fut.mem >= EPS:
        return "Insufficient memory"
    fsc = fut.sc
    for name, value in task_scalars(task):
        if value - fsc.get(name, 0.0) >= EPS:
            return "Insufficient " + name
    return None


def task_scalars(task: TaskState) -> tuple:
    return task.fact.scalars


def fits_idle(task: TaskState, node: NodeState) -> bool:
    """`InitResreq.LessEqual(node.Idle, Zero)`."""
    req = task.req
    idle = node.idle
    if req.cpu - idle.cpu >= EPS or req.mem - idle.mem >= EPS:
        return False
    isc = idle.sc
    for name, value in task_scalars(task):
        if value - isc.get(name, 0.0) >= EPS:
            return False
    return True


def fits_future(task: TaskState, node: NodeState) -> bool:
    return insufficient(task, node) is None


class Search:
    """One `PredicateHelper`: its error cache lives as long as the search object."""

    __slots__ = ("ssn", "cache_enabled", "errors")

    def __init__(self, ssn: Session, cache_enabled: bool) -> None:
        self.ssn = ssn
        self.cache_enabled = cache_enabled
        self.errors: dict[str, dict[str, FitError]] = {}

    def static(self, task: TaskState) -> list | None:
        filters = self.ssn.filters
        if filters is None:
            return None
        return filters.static(task.fact.placement, self.ssn.node_facts)

    def group(self, task: TaskState) -> str:
        """The task's key in the error cache ("" when the cache does not apply)."""
        if self.cache_enabled and task.role:
            return f"{task.job.key if task.job else ''}/{task.role}"
        return ""

    def node_error(self, task: TaskState, node: NodeState, static, dynamic, pod_count: bool, resource_check: bool,
                   preempt: bool) -> FitError | None:
        """One node's failure for the task, as `predicate_nodes` finds it (None: the node fits)."""
        if resource_check:
            reason = insufficient(task, node)
            if reason is not None:
                return fit_error(((UNSCHEDULABLE, reason),))
        statuses: tuple = ()
        if pod_count and node.fact.max_pods <= node.npods:
            statuses = ((UNSCHEDULABLE, NODE_POD_NUMBER_EXCEEDED),)
        st = static[node.index] if static is not None else None
        if st is not None:
            statuses = statuses + (st,)
        elif dynamic is not None:
            found = dynamic(node)
            if preempt:  # evicting may lift an Unschedulable failure, never an unresolvable one
                found = tuple(s for s in found if s[0] == UNRESOLVABLE)
            statuses = statuses + found
        return fit_error(statuses) if statuses else None

    def record(self, task: TaskState, node: NodeState, error: FitError) -> None:
        """A failure the scan would have put in the error cache."""
        group = self.group(task)
        if group:
            self.errors.setdefault(group, {})[node.name] = error

    def predicate_nodes(
        self, task: TaskState, nodes: list[NodeState], *, resource_check: bool = True, preempt: bool = False
    ) -> tuple[list[NodeState], FitErrors]:
        """Feasible nodes and the failures. `resource_check`: allocate's own FutureIdle check first;
        `preempt`: `PredicateForPreemptAction`, where only unresolvable failures reject a node."""
        ssn = self.ssn
        fe = FitErrors()
        total = len(nodes)
        if total == 0:
            return [], fe
        want = num_to_find(total)
        static = self.static(task)
        dynamic = ssn.dynamic.prepare(task.fact) if ssn.dynamic is not None else None
        pod_count = ssn.check_pod_count and not preempt
        if preempt:
            resource_check = False
        group = self.group(task)
        cache = self.errors.get(group) if group else None
        failed_before = cache is not None
        start = ssn.node_offset if total > MIN_NODES_TO_FIND else 0
        found: list[NodeState] = []
        processed = 0
        for i in range(total):
            node = nodes[(start + i) % total]
            processed += 1
            if failed_before:
                cached = cache.get(node.name)  # type: ignore[union-attr]  # failed_before: the cache is there
                if cached is not None:
                    fe.set_node(node.name, cached)
                    continue
            error = self.node_error(task, node, static, dynamic, pod_count, resource_check, preempt)
            if error is not None:
                if group:
                    self.errors.setdefault(group, {})[node.name] = error
                fe.set_node(node.name, error)
                continue
            if len(found) >= want:
                break
            found.append(node)
        if total > MIN_NODES_TO_FIND:
            ssn.node_offset = (start + processed) % total
        return found, fe


def best_node(ssn: Session, task: TaskState, candidates: list[NodeState]) -> NodeState | None:
    """§5.6: the Idle gradient, else the FutureIdle gradient; highest score, ties by node name."""
    idle = []
    future = []
    for node in candidates:
        if fits_idle(task, node):
            idle.append(node)
        elif fits_future(task, node):
            future.append(node)
    for gradient in (idle, future):
        if not gradient:
            continue
        if len(gradient) == 1:
            return gradient[0]
        return _highest(ssn, task, gradient)
    return None


def node_score(ssn: Session, task: TaskState, node: NodeState) -> float:
    """The task's per-node score on `node`: the plugins' node orders summed (Volcano's one
    PrioritizeNodes, `pkg/scheduler/util/scheduler_helper.go`); the batch scores are added apart."""
    score = 0.0
    for fn in ssn.scorers:
        score += fn(task, node)
    return score


def batch_scores(ssn: Session, task: TaskState, nodes: list[NodeState]) -> list[float] | None:
    """The scores normalized over the candidate nodes (kube-scheduler's NormalizeScore, Volcano's
    BatchNodeOrder), summed per node; None when none applies to this task."""
    out = None
    for needed, score in ssn.batch_scorers:
        if not needed(task.fact):
            continue
        values = score(task.fact, nodes)
        out = values if out is None else [a + b for a, b in zip(out, values, strict=True)]  # one per node
    return out


def _highest(ssn: Session, task: TaskState, nodes: list[NodeState]) -> NodeState:
    scorers = ssn.scorers
    extra = batch_scores(ssn, task, nodes)
    if not scorers and extra is None:
        return min(nodes, key=lambda n: n.name)
    sig = task.fact.score_sig
    cache = ssn.score_cache.get(sig) if ssn.cache_predicates else {}
    if cache is None:
        cache = ssn.score_cache[sig] = {}
    best = None
    best_score = 0.0
    for i, node in enumerate(nodes):
        entry = cache.get(node.index)
        if entry is not None and entry[0] == node.version:
            score = entry[1]
        else:
            score = node_score(ssn, task, node)
            cache[node.index] = (node.version, score)
        if extra is not None:
            score += extra[i]
        if best is None or score > best_score or (score == best_score and node.name < best.name):
            best = node
            best_score = score
    return best  # type: ignore[return-value]  # nodes is never empty here: a best was set


def score_nodes(ssn: Session, task: TaskState, nodes: list[NodeState]) -> list[tuple[float, NodeState]]:
    """Every node's total score (for preempt/reclaim, which try nodes best first)."""
    out = []
    extra = batch_scores(ssn, task, nodes)
    for i, node in enumerate(nodes):
        score = node_score(ssn, task, node)
        if extra is not None:
            score += extra[i]
        out.append((score, node))
    out.sort(key=lambda pair: (-pair[0], pair[1].name))
    return out
