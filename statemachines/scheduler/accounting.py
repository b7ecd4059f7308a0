"""A session's nodes and queues: resource accounting per node (`pkg/scheduler/api/node_info.go`,
reference §2.5) and the per-queue attributes proportion fills in (`pkg/scheduler/api/queue_info.go`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from statemachines.scheduler.model import PIPELINED, RELEASING, NodeFact, QueueFact
from statemachines.scheduler.resources import Res

if TYPE_CHECKING:
    from statemachines.scheduler.state import TaskState


class NodeState:
    """A node's accounting in a session (`NodeInfo`): Idle/Used/Releasing/Pipelined and its tasks.

    `future` (= Idle + Releasing - Pipelined) is kept up to date so the hot loop reads it
    directly; `npods` counts the pods the k8s NodeInfo holds (pod-count predicate), `nz_cpu`/`nz_mem` are the k8s scoring's non-zero requests of the node's pods
    and `rq_cpu`/`rq_mem`/`rq_gpu` their plain requests (BalancedAllocation); `version`
    increases on every change (score caches key on it)."""

    __slots__ = (
        "fact",
        "name",
        "index",
        "alloc",
        "idle",
        "used",
        "releasing",
        "pipelined",
        "future",
        "tasks",
        "npods",
        "nz_cpu",
        "nz_mem",
        "rq_cpu",
        "rq_mem",
        "rq_gpu",
        "version",
        "grown",
        "log",
    )

    def __init__(self, fact: NodeFact, index: int, log: list[int] | None = None) -> None:
        self.fact = fact
        self.name = fact.name
        self.index = index
        self.alloc = fact.alloc
        self.idle = fact.alloc.copy()
        self.used = Res()
        self.releasing = Res()
        self.pipelined = Res()
        self.future = fact.alloc.copy()
        self.tasks: dict[str, TaskState] = {}
        self.npods = 0
        self.nz_cpu = self.nz_mem = 0.0
        self.rq_cpu = self.rq_mem = self.rq_gpu = 0.0
        self.version = 0
        self.grown = 0  # changes that freed resources or pod slots (a node that did not fit may fit now)
        self.log = log if log is not None else []  # the session's change log (node indexes)

    def add_task(self, task: TaskState) -> None:
        """`AddTask`: account the task by its current status."""
        req = task.req
        status = task.status
        if status == RELEASING:
            self.idle.sub(req)
            self.releasing.add(req)
            self.used.add(req)
        elif status == PIPELINED:
            self.pipelined.add(req)
            self.future.sub(req)
        else:
            self.idle.sub(req)
            self.used.add(req)
            self.future.sub(req)
        self.tasks[task.uid] = task
        self.version += 1
        self.log.append(self.index)

    def pod_added(self, task: TaskState) -> None:
        """The k8s NodeInfo side (predicates/nodeorder AllocateFunc): pod count and scoring sums."""
        fact = task.fact
        req = task.req
        self.npods += 1
        self.nz_cpu += fact.nz_cpu
        self.nz_mem += fact.nz_mem
        self.rq_cpu += req.cpu
        self.rq_mem += req.mem
        self.rq_gpu += req.sc.get("nvidia.com/gpu", 0.0)
        self.version += 1
        self.log.append(self.index)

    def pod_removed(self, task: TaskState) -> None:
        """The k8s NodeInfo side of DeallocateFunc."""
        self.grown += 1
        fact = task.fact
        req = task.req
        self.npods -= 1
        self.nz_cpu -= fact.nz_cpu
        self.nz_mem -= fact.nz_mem
        self.rq_cpu -= req.cpu
        self.rq_mem -= req.mem
        self.rq_gpu -= req.sc.get("nvidia.com/gpu", 0.0)
        self.version += 1
        self.log.append(self.index)

    def remove_task(self, task: TaskState, status: str) -> None:
        """`RemoveTask` for a task that was added with `status`."""
        if self.tasks.pop(task.uid, None) is None:
            return
        self.grown += 1
        req = task.req
        if status == RELEASING:
            self.releasing.sub(req)
            self.idle.add(req)
            self.used.sub(req)
        elif status == PIPELINED:
            self.pipelined.sub(req)
            self.future.add(req)
        else:
            self.idle.add(req)
            self.used.sub(req)
            self.future.add(req)
        self.version += 1
        self.log.append(self.index)

    def future_idle(self) -> Res:
        return self.idle.plus(self.releasing).sub(self.pipelined)


class QueueState:
    """A queue in a session (`QueueInfo`): the fact plus proportion's attributes (filled by the plugin)."""

    __slots__ = (
        "fact",
        "name",
        "uid",
        "weight",
        "priority",
        "state",
        "reclaimable",
        "creation",
        "share",
        "deserved",
        "allocated",
        "request",
        "inqueue",
        "elastic",
        "capability",
        "real_capability",
        "guarantee",
        "has_attr",
    )

    def __init__(self, fact: QueueFact) -> None:
        self.fact = fact
        self.name = fact.name
        self.uid = fact.name
        self.weight = fact.weight
        self.priority = fact.priority
        self.state = fact.state
        self.reclaimable = fact.reclaimable
        self.creation = fact.creation
        self.share = 0.0
        self.deserved = Res()
        self.allocated = Res()
        self.request = Res()
        self.inqueue = Res()
        self.elastic = Res()
        self.capability: Res | None = None
        self.real_capability: Res | None = None
        self.guarantee = Res()
        self.has_attr = False
