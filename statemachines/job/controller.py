"""syncJob, killJob and killTarget (§6, §7): the pod work behind every action.

Each function reads the cache entry, emits the commands that carry the work
out (CreatePod, DeletePod, PodGroup commands, UpdateJobStatus...), records
those writes in the cache at once, and applies the phase's status function.
`ctx` is the engine: it provides `now`, `emit()` and the job-independent
knowledge (queues, the pod renderer).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from statemachines import outputs as o
from statemachines.cache import JobEntry, PodGroupState, PodState
from statemachines.job.handling import SOFT_PHASES, Check, Handling, Retain
from statemachines.job.causes import guard_text
from statemachines.job.machine import HANDLERS, fire_why
from statemachines.objects import TaskSpec
from statemachines.pods import pvc_name
from statemachines.status import POD_PHASES, JobStatus, copy_status, set_counts, set_transition
from statemachines.timefmt import go_duration, parse
from statemachines.vocabulary import Phase

if TYPE_CHECKING:
    from statemachines.engine import Engine


class SyncError(Exception):
    """The sync cannot proceed (Volcano would retry and finally force TerminateJob)."""


class Target(msgspec.Struct, frozen=True):
    kind: str  # "task" | "pod" | "partition"
    task: str = ""
    pod: str = ""
    partition: str = ""


def status_function(entry: JobEntry, status: JobStatus, handling: Handling) -> str | None:
    """Apply the phase's status function to `status`; when it reports a transition, the guard
    that decided it in words ("" for an unguarded trigger such as restart), else None."""
    if handling.trigger is None:
        return None
    if handling.retry:
        status.retry_count += 1
    phase = status.state.phase
    source = phase if phase in HANDLERS else Phase.PENDING.value
    check = Check(entry.job.spec, status)  # type: ignore[union-attr]
    dest, guards = fire_why(source, handling.trigger, check)
    if dest is None:
        return None
    status.state.phase = dest
    return "; ".join(guard_text(fn.__name__, want, check) for fn, want in guards)


def write_status(ctx: Engine, entry: JobEntry, status: JobStatus, action: str, guard: str | None = None) -> None:
    """UpdateJobStatus: the new status becomes the job's; a phase change asks for one more pass.

    `guard` is what `status_function` said about the move; with the request being
    handled (`ctx.cause`) it makes the `PhaseChanged.cause`."""
    old = entry.status
    old_phase = old.state.phase if old is not None else ""
    entry.status = status
    if old is None or old_phase != status.state.phase or old.retry_count != status.retry_count:
        trail = entry.trail
        trail.append((status.state.phase, status.retry_count))
        if len(trail) > 64:
            del trail[:-64]
    ctx.emit(o.UpdateJobStatus, entry, status=status, job_version=status.version)
    ctx.emit(o.StatusChanged, entry, status=status)
    if status.state.phase != old_phase:
        ctx.emit(
            o.PhaseChanged,
            entry,
            from_phase=old_phase,
            to_phase=status.state.phase,
            action=action,
            retry_count=status.retry_count,
            version=status.version,
            cause=ctx.cause(entry, guard or ""),
        )
        entry.followup = True


def _plugins(entry: JobEntry) -> list[str]:
    return sorted((entry.job.spec.plugins or {}).keys())  # type: ignore[union-attr]


def _bookkeep_plugins(status: JobStatus, plugins: list[str], *, add: bool) -> None:
    resources = dict(status.controlled_resources or {})
    for name in plugins:
        if add:
            resources[f"plugin-{name}"] = name
        else:
            resources.pop(f"plugin-{name}", None)
    status.controlled_resources = resources or None


_volumes = msgspec.json.Decoder(list[dict] | None)


def _bookkeep_volumes(ctx: Engine, entry: JobEntry, status: JobStatus) -> None:
    """PVC handling at initiation (§6.4): book every claim, create the generated ones once.

    A volume without `volumeClaimName` gets the controller's generated name, made
    deterministic here (`statemachines.pods.pvc_name`, the name the pods mount),
    and its PVC is created from `volumeClaim`. Volcano also writes that name back
    into the job spec; vcbus does not write specs (docs/fidelity.md).
    """
    job = entry.job
    assert job is not None
    volumes = _volumes.decode(job.spec.volumes)
    if not volumes:
        return
    resources = dict(status.controlled_resources or {})
    ident = {"metadata": {"name": job.metadata.name, "uid": job.metadata.uid}}
    for index, volume in enumerate(volumes):
        claim = volume.get("volumeClaimName") or pvc_name(ident, index)
        resources[f"volume-pvc-{claim}"] = claim
        spec = volume.get("volumeClaim")
        if not volume.get("volumeClaimName") and spec is not None and claim not in entry.pvcs:
            ctx.emit(o.CreatePVC, entry, name=claim, job_uid=job.metadata.uid, claim=spec)
            entry.pvcs.add(claim)
    status.controlled_resources = resources or None


def _min_task_member(entry: JobEntry) -> dict[str, int]:
    out = {}
    for task in entry.job.spec.tasks:  # type: ignore[union-attr]
        pp = task.partition_policy
        if task.min_available is not None:
            out[task.name] = task.min_available
        elif pp is not None and pp.min_partitions and pp.partition_size:
            out[task.name] = pp.min_partitions * pp.partition_size
        else:
            out[task.name] = task.replicas
    return out


def ensure_podgroup(ctx: Engine, entry: JobEntry) -> None:
    """createOrUpdatePodGroup (§6.3): create it when we know of none, else update what changed."""
    job = entry.job
    assert job is not None
    wanted = (job.spec.min_available, _min_task_member(entry), job.spec.priority_class_name)
    pg = entry.pg
    if pg is None:
        name = f"{job.metadata.name}-{job.metadata.uid}"
        ctx.emit(
            o.CreatePodGroup,
            entry,
            name=name,
            job_uid=job.metadata.uid,
            min_member=wanted[0],
            min_task_member=wanted[1],
            queue=job.spec.queue,
            priority_class_name=wanted[2],
            podgroup=ctx.render_podgroup(entry),
        )
        entry.pg = PodGroupState(name)
        entry.pg.spec = wanted
    elif pg.spec is not None and pg.spec != wanted:
        # Only what Volcano updates: minMember, minTaskMember, priorityClassName (§6.3).
        ctx.emit(
            o.UpdatePodGroup,
            entry,
            name=pg.name,
            min_member=wanted[0],
            min_task_member=wanted[1],
            priority_class_name=wanted[2],
        )
        pg.spec = wanted


def sync_job(ctx: Engine, entry: JobEntry, handling: Handling, action: str) -> None:
    job = entry.job
    assert job is not None and entry.status is not None
    if job.metadata.deletion_timestamp is not None:
        return
    if not ctx.queue_exists(job.spec.queue):
        raise SyncError(f'queues.scheduling.volcano.sh "{job.spec.queue}" not found')
    plugins = _plugins(entry)
    status = copy_status(entry.status)
    if status.state.phase in ("", Phase.PENDING):
        if status.state.phase == "":
            status.state.phase = Phase.PENDING
            status.min_available = job.spec.min_available
            set_transition(status, ctx.now)
            write_status(ctx, entry, status, action, "new job: first sync")
            status = copy_status(status)
        if plugins:
            added = [p for p in plugins if f"plugin-{p}" not in (status.controlled_resources or {})]
            _bookkeep_plugins(status, plugins, add=True)
            if added:  # OnJobAdd runs on every Pending sync; it only creates what is missing
                ctx.emit(o.PluginHook, entry, hook="OnJobAdd", plugins=plugins)
        _bookkeep_volumes(ctx, entry, status)
        ensure_podgroup(ctx, entry)
    else:
        if plugins and ctx.spec_changed:  # OnJobUpdate only has work when the spec changed
            ctx.emit(o.PluginHook, entry, hook="OnJobUpdate", plugins=plugins)
        ensure_podgroup(ctx, entry)

    pg = entry.pg
    if pg is None or pg.phase in ("", "Pending"):
        baseline = copy_status(status)
        guard = status_function(entry, status, handling)
        if status == baseline:
            return
        set_transition(status, ctx.now)
        write_status(ctx, entry, status, action, guard)
        return

    # Pod reconciliation (§6.1 step 8): count the expected pods, find missing and surplus ones.
    terminating = 0
    per_task: dict[str, dict[str, int]] = {}
    to_create: list[tuple[TaskSpec, int, str]] = []
    to_delete: list[tuple[PodState, str]] = []
    expected_names = expected_pod_names(entry)
    for task in job.spec.tasks:
        names, name_set = expected_names[task.name]
        pods = entry.pods.get(task.name)
        if not pods:
            to_create.extend((task, i, n) for i, n in enumerate(names))
            continue
        counter: dict[str, int] = {}
        found = 0
        for pod_name, pod in pods.items():
            if pod_name not in name_set:
                to_delete.append((pod, "scale-down"))
                continue
            found += 1
            if pod.deleting:
                terminating += 1
                continue
            if pod.out_of_sync:
                to_delete.append((pod, "out-of-sync"))
            phase = pod.phase if pod.phase in POD_PHASES else "Unknown"
            counter[phase] = counter.get(phase, 0) + 1
        if counter:
            per_task[task.name] = counter
        if found < len(names):
            to_create.extend((task, i, n) for i, n in enumerate(names) if n not in pods)

    blocked: dict[str, bool] = {}
    for task, index, pod_name in to_create:
        if task.depends_on is not None:
            if task.name not in blocked:
                blocked[task.name] = not dependencies_ready(entry, task)
            if blocked[task.name]:
                continue
        ctx.emit(
            o.CreatePod,
            entry,
            name=pod_name,
            task=task.name,
            index=index,
            job_version=status.version,
            retry_count=status.retry_count,
            job_uid=job.metadata.uid,
            pod=ctx.render_pod(entry, task.name, index, status),
        )
        placeholder = PodState(pod_name, task.name, version=status.version)
        entry.put_pod(placeholder)
        counter = per_task.setdefault(task.name, {})
        counter["Pending"] = counter.get("Pending", 0) + 1

    for pod, why in to_delete:
        if not pod.deleting:
            ctx.emit(o.DeletePod, entry, name=pod.name, uid=pod.uid, task=pod.task, mark_out_of_sync=False, reason=why)
            pod.deleting = True
        terminating += 1

    new = JobStatus(
        state=msgspec.structs.replace(status.state),
        version=status.version,
        min_available=job.spec.min_available,
        controlled_resources=status.controlled_resources,
        conditions=status.conditions,
        retry_count=status.retry_count,
        terminating=terminating,
    )
    set_counts(new, per_task)
    guard = status_function(entry, new, handling)
    if new == status:
        return
    set_transition(new, ctx.now)
    write_status(ctx, entry, new, action, guard)


def expected_pod_names(entry: JobEntry) -> dict[str, tuple[list[str], frozenset[str]]]:
    """`<job>-<task>-<i>` for every task, cached until the spec changes."""
    job = entry.job
    assert job is not None
    cached = entry.names
    if cached is not None and cached[0] is job.spec:
        return cached[1]
    name = job.metadata.name
    names = {}
    for t in job.spec.tasks:
        listed = [f"{name}-{t.name}-{i}" for i in range(t.replicas)]
        names[t.name] = (listed, frozenset(listed))
    entry.names = (job.spec, names)
    return names


def dependencies_ready(entry: JobEntry, task: TaskSpec) -> bool:
    """§6.5: `any` with several names needs one ready dependency, otherwise all."""
    job = entry.job
    assert job is not None and task.depends_on is not None
    names = task.depends_on.name or []
    by_name = {t.name: t for t in job.spec.tasks}
    ready = [_task_ready(entry, by_name.get(n), n) for n in names]
    if len(names) > 1 and task.depends_on.iteration == "any":
        return any(ready)
    return all(ready)


def _task_ready(entry: JobEntry, dep: TaskSpec | None, name: str) -> bool:
    if dep is None or dep.min_available is None:
        return True
    count = 0
    pods = entry.pods.get(name) or {}
    job_name = entry.job.metadata.name  # type: ignore[union-attr]
    for i in range(dep.replicas):
        pod = pods.get(f"{job_name}-{name}-{i}")
        if pod is None or not pod.observed:
            continue
        if pod.phase == "Succeeded" or (pod.phase == "Running" and pod.ready):
            count += 1
    return count >= dep.min_available


def _finish_kill(
    ctx: Engine, entry: JobEntry, status: JobStatus, terminating: int, handling: Handling, action: str
) -> None:
    # A kill's counts are what it saw: the pods going away. (Volcano also classifies pods whose
    # deletion failed; here deletion is a command, so none does.)
    set_counts(status, {})
    status.terminating = terminating
    guard = status_function(entry, status, handling)
    if guard is not None:
        set_transition(status, ctx.now)
    job = entry.job
    assert job is not None
    ltt = status.state.last_transition_time
    created = job.metadata.creation_timestamp
    if ltt and created:
        status.running_duration = go_duration(parse(ltt) - parse(created))
    plugins = _plugins(entry)
    if plugins:
        present = [p for p in plugins if f"plugin-{p}" in (status.controlled_resources or {})]
        _bookkeep_plugins(status, plugins, add=False)
        if present:  # OnJobDelete runs on every kill; it only has work while the objects exist
            ctx.emit(o.PluginHook, entry, hook="OnJobDelete", plugins=plugins)
    write_status(ctx, entry, status, action, guard)


def _kill(ctx: Engine, entry: JobEntry, pod: PodState) -> None:
    ctx.emit(o.DeletePod, entry, name=pod.name, uid=pod.uid, task=pod.task, mark_out_of_sync=True, reason="kill")
    pod.out_of_sync = True
    pod.deleting = True


def kill_job(ctx: Engine, entry: JobEntry, handling: Handling, action: str) -> None:
    job = entry.job
    assert job is not None and entry.status is not None
    if job.metadata.deletion_timestamp is not None:
        return
    status = copy_status(entry.status)
    status.version += 1
    retain = Retain.SOFT if status.retry_count >= job.spec.max_retry - 1 else handling.retain
    terminating = 0
    victims = []
    for task in sorted(entry.pods):
        pods = entry.pods[task]
        for pod_name in sorted(pods):
            pod = pods[pod_name]
            if pod.deleting:
                terminating += 1
            elif retain is Retain.SOFT and pod.phase in SOFT_PHASES:
                continue
            else:
                victims.append(pod)
    for pod in victims:
        _kill(ctx, entry, pod)
    _finish_kill(ctx, entry, status, terminating + len(victims), handling, action)
    if entry.pg is not None:
        ctx.emit(o.DeletePodGroup, entry, name=entry.pg.name)
        if entry.pg.uid:
            entry.pg_gone.add(entry.pg.uid)
        entry.pg = None


def kill_target(ctx: Engine, entry: JobEntry, handling: Handling, action: str, target: Target | None) -> None:
    job = entry.job
    assert job is not None and entry.status is not None
    if job.metadata.deletion_timestamp is not None:
        return
    victims: list[PodState] = []
    if target is not None:
        pods = entry.pods.get(target.task) or {}
        if target.kind == "task":
            victims = [pods[n] for n in sorted(pods)]
        elif target.kind == "pod":
            if target.pod in pods:
                victims = [pods[target.pod]]
        elif target.kind == "partition":
            spec = next((t for t in job.spec.tasks if t.name == target.task), None)
            if spec is not None and spec.partition_policy is not None:  # only such tasks have a partition index
                victims = [pods[n] for n in sorted(pods) if pods[n].partition == target.partition and target.partition]
            if not victims:
                return  # no partition index or no pods in it: nothing at all happens
    for pod in victims:
        if pod.deleting:
            pod.out_of_sync = True  # killPods patches every victim's annotation, deleting ones included
        else:
            _kill(ctx, entry, pod)
    _finish_kill(ctx, entry, copy_status(entry.status), len(victims), handling, action)

