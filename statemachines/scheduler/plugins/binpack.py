"""binpack plugin (`pkg/scheduler/plugins/binpack/binpack.go`, reference §5.7): prefer fuller nodes.

score = sum(w_r * (req_r + used_r) / alloc_r) / sum(w_r) * 100 * binpack.weight over the resources
the task requests that have a weight (cpu, memory, and `binpack.resources` extras); 0 if any
of them would not fit."""

from __future__ import annotations

from statemachines.scheduler.accounting import NodeState
from statemachines.scheduler.config import PluginOption, arg_int, arg_str
from statemachines.scheduler.framework import Session
from statemachines.scheduler.state import TaskState

NAME = "binpack"


def weights(args: dict) -> tuple[int, dict[str, int]]:
    weight = arg_int(args, "binpack.weight", 1)
    cpu = arg_int(args, "binpack.cpu", 1)
    if cpu < 0:
        cpu = 1
    mem = arg_int(args, "binpack.memory", 1)
    if mem < 0:
        mem = 1
    per: dict[str, int] = {}
    for name in arg_str(args, "binpack.resources", "").split(","):
        name = name.strip()
        if not name:
            continue
        w = arg_int(args, "binpack.resources." + name, 1)
        per[name] = 1 if w < 0 else w
    per["cpu"] = cpu
    per["memory"] = mem
    return weight, per


def binpack_score(task: TaskState, node: NodeState, weight: int, per: dict[str, int]) -> float:
    score = 0.0
    weight_sum = 0
    req = task.req
    for name in req.names():
        request = req.get(name)
        if request == 0:
            continue
        w = per.get(name)
        if w is None:
            continue
        capacity = node.alloc.get(name)
        if capacity != 0 and w != 0:
            used = request + node.used.get(name)
            if used > capacity:
                return 0.0
            score += used * w / capacity
        weight_sum += w
    if weight_sum > 0:
        score /= weight_sum
    return score * 100 * weight


def open_plugin(ssn: Session, option: PluginOption) -> None:
    if not option.enabled("node_order"):
        return
    weight, per = weights(option.arguments)
    if weight == 0:
        return
    plans: dict[tuple, tuple] = {}  # score signature -> ((name, request, weight), ...), weight sum

    def plan(task: TaskState) -> tuple:
        req = task.req
        dims = []
        weight_sum = 0
        for name in req.names():
            request = req.get(name)
            w = per.get(name)
            if request == 0 or w is None:
                continue
            dims.append((name, request, w))
            weight_sum += w
        return tuple(dims), weight_sum

    def score(task: TaskState, node: NodeState) -> float:
        sig = task.fact.score_sig
        p = plans.get(sig)
        if p is None:
            p = plans[sig] = plan(task)
        dims, weight_sum = p
        total = 0.0
        alloc = node.alloc
        used = node.used
        for name, request, w in dims:
            if name == "cpu":
                capacity, have = alloc.cpu, used.cpu
            elif name == "memory":
                capacity, have = alloc.mem, used.mem
            else:
                capacity, have = alloc.sc.get(name, 0.0), used.sc.get(name, 0.0)
            if capacity != 0 and w != 0:
                after = request + have
                if after > capacity:
                    return 0.0
                total += after * w / capacity
        if weight_sum > 0:
            total /= weight_sum
        return total * 100 * weight

    ssn.scorers.append(score)
