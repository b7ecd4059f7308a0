"""killJob and killTarget (§7): the pods an action deletes, then the phase's status function.

`kill_job` deletes the job's pods (all, or all but the finished ones when the
handling retains them or the retries are spent), bumps the job's version and
deletes its PodGroup; `kill_target` deletes one task's, one pod's or one
partition's pods (`Target`). Both finish like Volcano's: counts of what they
saw, the status function, the running duration, OnJobDelete, UpdateJobStatus
(`writes.py`).
"""

from __future__ import annotations

from operator import attrgetter

import msgspec

from statemachines import outputs as o
from statemachines.cache import JobEntry, PodState
from statemachines.job.context import JobContext
from statemachines.job.handling import SOFT_PHASES, Handling, Retain
from statemachines.job.writes import bookkeep_plugins, spec_facts, status_function, write_status
from statemachines.model.status import copy_killed, set_transition
from statemachines.model.timefmt import go_duration, parse

_SOFT = Retain.SOFT
_BY_NAME = attrgetter("task", "name")  # a pod's place in the cache: entry.pods[task][name]
_DURATIONS: dict[tuple[str, str], str] = {}  # (LTT, creationTimestamp) -> runningDuration


class Target(msgspec.Struct, frozen=True):
    kind: str  # "task" | "pod" | "partition"
    task: str = ""
    pod: str = ""
    partition: str = ""


def _finish_kill(
    ctx: JobContext, entry: JobEntry, version: int, terminating: int, handling: Handling, action: str
) -> None:
    # A kill's counts are what it saw: the pods going away.
    status = copy_killed(entry.status, version, terminating)  # type: ignore[arg-type]  # a job being killed has a status
    facts = spec_facts(entry)
    guard = status_function(entry, status, handling, facts)
    if guard is not None:
        set_transition(status, ctx.now)
    job = entry.job
    assert job is not None
    ltt = status.state.last_transition_time
    created = job.metadata.creation_timestamp
    if ltt and created:
        # a job's kills mostly share one LTT: each (LTT, creation) pair is worked out once (bounded)
        duration = _DURATIONS.get((ltt, created))
        if duration is None:
            if len(_DURATIONS) >= 4096:
                _DURATIONS.clear()
            duration = _DURATIONS[(ltt, created)] = go_duration(parse(ltt) - parse(created))
        status.running_duration = duration
    plugins = facts.plugins
    resources = status.controlled_resources
    if plugins and resources is not None:  # else there is nothing to unbook
        present = False
        for key, _ in facts.plugin_resources:  # `any`, without a generator: this runs on every kill
            if key in resources:
                present = True
                break
        if present or not resources:  # else unbooking them would leave an equal map
            bookkeep_plugins(status, plugins, add=False)
        if present:  # OnJobDelete runs on every kill; it only has work while the objects exist
            ctx.emit(o.PluginHook, entry, hook="OnJobDelete", plugins=plugins)
    write_status(ctx, entry, status, action, guard)


def _kill(ctx: JobContext, entry: JobEntry, pod: PodState) -> None:
    ctx.out.append(  # built by its keywords (`JobContext.emit`): one per pod killed
        o.DeletePod(job=entry.key, seq=ctx.seq, time=ctx.now, name=pod.name, uid=pod.uid, task=pod.task,
                    mark_out_of_sync=True, reason="kill")
    )
    flagged = pod.deleting or pod.out_of_sync
    pod.out_of_sync = True
    pod.deleting = True
    # the task counts follow (statemachines/task/counts.py): one move of the pod's contribution
    entry.tasks.recount(pod, pod.phase, pod.restarts, flagged)


def kill_job(ctx: JobContext, entry: JobEntry, handling: Handling, action: str) -> None:
    job = entry.job
    assert job is not None and entry.status is not None
    if job.metadata.deletion_timestamp is not None:
        return
    status = entry.status
    retain = _SOFT if status.retry_count >= job.spec.max_retry - 1 else handling.retain
    terminating = 0
    victims = []
    for pods in entry.pods.values():
        for pod in pods.values():
            if pod.deleting:
                terminating += 1
            elif retain is _SOFT and pod.phase in SOFT_PHASES:
                continue
            else:
                victims.append(pod)
    # Deleted by task, then name (Volcano walks its maps in no fixed order; vcbus's order is
    # deterministic). Mostly every pod is already deleting (a kill runs on every pod record of a
    # Completing or Terminating job): nothing to sort.
    if len(victims) > 1:
        victims.sort(key=_BY_NAME)
    for pod in victims:
        _kill(ctx, entry, pod)
    _finish_kill(ctx, entry, status.version + 1, terminating + len(victims), handling, action)
    if entry.pg is not None:
        ctx.emit(o.DeletePodGroup, entry, name=entry.pg.name)
        if entry.pg.uid:
            entry.pg_gone.add(entry.pg.uid)
        entry.pg = None


def kill_target(ctx: JobContext, entry: JobEntry, handling: Handling, action: str, target: Target | None) -> None:
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
            # (already deleting, so already flagged in the task counts: nothing to recount)
        else:
            _kill(ctx, entry, pod)
    _finish_kill(ctx, entry, entry.status.version, len(victims), handling, action)
