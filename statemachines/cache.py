"""The controller's cache, as plain data: jobs, their pods by task, their PodGroup.

Volcano keeps the same shape in memory (`pkg/controllers/cache`): one entry per
job key, pods grouped by task name then pod name, filled from watch events.
vcbus also records its *own* writes here as soon as it decides them (a created
pod appears as Pending, a killed pod is marked deleting and out-of-sync, a
deleted PodGroup is gone): the model of a controller whose informer reflects
its own writes at once. Observed events then refine that picture; they never
erase our marks for the same pod.

This module also holds §4.1/§4.2's rules for reading a pod: which pods count,
their exit code, their container restarts. (When a record's object was written,
the replay clock, is `statemachines.model.record_time`.)
"""

from __future__ import annotations

from typing import Any

from msgspec import Struct

from statemachines.model.objects import Job, Pod, controller_job_ref
from statemachines.model.status import JobStatus
from statemachines.task.counts import TaskBook

OUT_OF_SYNC = "volcano.sh/controller-out-of-sync"
TASK_SPEC = "volcano.sh/task-spec"
JOB_NAME = "volcano.sh/job-name"
JOB_VERSION = "volcano.sh/job-version"
PARTITION_ID = "volcano.sh/partition-id"


class PodState:
    """One cached pod: what the controller needs of it."""

    __slots__ = (
        "name",
        "uid",
        "task",
        "phase",
        "version",
        "out_of_sync",
        "deleting",
        "restarts",
        "ready",
        "partition",
        "resource_version",
        "observed",
    )

    def __init__(self, name: str, task: str, *, phase: str = "Pending", version: int = 0) -> None:
        self.name = name
        self.uid = ""
        self.task = task
        self.phase = phase
        self.version = version
        self.out_of_sync = False
        self.deleting = False
        self.restarts = 0
        self.ready = True
        self.partition = ""
        self.resource_version = ""
        self.observed = False  # False while it is only our own CreatePod

    def refresh(self, pod: Pod, version: int) -> None:
        """Take what was observed; our own marks (killed, deleting) stay for the same uid."""
        meta = pod.metadata
        uid = meta.uid
        if self.out_of_sync or self.deleting:  # our marks: kept only for the same pod
            same = self.uid == uid or not self.uid
            self.out_of_sync = (self.out_of_sync and same) or OUT_OF_SYNC in (meta.annotations or ())
            self.deleting = (self.deleting and same) or meta.deletion_timestamp is not None
        else:
            self.out_of_sync = OUT_OF_SYNC in (meta.annotations or ())
            self.deleting = meta.deletion_timestamp is not None
        self.uid = uid
        status = pod.status
        self.phase = status.phase
        self.version = version
        self.resource_version = meta.resource_version
        labels = meta.labels
        self.partition = labels.get(PARTITION_ID, "") if labels else ""
        restarts, ready = 0, True
        for cs in status.container_statuses or ():
            restarts += cs.restart_count
            ready = ready and cs.ready
        if status.init_container_statuses:
            for cs in status.init_container_statuses:
                restarts += cs.restart_count
        self.restarts = restarts
        self.ready = ready
        self.observed = True


class PodGroupState:
    __slots__ = ("name", "uid", "phase", "spec", "pending", "pending_said")

    def __init__(self, name: str, uid: str = "", phase: str = "") -> None:
        self.name = name
        self.uid = uid
        self.phase = phase
        # (type, message) of the record's latest True condition when it is not Scheduled, else None;
        # and the last one a PodGroupPending event said (statemachines/job/writes.py)
        self.pending: tuple[str, str] | None = None
        self.pending_said: tuple[str, str] | None = None
        # (minMember, minTaskMember, priorityClassName) as last written or observed; None: unknown
        self.spec: tuple[int, dict[str, int], str] | None = None


class JobEntry:
    """Everything the controller holds for one job key."""

    __slots__ = (
        "key",
        "namespace",
        "name",
        "job",
        "raw",
        "status",
        "pods",
        "pg",
        "pg_gone",
        "timers",
        "recorded",
        "trail",
        "followup",
        "deleted",
        "consumed",
        "names",
        "pvcs",
        "tasks",
        "versions",
        "facts",
        "idle",
        "creating",
        "requeue",
        "requeues",
        "refused_seq",
    )

    def __init__(self, key: str, namespace: str, name: str) -> None:
        self.key = key
        self.namespace = namespace
        self.name = name
        self.job: Job | None = None
        self.raw: bytes | None = None  # the vcjob object's JSON, kept only when pods are rendered
        self.status: JobStatus | None = None  # the status vcbus decided
        self.pods: dict[str, dict[str, PodState]] = {}
        self.pg: PodGroupState | None = None
        self.pg_gone: set[str] = set()  # uids of PodGroups we deleted: ignore their late events
        self.timers: dict[str, object] = {}  # delayed-action registry, by pod name ("" for job level)
        self.recorded: tuple[str, int] | None = None  # last (phase, retryCount) seen in the log
        self.trail: list[tuple[str, int]] = []  # (phase, retryCount) we went through since then
        self.followup = False  # our status write changed the phase: one more OutOfSync pass
        self.deleted = False
        self.consumed: set[str] = set()  # Command uids already executed
        self.names: tuple[object, dict] | None = None  # expected pod names, per spec
        self.pvcs: set[str] = set()  # PVCs this job's CreatePVC commands asked for
        self.tasks = TaskBook()  # per-task pod counts and task phases (statemachines/task/)
        # (phase, version) of the statuses vcbus wrote and the log showed: a recorded status
        # among them is no news (vcbus's own write coming back, or one seen before)
        self.versions: set[tuple[str, int]] = set()
        # what the controller derives from the job's spec, made once per spec object
        # (statemachines/job/writes.py `SpecFacts`)
        self.facts: Any = None
        # what syncJob last found nothing to do with (statemachines/job/sync.py `SyncMemo`)
        self.idle: Any = None
        # our CreatePods the log has not shown yet: pod name -> (task, when the create counts as
        # lost), oldest first (statemachines/job/sync.py; docs/fidelity.md)
        self.creating: dict[str, tuple[str, str]] = {}
        # a refused create's sync requeued with backoff (statemachines/intake/refusals.py): the
        # timer, the failed syncs in a row (the rate limiter's NumRequeues), the last refused decision
        self.requeue: Any = None
        self.requeues = 0
        self.refused_seq = 0

    def find_pod(self, task: str, name: str) -> PodState | None:
        pods = self.pods.get(task)
        return pods.get(name) if pods else None

    def put_pod(self, pod: PodState) -> None:
        """Cache `pod` (replacing one of the same name); the task counts follow."""
        pods = self.pods.setdefault(pod.task, {})
        old = pods.get(pod.name)
        if old is not None:
            self.tasks.forget(old)
        pods[pod.name] = pod
        self.tasks.count(pod)

    def drop_pod(self, task: str, name: str) -> PodState | None:
        pods = self.pods.get(task)
        if not pods:
            return None
        pod = pods.pop(name, None)
        if not pods:
            del self.pods[task]
        if pod is not None:
            self.tasks.forget(pod)
            if self.creating:
                self.creating.pop(name, None)
        return pod

    def live_pods(self) -> int:
        return sum(len(p) for p in self.pods.values())


class PodIdentity(Struct, frozen=True, gc=False):
    """What §4.1 takes from a pod: which job and task it belongs to, and its job version."""

    job_name: str
    task: str
    version: int
    job_uid: str


def pod_identity(pod: Pod) -> PodIdentity | None:
    """None when the controller ignores the pod (§4.1)."""
    fields = identity_fields(pod)
    return None if fields is None else PodIdentity(*fields)


# job-version annotation text -> its value: the same few texts come back on every pod record,
# and a lookup costs a fraction of int()'s parse. Bounded: a log could hold any number of them.
_VERSIONS: dict[str, int] = {}


def identity_fields(pod: Pod) -> tuple[str, str, int, str] | None:
    """`pod_identity`'s fields as a plain tuple (job name, task, job version, job uid), or None.

    What the engine reads for every pod record (statemachines/intake/pods.py), unpacked at
    once: a tuple costs less to make than the Struct (a few hundred instructions a record)."""
    meta = pod.metadata
    ref = controller_job_ref(meta)
    if ref is None:
        return None
    # not named `annotations`: a local named as a module-level import (here `from __future__ import
    # annotations`) makes CPython 3.11 compile `x.get(...)` without LOAD_METHOD, a bound method per call
    notes = meta.annotations
    if not notes:
        return None
    try:  # subscripts, not `get`: cheaper, and a pod without them is rare
        job_name = notes[JOB_NAME]
        task = notes[TASK_SPEC]
        version_text = notes[JOB_VERSION]
    except KeyError:
        return None
    version = _VERSIONS.get(version_text)
    if version is None:
        try:
            version = int(version_text, 10)
        except ValueError:
            return None
        if not -(2**31) <= version < 2**31:
            return None
        if len(_VERSIONS) < 1024:
            _VERSIONS[version_text] = version
    return job_name, task, version, ref.uid


def first_exit_code(pod: Pod) -> int:
    """Exit code of `containerStatuses[0]`'s terminated state, else 0 (§4.2)."""
    statuses = pod.status.container_statuses
    if statuses:
        state = statuses[0].state
        if state is not None and state.terminated is not None:
            return state.terminated.exit_code
    return 0
