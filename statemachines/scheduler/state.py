"""A session's mutable view of tasks and jobs: live statuses, the status index and Volcano's counters.

Built fresh from a `Snapshot` at session open (cheap: one small object per pod, node and
PodGroup; the facts themselves are shared, never copied). Mirrors Volcano's `TaskInfo`
transaction context and `JobInfo` counters (`pkg/scheduler/api/job_info.go`, reference §2.3,
§2.4, §3.1, §3.2, §5.5); nodes and queues are in `statemachines.scheduler.accounting`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from statemachines.scheduler.fiterrors import FitErrors
from statemachines.scheduler.model import (
    ALLOCATED,
    ALLOCATED_STATUS,
    BINDING,
    BOUND,
    PENDING,
    PIPELINED,
    RELEASING,
    RUNNING,
    SCHEDULED_STATUS,
    SUCCEEDED,
    GroupFact,
)
from statemachines.scheduler.resources import Res

if TYPE_CHECKING:
    from statemachines.scheduler.tasks import TaskFact

class TaskState:
    """One task in a session: its fact plus the transaction context (status, node)."""

    __slots__ = ("fact", "uid", "name", "namespace", "role", "req", "status", "node", "last_tx", "evicted", "job")

    def __init__(self, fact: TaskFact, job: JobState | None) -> None:
        self.fact = fact
        self.uid = fact.uid
        self.name = fact.name
        self.namespace = fact.namespace
        self.role = fact.role
        self.req = fact.req
        self.status = fact.status
        self.node = fact.node
        self.last_tx: tuple[str, str, bool] | None = None  # (status, node, eviction occurred)
        self.evicted = False  # EvictionOccurred of the current pipeline
        self.job = job

    def __repr__(self) -> str:
        return f"Task({self.namespace}/{self.name} {self.status} {self.node})"


class JobState:
    """A PodGroup and its tasks in a session (`JobInfo`)."""

    __slots__ = (
        "fact",
        "key",
        "namespace",
        "name",
        "queue",
        "priority",
        "min_available",
        "min_task_member",
        "task_min_total",
        "min_resources",
        "tasks",
        "index",
        "phase",
        "conditions",
        "fit_errors",
        "allocated",
        "creation",
        "enqueue_message",
    )

    def __init__(self, fact: GroupFact, priority: int) -> None:
        self.fact = fact
        self.key = fact.key
        self.namespace = fact.namespace
        self.name = fact.name
        self.queue = fact.queue
        self.priority = priority
        self.min_available = fact.min_member
        self.min_task_member = fact.min_task_member
        self.task_min_total = sum(fact.min_task_member.values())
        self.min_resources = fact.min_resources
        self.tasks: dict[str, TaskState] = {}
        self.index: dict[str, dict[str, TaskState]] = {}
        self.phase = fact.phase
        self.conditions = list(fact.conditions)
        self.fit_errors: dict[str, FitErrors] = {}  # task uid -> errors, in recording order
        self.allocated = Res()
        self.creation = fact.creation
        self.enqueue_message = ""

    # -------------------------------------------------------------- task index

    def add_task(self, task: TaskState) -> None:
        self.tasks[task.uid] = task
        bucket = self.index.get(task.status)
        if bucket is None:
            bucket = self.index[task.status] = {}
        bucket[task.uid] = task
        if task.status in ALLOCATED_STATUS:
            self.allocated.add(task.req)

    def _remove_index(self, task: TaskState) -> None:
        bucket = self.index.get(task.status)
        if bucket is not None:
            bucket.pop(task.uid, None)
            if not bucket:
                del self.index[task.status]
        if task.status in ALLOCATED_STATUS:
            self.allocated.sub(task.req)

    def set_status(self, task: TaskState, status: str) -> None:
        """`UpdateTaskStatus`."""
        self._remove_index(task)
        task.status = status
        bucket = self.index.get(status)
        if bucket is None:
            bucket = self.index[status] = {}
        bucket[task.uid] = task
        if status in ALLOCATED_STATUS:
            self.allocated.add(task.req)

    def count(self, status: str) -> int:
        bucket = self.index.get(status)
        return len(bucket) if bucket else 0

    # -------------------------------------------------------------- counters (§2.4)

    def ready_num(self) -> int:
        c = self.count
        return c(BOUND) + c(BINDING) + c(RUNNING) + c(ALLOCATED) + c(SUCCEEDED)

    def waiting_num(self) -> int:
        return self.count(PIPELINED)

    def pending_best_effort(self) -> int:
        bucket = self.index.get(PENDING)
        if not bucket:
            return 0
        return sum(1 for t in bucket.values() if t.fact.best_effort)

    def valid_num(self) -> int:
        return sum(len(b) for s, b in self.index.items() if s in ALLOCATED_STATUS or s in (SUCCEEDED, PIPELINED, PENDING))

    def scheduled_num(self) -> int:
        return sum(len(b) for s, b in self.index.items() if s in SCHEDULED_STATUS)

    def allocated_num(self) -> int:
        return sum(len(b) for s, b in self.index.items() if s in ALLOCATED_STATUS)

    def releasing_scheduled(self) -> int:
        bucket = self.index.get(RELEASING)
        if not bucket:
            return 0
        return sum(1 for t in bucket.values() if t.node)

    def is_ready(self) -> bool:
        return self.ready_num() + self.pending_best_effort() >= self.min_available

    def is_pipelined(self) -> bool:
        return self.waiting_num() + self.ready_num() + self.pending_best_effort() >= self.min_available

    def is_starving(self) -> bool:
        return self.waiting_num() + self.ready_num() < self.min_available

    def is_pending(self) -> bool:
        return self.phase in ("", "Pending")

    # -------------------------------------------------------------- per-role checks (§3.1, §3.2)

    def _roles(self, statuses: frozenset[str], best_effort_pending: bool) -> dict[str, int]:
        out: dict[str, int] = {}
        for status, bucket in self.index.items():
            if status in statuses:
                for t in bucket.values():
                    out[t.role] = out.get(t.role, 0) + 1
            elif status == PENDING and best_effort_pending:
                for t in bucket.values():
                    if t.fact.best_effort:
                        out[t.role] = out.get(t.role, 0) + 1
        return out

    def _roles_meet(self, counts: dict[str, int]) -> bool:
        for role, minimum in self.min_task_member.items():
            if counts.get(role, 0) < minimum:
                return False
        return True

    def check_task_valid(self) -> bool:
        if self.min_available < self.task_min_total:
            return True
        actual = self._roles(_VALID, False)
        for role, minimum in self.min_task_member.items():
            if minimum and actual.get(role, 0) < minimum:
                return False
        return True

    def allocated_roles(self) -> dict[str, int]:
        return self._roles(_READY, True)

    def check_task_ready(self) -> bool:
        if self.min_available < self.task_min_total:
            return True
        return self._roles_meet(self._roles(_READY, True))

    def check_task_pipelined(self) -> bool:
        if self.min_available < self.task_min_total:
            return True
        return self._roles_meet(self._roles(_PIPELINED, True))

    def failed_roles(self) -> set[str]:
        return {self.tasks[uid].role for uid in self.fit_errors if uid in self.tasks}

    def need_continue_allocating(self) -> bool:
        """`NeedContinueAllocating` (§5.5)."""
        if self.min_available == len(self.tasks):
            return False
        failed = self.failed_roles()
        if self.min_available < self.task_min_total:
            left = 0
            for t in (self.index.get(PENDING) or {}).values():
                if t.role not in failed:
                    left += 1
            return self.ready_num() + left >= self.min_available
        allocated = self.allocated_roles()
        for role in failed:
            minimum = self.min_task_member.get(role, 0)
            if minimum == 0:
                continue
            if allocated.get(role, 0) < minimum:
                return False
        return True


_READY = ALLOCATED_STATUS | {SUCCEEDED}
_PIPELINED = _READY | {PIPELINED}
_VALID = _PIPELINED | {PENDING}
