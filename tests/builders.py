"""Small builders for the state-machine tests: objects as dicts, watch records as bytes.

- `job()`, `task()`, `policy()`, `pod()`, `podgroup()`, `command()`, `queue()`
  build the Kubernetes objects the controller reads, with Volcano's webhook
  defaults where the tests do not care (task minAvailable = replicas, job
  minAvailable = ΣtaskMin, maxRetry 3);
- `record()` turns one into a watch record (`{"type", "object", "time"}` bytes);
- `Harness` feeds records to an `Engine` one at a time, with a clock, resource
  versions and uids of its own, and keeps the log it built (for the
  determinism test);
- `entry_in()` / `execute()` build an engine state directly (a job in a given
  phase with given pods and PodGroup) and run one action on it, Volcano's
  `state.Execute`;
- `Outs` is a list of outputs with helpers to pick out what a test checks.

Logs built by scenarios decorated with `@scenario` are replayed twice by
tests/test_determinism.py.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import msgspec

from statemachines import outputs as o
from statemachines import worker
from statemachines.cache import JobEntry, PodGroupState, PodState
from statemachines.engine import Engine
from statemachines.job.kill import Target
from statemachines.model.objects import Job, Pod
from statemachines.model.records import decode
from statemachines.model.status import JobCondition, JobState, JobStatus
from statemachines.model.timefmt import fmt, parse

NS = "default"
T0 = "2026-01-01T00:00:00Z"  # creation time of every object built here
T1 = "2026-01-01T00:10:00Z"  # "now" of entry_in()
JOB_API = "batch.volcano.sh/v1alpha1"
OUT_OF_SYNC = "volcano.sh/controller-out-of-sync"
DEFAULT = object()  # "as the webhook would default it"

_enc = msgspec.json.Encoder()


# ---------------------------------------------------------------- objects


def policy(action: str, event: str | list[str] | None = None, *, exit_code: int | None = None,
           timeout: str | None = None) -> dict:
    p: dict[str, Any] = {"action": action}
    if isinstance(event, list):
        p["events"] = event
    elif event is not None:
        p["event"] = event
    if exit_code is not None:
        p["exitCode"] = exit_code
    if timeout is not None:
        p["timeout"] = timeout
    return p


def task(name: str = "t", replicas: int = 2, *, min_available: Any = DEFAULT, policies: list | None = None,
         max_retry: int = 3, depends_on: dict | None = None, partition: tuple[int, int] | None = None) -> dict:
    """A TaskSpec. `min_available=None` leaves it unset; `partition=(total, size)` adds a partitionPolicy."""
    t: dict[str, Any] = {
        "name": name,
        "replicas": replicas,
        "maxRetry": max_retry,
        "template": {"spec": {"containers": [{"name": "main", "image": "busybox"}], "restartPolicy": "Never"}},
    }
    if min_available is DEFAULT:
        t["minAvailable"] = replicas
    elif min_available is not None:
        t["minAvailable"] = min_available
    if policies:
        t["policies"] = policies
    if depends_on is not None:
        t["dependsOn"] = depends_on
    if partition is not None:
        t["partitionPolicy"] = {"totalPartitions": partition[0], "partitionSize": partition[1]}
    return t


def job_uid(name: str = "j") -> str:
    return f"uid-{name}"


def job(name: str = "j", *, tasks: list | None = None, policies: list | None = None, min_available: int | None = None,
        min_success: int | None = None, max_retry: int = 3, queue: str = "default", uid: str | None = None,
        created: str = T0, status: dict | None = None, deleting: str | None = None, namespace: str = NS) -> dict:
    tasks = tasks if tasks is not None else [task()]
    if min_available is None:
        min_available = sum(t.get("minAvailable", t["replicas"]) for t in tasks)
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "minAvailable": min_available,
        "queue": queue,
        "maxRetry": max_retry,
        "tasks": tasks,
    }
    if policies:
        spec["policies"] = policies
    if min_success is not None:
        spec["minSuccess"] = min_success
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid or job_uid(name),
        "resourceVersion": "1",
        "creationTimestamp": created,
    }
    if deleting:
        meta["deletionTimestamp"] = deleting
    obj: dict[str, Any] = {"apiVersion": JOB_API, "kind": "Job", "metadata": meta, "spec": spec}
    if status is not None:
        obj["status"] = status
    return obj


def owner_ref(job_name: str = "j", uid: str | None = None, *, controller: bool = True, api_version: str = JOB_API,
              kind: str = "Job") -> dict:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": job_name,
        "uid": uid or job_uid(job_name),
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def pod(job_name: str = "j", task_name: str = "t", index: int = 0, *, phase: str = "Pending", version: int = 0,
        uid: str | None = None, name: str | None = None, out_of_sync: str | None = None, deleting: str | None = None,
        restarts: int = 0, init_restarts: int | None = None, exit_code: int | None = None,
        exit_codes: list[int | None] | None = None, ready: bool | None = None, partition: str | None = None,
        owner: dict | None | object = DEFAULT, drop: Iterable[str] = (), extra_annotations: dict | None = None,
        created: str = T0, namespace: str = NS) -> dict:
    """A vcjob pod as the controller creates it, in `phase`.

    `exit_code` (or `exit_codes`, one per container) gives containers a terminated
    state; `out_of_sync` is the value of the out-of-sync annotation; `drop` removes
    annotations (to test the §4.1 filter).
    """
    name = name or f"{job_name}-{task_name}-{index}"
    annotations = {
        "volcano.sh/job-name": job_name,
        "volcano.sh/job-version": str(version),
        "volcano.sh/task-spec": task_name,
        "volcano.sh/task-index": str(index),
        "scheduling.k8s.io/group-name": f"{job_name}-{job_uid(job_name)}",
    }
    if out_of_sync is not None:
        annotations[OUT_OF_SYNC] = out_of_sync
    annotations.update(extra_annotations or {})
    for key in drop:
        annotations.pop(key, None)
    labels = {"volcano.sh/job-name": job_name, "volcano.sh/task-spec": task_name}
    if partition is not None:
        labels["volcano.sh/partition-id"] = partition
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid or f"uid-{name}",
        "resourceVersion": "1",
        "creationTimestamp": created,
        "labels": labels,
        "annotations": annotations,
    }
    if owner is DEFAULT:
        meta["ownerReferences"] = [owner_ref(job_name)]
    elif owner is not None:
        meta["ownerReferences"] = [owner]
    if deleting:
        meta["deletionTimestamp"] = deleting
    codes = exit_codes if exit_codes is not None else [exit_code]
    statuses = []
    for i, code in enumerate(codes):
        if code is not None:
            state: dict = {"terminated": {"exitCode": code, "finishedAt": created}}
        elif phase == "Running":
            state = {"running": {"startedAt": created}}
        else:
            state = {}
        statuses.append({
            "name": f"c{i}",
            "ready": phase == "Running" if ready is None else ready,
            "restartCount": restarts if i == 0 else 0,
            "state": state,
        })
    status: dict[str, Any] = {"phase": phase, "containerStatuses": statuses}
    if init_restarts is not None:
        status["initContainerStatuses"] = [{"name": "init", "ready": True, "restartCount": init_restarts}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {}, "status": status}


def podgroup(job_name: str = "j", phase: str = "", *, uid: str = "uid-pg", name: str | None = None,
             owners: list[dict] | None | object = DEFAULT, namespace: str = NS) -> dict:
    meta: dict[str, Any] = {
        "name": name or f"{job_name}-{job_uid(job_name)}",
        "namespace": namespace,
        "uid": uid,
        "resourceVersion": "1",
        "creationTimestamp": T0,
    }
    if owners is DEFAULT:
        meta["ownerReferences"] = [owner_ref(job_name)]
    elif owners is not None:
        meta["ownerReferences"] = owners
    status = {"phase": phase} if phase else {}
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": meta,
            "spec": {"minMember": 1, "queue": "default"}, "status": status}


def command(job_name: str, action: str, *, name: str | None = None, uid: str | None = None,
            target: dict | None = None, namespace: str = NS) -> dict:
    name = name or f"{job_name}-{action.lower()}-x"
    return {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {"name": name, "namespace": namespace, "uid": uid or f"uid-{name}", "resourceVersion": "1",
                     "creationTimestamp": T0},
        "action": action,
        "target": target if target is not None else owner_ref(job_name),
    }


def queue(name: str = "default") -> dict:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name, "uid": f"uid-q-{name}", "resourceVersion": "1", "creationTimestamp": T0},
        "spec": {"weight": 1},
        "status": {"state": "Open"},
    }


def record(rtype: str, obj: dict, time: str | None = None) -> bytes:
    rec: dict[str, Any] = {"type": rtype, "object": obj}
    if time is not None:
        rec["time"] = time
    return _enc.encode(rec)


# ---------------------------------------------------------------- outputs


class Outs(list):
    """Outputs of one or more records, with selectors."""

    def of(self, cls: type) -> list:
        return [x for x in self if isinstance(x, cls)]

    def resolved(self) -> list[o.ActionResolved]:
        return self.of(o.ActionResolved)

    def events(self) -> list[str]:
        """Bus events of the requests handled (ActionResolved.event), in order."""
        return [a.event for a in self.resolved()]

    def actions(self) -> list[str]:
        return [a.action for a in self.resolved()]

    def messages(self) -> list[str]:
        return [e.message for e in self.of(o.RecordEvent)]

    def phases(self) -> list[tuple[str, str]]:
        return [(p.from_phase, p.to_phase) for p in self.of(o.PhaseChanged)]

    def created(self) -> list[str]:
        return [c.name for c in self.of(o.CreatePod)]

    def deleted(self) -> list[str]:
        return sorted(c.name for c in self.of(o.DeletePod))

    def writes(self) -> list[JobStatus]:
        return [w.status for w in self.of(o.UpdateJobStatus)]

    def timers(self) -> list[o.TimerScheduled]:
        return self.of(o.TimerScheduled)

    def cancelled(self) -> list[str]:
        return [c.timer for c in self.of(o.TimerCancelled)]

    def fired(self) -> list[str]:
        return [f.action for f in self.of(o.TimerFired)]


# ---------------------------------------------------------------- record-level harness


class Harness:
    """Feeds records to an Engine: the test plays API server, scheduler and kubelet.

    Nothing happens behind the test's back: pods and PodGroups exist only when
    the test says so (`add_pod`, `pg`), and the engine's own status writes are
    not echoed back as Job records. Each record carries `time` = the harness
    clock, so the engine's LTTs are predictable.
    """

    def __init__(self, job_obj: dict | None = None, *, start: str = T0, timers: str = "by-time",
                 engine: Engine | None = None) -> None:
        self.engine = engine or Engine(timers=timers)
        self.clock = parse(start)
        self.seq = 0
        self.rv = 100
        self.log: list[bytes] = []
        self.outputs = Outs()
        self.objects: dict[tuple[str, str], dict] = {}
        self.job_obj: dict | None = None
        self.pg_serial = 0
        if _recording is not None:
            _recording.append(self.log)
        if job_obj is not None:
            self.create(job_obj)

    # clock and plumbing

    @property
    def now(self) -> str:
        return fmt(self.clock)

    def tick(self, seconds: int = 1) -> None:
        self.clock += seconds

    def feed(self, rtype: str, obj: dict, *, bump: bool = True, time: str | None = None) -> Outs:
        obj = copy.deepcopy(obj)
        if bump:
            self.rv += 1
            obj["metadata"]["resourceVersion"] = str(self.rv)
        key = (obj["kind"], obj["metadata"]["name"])
        if rtype == "DELETED":
            self.objects.pop(key, None)
        else:
            self.objects[key] = obj
        data = record(rtype, obj, time or self.now)
        return self.feed_raw(data)

    def feed_raw(self, data: bytes) -> Outs:
        self.log.append(data)
        self.seq += 1
        outs = Outs(self.engine.apply(self.seq, decode(data), raw=data))
        self.outputs.extend(outs)
        return outs

    def get(self, kind: str, name: str) -> dict:
        return copy.deepcopy(self.objects[(kind, name)])

    # the job

    def create(self, job_obj: dict) -> Outs:
        self.job_obj = job_obj
        return self.feed("ADDED", job_obj)

    def update_job(self, change: Callable[[dict], None]) -> Outs:
        obj = self.get("Job", self.job_obj["metadata"]["name"])  # type: ignore[index]
        change(obj)
        return self.feed("MODIFIED", obj)

    def delete_job(self) -> Outs:
        obj = self.get("Job", self.job_obj["metadata"]["name"])  # type: ignore[index]
        return self.feed("DELETED", obj)

    @property
    def key(self) -> str:
        meta = self.job_obj["metadata"]  # type: ignore[index]
        return f"{meta.get('namespace', NS)}/{meta['name']}"

    @property
    def entry(self) -> JobEntry:
        return self.engine.jobs[self.key]

    @property
    def status(self) -> JobStatus:
        status = self.entry.status
        assert status is not None
        return status

    @property
    def phase(self) -> str:
        return self.status.state.phase

    # pods

    def add_pod(self, task_name: str = "t", index: int = 0, **kw: Any) -> Outs:
        meta = self.job_obj["metadata"]  # type: ignore[index]
        kw.setdefault("version", self.status.version if self.entry.status is not None else 0)
        kw.setdefault("created", self.now)
        return self.feed("ADDED", pod(meta["name"], task_name, index, **kw))

    def add_pods(self, task_name: str = "t", count: int = 2, **kw: Any) -> Outs:
        outs = Outs()
        for i in range(count):
            outs.extend(self.add_pod(task_name, i, **kw))
        return outs

    def set_pod(self, name: str, *, phase: str | None = None, restarts: int | None = None,
                init_restarts: int | None = None, exit_code: int | None = None, out_of_sync: str | None = None,
                deleting: bool = False, same_rv: bool = False) -> Outs:
        """A MODIFIED record for pod `name` (its last state plus the changes)."""
        obj = self.get("Pod", name)
        status = obj["status"]
        if phase is not None:
            status["phase"] = phase
            for cs in status.get("containerStatuses", []):
                cs["ready"] = phase == "Running"
                if phase == "Running":
                    cs["state"] = {"running": {"startedAt": self.now}}
        if restarts is not None:
            status["containerStatuses"][0]["restartCount"] = restarts
        if init_restarts is not None:
            status["initContainerStatuses"] = [{"name": "init", "ready": True, "restartCount": init_restarts}]
        if exit_code is not None:
            status["containerStatuses"][0]["state"] = {"terminated": {"exitCode": exit_code, "finishedAt": self.now}}
        if out_of_sync is not None:
            obj["metadata"]["annotations"][OUT_OF_SYNC] = out_of_sync
        if deleting:
            obj["metadata"]["deletionTimestamp"] = self.now
        return self.feed("MODIFIED", obj, bump=not same_rv)

    def delete_pod(self, name: str) -> Outs:
        return self.feed("DELETED", self.get("Pod", name))

    # podgroup and commands

    def pg(self, phase: str, *, new: bool = False) -> Outs:
        """The scheduler sets the PodGroup phase (creating the PodGroup object first if needed)."""
        meta = self.job_obj["metadata"]  # type: ignore[index]
        name = f"{meta['name']}-{meta['uid']}"
        outs = Outs()
        if new or ("PodGroup", name) not in self.objects:
            self.pg_serial += 1
            outs.extend(self.feed("ADDED", podgroup(meta["name"], "", uid=f"uid-pg-{self.pg_serial}", name=name)))
        obj = self.get("PodGroup", name)
        obj["status"] = {"phase": phase}
        outs.extend(self.feed("MODIFIED", obj))
        return outs

    def delete_pg(self) -> Outs:
        meta = self.job_obj["metadata"]  # type: ignore[index]
        return self.feed("DELETED", self.get("PodGroup", f"{meta['name']}-{meta['uid']}"))

    def command(self, action: str, **kw: Any) -> Outs:
        return self.feed("ADDED", command(self.job_obj["metadata"]["name"], action, **kw))  # type: ignore[index]

    def timer(self, timer_id: str) -> Outs:
        """A TIMER record (the bus's way of firing a delayed action)."""
        data = _enc.encode({"type": "TIMER", "timer": {"job": self.key, "id": timer_id}, "time": self.now})
        return self.feed_raw(data)


def running_job(job_obj: dict | None = None, **kw: Any) -> Harness:
    """A Harness whose job has its pods created, scheduled and Running."""
    h = Harness(job_obj if job_obj is not None else job(**kw))
    h.pg("Inqueue")
    for t in h.job_obj["spec"]["tasks"]:  # type: ignore[index]
        for i in range(t["replicas"]):
            h.add_pod(t["name"], i)
    for t in h.job_obj["spec"]["tasks"]:  # type: ignore[index]
        for i in range(t["replicas"]):
            h.set_pod(f"{h.job_obj['metadata']['name']}-{t['name']}-{i}", phase="Running")  # type: ignore[index]
    assert h.phase == "Running", h.phase
    return h


# ---------------------------------------------------------------- unit-level: one action in one phase


def decode_job(obj: dict) -> Job:
    return msgspec.json.decode(_enc.encode(obj), type=Job)


def decode_pod(obj: dict) -> Pod:
    return msgspec.json.decode(_enc.encode(obj), type=Pod)


def entry_in(phase: str, job_obj: dict | None = None, *, pods: Iterable[dict] = (), pg: str | None = "Inqueue",
             retry: int = 0, version: int = 0, now: str = T1, **status: Any) -> tuple[Engine, JobEntry]:
    """An engine holding one job in `phase` with `pods` cached and its PodGroup in phase `pg`.

    `pg=None`: no PodGroup known. Extra keyword arguments set status fields
    (`terminating=2`, `min_available=1`...); `status.minAvailable` defaults to
    `spec.minAvailable`, LTT to T0.
    """
    job_obj = job_obj if job_obj is not None else job()
    engine = Engine()
    engine.now = now
    spec = decode_job(job_obj)
    entry = engine.entry(spec.metadata.namespace, spec.metadata.name)
    entry.job = spec
    status.setdefault("min_available", spec.spec.min_available)
    entry.status = JobStatus(
        state=JobState(phase=phase, last_transition_time=T0 if phase else None),
        retry_count=retry,
        version=version,
        conditions=[JobCondition(status=phase, last_transition_time=T0)] if phase else None,
        **status,
    )
    for p in pods:
        decoded = decode_pod(p)
        state = PodState(decoded.metadata.name, decoded.metadata.annotations["volcano.sh/task-spec"])
        state.refresh(decoded, int(decoded.metadata.annotations["volcano.sh/job-version"]))
        entry.put_pod(state)
    if pg is not None:
        entry.pg = PodGroupState(f"{spec.metadata.name}-{spec.metadata.uid}", "uid-pg", pg)
    return engine, entry


def execute(engine: Engine, entry: JobEntry, action: str, target: Target | None = None) -> Outs:
    """Volcano's `state.Execute(action)` on the entry's current phase; the outputs it produced."""
    engine.seq += 1
    engine.out = []
    worker.execute(engine, entry, action, target)
    return Outs(engine.out)


def pods_of(job_name: str = "j", task_name: str = "t", phases: Iterable[str] = (), **kw: Any) -> list[dict]:
    return [pod(job_name, task_name, i, phase=ph, **kw) for i, ph in enumerate(phases)]


# ---------------------------------------------------------------- scenarios replayed by test_determinism

SCENARIOS: dict[str, Callable[[], list[bytes]]] = {}
_recording: list[list[bytes]] | None = None


@contextlib.contextmanager
def recording_logs() -> Iterator[list[list[bytes]]]:
    """Collect the log of every Harness created inside the block."""
    global _recording
    _recording = logs = []
    try:
        yield logs
    finally:
        _recording = None


def scenario(fn: Callable[[], list[bytes]]) -> Callable[[], list[bytes]]:
    """Register a function that builds a log (list of records) for the determinism test."""
    SCENARIOS[f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}"] = fn
    return fn
