"""The session framework: the session's state, plugin callbacks and how their votes combine.

Mirrors `pkg/scheduler/framework/session.go` and `session_plugins.go` (reference §2.6):
plugins register callbacks by name at open; each dispatcher walks the tiers in order and,
inside a tier, the plugins in config order, consulting only plugins whose `enable*` flag
is on. Orders (queue, job, task) are built as sort keys: the components of the enabled
plugins in tier order followed by Volcano's fallback, which is what "first non-zero
comparison wins" means for total orders. A key is computed when an item is pushed into
a heap, as Volcano evaluates its less-functions at push time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from statemachines.scheduler.accounting import NodeState, QueueState
from statemachines.scheduler.config import PluginOption, SchedulerConfig
from statemachines.scheduler.resources import Res
from statemachines.scheduler.snapshot import Snapshot
from statemachines.scheduler.state import JobState, TaskState

if TYPE_CHECKING:
    from statemachines.scheduler.model import NodeFact
    from statemachines.scheduler.tasks import Placement, TaskFact
    from statemachines.scheduler.volumes import VolumeBinder


# What the actions ask of the predicates plugin's filters, which the plugin sets on the session
# (plugins.predicates.Filters and Dynamic; the plugins import this module, so not those classes).
class StaticFilters(Protocol):
    keep: bool  # False: nothing is cached (run_session(cache_predicates=False))

    def static(self, placement: Placement, nodes: list[NodeFact]) -> list[tuple[int, str] | None]: ...


class DynamicFilters(Protocol):
    def applies(self, fact: TaskFact) -> bool: ...

    def prepare(self, fact: TaskFact) -> Any: ...  # the per-node check, or None

    def failing(self, fact: TaskFact) -> Any: ...  # (the check, the indexes of the nodes it fails), or None


PERMIT, ABSTAIN, REJECT = 1, 0, -1

# callback kind -> the PluginOption flag that gates it (None: always consulted)
FLAG_OF = {
    "job_order": "job_order",
    "queue_order": "queue_order",
    "task_order": "task_order",
    "preemptable": "preemptable",
    "reclaimable": "reclaimable",
    "job_ready": "job_ready",
    "job_pipelined": "job_pipelined",
    "predicate": "predicate",
    "pre_predicate": "predicate",
    "node_order": "node_order",
    "overused": "overused",
    "preemptive": "preemptive",
    "allocatable": "allocatable",
    "job_valid": None,
    "job_enqueueable": "job_enqueued",
    "job_enqueued": "job_enqueued",
    "job_starving": "job_starving",
}


class Session:
    """One scheduling session over a snapshot (`framework.Session`)."""

    def __init__(self, snapshot: Snapshot, config: SchedulerConfig, *, uid: str, number: int, seq: int, time: str) -> None:
        self.snapshot = snapshot
        self.config = config
        self.uid = uid
        self.number = number
        self.seq = seq
        self.time = time
        self.actions_configured = set(config.actions)
        self.tiers: list[list[PluginOption]] = [list(t.plugins) for t in config.tiers]
        self.fns: dict[str, dict[str, Callable[..., Any]]] = {kind: {} for kind in FLAG_OF}
        self.allocate_handlers: list[Callable[[TaskState], None]] = []
        self.deallocate_handlers: list[Callable[[TaskState], None]] = []
        self.plugins: dict[str, Any] = {}
        self.queues: dict[str, QueueState] = {}
        self.jobs: dict[str, JobState] = {}
        self.nodes: dict[str, NodeState] = {}
        self.node_list: list[NodeState] = []
        self.orphans: list[TaskState] = []  # tasks of no job (still on nodes)
        self.total = Res()
        self.binds: list[tuple[TaskState, str]] = []  # committed allocations (task, action)
        self.evictions: list[tuple[TaskState, str, str]] = []  # (victim, action, preemptor key)
        self.committed: list[tuple[str, TaskState, str, str]] = []  # (bind|evict, task, action, preemptor) in order
        self.enqueued: list[JobState] = []
        self.events: list[tuple[str, str, str, str, str]] = []  # (group key, type, reason, message, channel)
        self.node_offset = 0  # the rotating start of the >100-node search (§5.4)
        self.filters: StaticFilters | None = None  # predicates.Filters when the predicates plugin is on
        self.check_pod_count = False
        self.dynamic: DynamicFilters | None = None  # predicates.Dynamic: the filters that depend on the pods placed so far
        self.pod_indexes: object = None  # predicates.PodIndexes: the placed pods' counts (filters and scores)
        self.volume_binder: VolumeBinder | None = None  # volumes.VolumeBinder: static PVs assumed for unbound claims (VolumeBinding)
        self.node_facts: list = []  # NodeFact per node index (static predicate input)
        self.scorers: list[Callable[[TaskState, NodeState], float]] = []
        self.score_cache: dict[tuple, dict[int, tuple[int, float]]] = {}
        # (needed(task fact) -> bool, score(task fact, nodes) -> weighted scores): normalized over the candidates
        self.batch_scorers: list[tuple[Callable[..., bool], Callable[..., list[float]]]] = []
        self.spread_scorer: Any = None  # nodeorder's PodTopologySpread score (plugins.nodeorder.SpreadScorer)
        self.node_changes: list[int] = []  # every node change, by node index (NodeIndex syncs from it)
        self.indexes: dict[tuple, Any] = {}  # signature -> actions.nodeindex.NodeIndex
        self.signature_uses: dict[tuple, int] = {}
        self.use_indexes = True
        self.largest: dict[str, tuple[float, str]] | None = None  # reports.largest: per resource the largest node allocatable
        self.cache_predicates = True  # False: stable filters and scores computed per task (benchmark)

    # ------------------------------------------------------------------ registration

    def add(self, kind: str, plugin: str, fn: Callable[..., Any]) -> None:
        self.fns[kind][plugin] = fn

    def enabled_fns(self, kind: str) -> list[list[Callable[..., Any]]]:
        """The callbacks of `kind`, per tier, of enabled plugins, in config order."""
        flag = FLAG_OF[kind]
        registered = self.fns[kind]
        out = []
        for tier in self.tiers:
            fns = []
            for option in tier:
                fn = registered.get(option.name)
                if fn is None:
                    continue
                if flag is not None and not option.enabled(flag):
                    continue
                fns.append(fn)
            out.append(fns)
        return out

    def flat_fns(self, kind: str) -> list[Callable[..., Any]]:
        return [fn for tier in self.enabled_fns(kind) for fn in tier]

    def finish_open(self) -> None:
        """Freeze the dispatch lists once every plugin has registered."""
        self._job_order = self.flat_fns("job_order")
        self._queue_order = self.flat_fns("queue_order")
        self._task_order = self.flat_fns("task_order")
        self._ready = self.flat_fns("job_ready")
        self._pipelined = self.enabled_fns("job_pipelined")
        self._enqueueable = self.enabled_fns("job_enqueueable")
        self._enqueued = self.flat_fns("job_enqueued")
        self._starving = self.enabled_fns("job_starving")
        self._valid = [fn for tier in self.enabled_fns("job_valid") for fn in tier]
        self._allocatable = self.flat_fns("allocatable")
        self._overused = self.flat_fns("overused")
        self._preemptive = self.flat_fns("preemptive")
        self._pre_predicate = self.flat_fns("pre_predicate")
        self._preemptable = self.enabled_fns("preemptable")
        self._reclaimable = self.enabled_fns("reclaimable")

    # ------------------------------------------------------------------ orders (keys; smaller first)

    def job_key(self, job: JobState) -> tuple:
        return tuple(fn(job) for fn in self._job_order) + (job.creation, job.key)

    def queue_key(self, queue: QueueState) -> tuple:
        return tuple(fn(queue) for fn in self._queue_order) + (queue.creation, queue.uid)

    def task_key(self, task: TaskState) -> tuple:
        fact = task.fact
        index = fact.index
        return tuple(fn(task) for fn in self._task_order) + (
            0 if index is not None else 1,
            index if index is not None else 0,
            fact.creation,
            task.uid,
        )

    # ------------------------------------------------------------------ votes

    def job_valid(self, job: JobState) -> tuple[str, str] | None:
        for fn in self._valid:
            result = fn(job)
            if result is not None:
                return result
        return None

    def job_ready(self, job: JobState) -> bool:
        return all(fn(job) for fn in self._ready)

    def job_pipelined(self, job: JobState) -> bool:
        return _vote(self._pipelined, job)

    def job_enqueueable(self, job: JobState) -> bool:
        return _vote(self._enqueueable, job)

    def job_enqueued(self, job: JobState) -> None:
        for fn in self._enqueued:
            fn(job)

    def job_starving(self, job: JobState) -> bool:
        for tier in self._starving:
            if not tier:
                continue
            for fn in tier:
                if not fn(job):
                    return False
            return True
        return False

    def allocatable(self, queue: QueueState, task: TaskState) -> bool:
        return all(fn(queue, task) for fn in self._allocatable)

    def overused(self, queue: QueueState) -> bool:
        return any(fn(queue) for fn in self._overused)

    def preemptive(self, queue: QueueState, tasks: list[TaskState]) -> bool:
        return all(fn(queue, tasks) for fn in self._preemptive)

    def pre_predicate(self, task: TaskState) -> str | None:
        for fn in self._pre_predicate:
            err = fn(task)
            if err:
                return err
        return None

    def preemptable(self, preemptor: TaskState, candidates: list[TaskState]) -> list[TaskState]:
        return _victims(self._preemptable, preemptor, candidates)

    def reclaimable(self, reclaimer: TaskState, candidates: list[TaskState]) -> list[TaskState]:
        return _victims(self._reclaimable, reclaimer, candidates)

    # ------------------------------------------------------------------ events

    def batch_scored(self, fact) -> bool:
        """Whether a score normalized over the candidate nodes applies to the task (the node index,
        which keeps one score per node, cannot answer for it)."""
        for needed, _ in self.batch_scorers:
            if needed(fact):
                return True
        return False

    def spread_scored_only(self, fact) -> bool:
        """Whether the only score normalized over the candidates that applies to the task is
        PodTopologySpread's (the node index answers for it through `spread_scorer`)."""
        scorer = self.spread_scorer
        if scorer is None or not scorer.needed(fact):
            return False
        return not any(score != scorer.score and needed(fact) for needed, score in self.batch_scorers)

    def fire_allocate(self, task: TaskState) -> None:
        for fn in self.allocate_handlers:
            fn(task)

    def fire_deallocate(self, task: TaskState) -> None:
        for fn in self.deallocate_handlers:
            fn(task)

    def record_event(self, job: JobState, event_type: str, reason: str, message: str, channel: str) -> None:
        """A PodGroup event raised during the session (enqueue votes); emitted at close."""
        self.events.append((job.key, event_type, reason, message, channel))


def _vote(tiers: list[list[Callable[..., int]]], job: JobState) -> bool:
    """Reject at once; a tier with a Permit decides true; no votes at all: true."""
    for tier in tiers:
        found = False
        for fn in tier:
            res = fn(job)
            if res < 0:
                return False
            if res > 0:
                found = True
        if found:
            return True
    return True


def _victims(tiers: list[list[Callable[..., tuple[list[TaskState], int]]]], preemptor: TaskState, candidates: list[TaskState]) -> list[TaskState]:
    """§8.4: intersect per tier; an empty answer ends the tier; the first non-empty tier wins."""
    victims: list[TaskState] | None = None
    for tier in tiers:
        for fn in tier:
            chosen, abstain = fn(preemptor, candidates)
            if abstain == 0:
                continue
            if not chosen:
                victims = None
                break
            if victims is None:
                victims = list(chosen)
            else:
                uids = {t.uid for t in chosen}
                victims = [v for v in victims if v.uid in uids] or None
        if victims:
            return victims
    return victims or []
