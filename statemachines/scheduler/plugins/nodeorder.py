"""nodeorder plugin (`pkg/scheduler/plugins/nodeorder/nodeorder.go`, reference §5.7): kube-scheduler's
LeastAllocated (cpu and memory weighted 50/50, with the non-zero request defaults) and
BalancedAllocation (cpu, memory, nvidia.com/gpu), each times its weight.

The other nodeorder scores (node affinity preferred terms, taint toleration PreferNoSchedule,
inter-pod affinity, topology spread, image locality) are not computed: without preferred
affinities, PreferNoSchedule taints, pod affinities or images they give every node the same
value, which cannot change a choice; vcbus documents this as a difference (docs/scheduler.md).
"""

from __future__ import annotations

from statemachines.scheduler.config import PluginOption, arg_int
from statemachines.scheduler.framework import Session
from statemachines.scheduler.accounting import NodeState
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
        alloc = node.alloc
        fact = task.fact
        req = task.req
        total = 0.0
        cap_cpu = int(alloc.cpu)
        cap_mem = int(alloc.mem)
        if least:
            s = w = 0
            if cap_cpu:
                r = int(node.nz_cpu + fact.nz_cpu)
                s += 50 * ((cap_cpu - r) * MAX_SCORE // cap_cpu if r <= cap_cpu else 0)
                w += 50
            if cap_mem:
                r = int(node.nz_mem + fact.nz_mem)
                s += 50 * ((cap_mem - r) * MAX_SCORE // cap_mem if r <= cap_mem else 0)
                w += 50
            if w:
                total += (s // w) * least
        if balanced:
            pod_gpu = req.sc.get(GPU, 0.0)
            if pod_gpu:
                total += balanced_allocation(task, node) * balanced
            else:
                fractions = 0
                f1 = f2 = 0.0
                if cap_cpu:
                    f1 = (node.rq_cpu + req.cpu) / cap_cpu
                    if f1 > 1.0:
                        f1 = 1.0
                    fractions += 1
                if cap_mem:
                    f2 = (node.rq_mem + req.mem) / cap_mem
                    if f2 > 1.0:
                        f2 = 1.0
                    fractions += 1
                std = abs((f1 - f2) / 2) if fractions == 2 else 0.0
                total += int((1 - std) * MAX_SCORE) * balanced
        return total

    return score


def open_plugin(ssn: Session, option: PluginOption) -> None:
    if not option.enabled("node_order"):
        return
    args = option.arguments
    least = arg_int(args, "leastrequested.weight", 1)
    balanced = arg_int(args, "balancedresource.weight", 1)
    if least or balanced:
        ssn.scorers.append(combined(least, balanced))
