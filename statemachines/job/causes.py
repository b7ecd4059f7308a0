"""Why a job's phase moved, in words: the texts of `PhaseChanged.cause` and `ActionResolved.policy_text`.

A phase change has two possible sources, and the cause names both when both apply:

- the status function's guard that held (`retries exhausted (retryCount 3 of
  maxRetry 3)`, `minAvailable met (...)`), read from the row of the job
  machine that fired, with the figures it compared;
- the request being executed: the policy that fired, shown by its content
  (`PodFailed -> RestartJob (job policy 1)`, `task worker: PodEvicted ->
  RestartTask (task policy 1)`, `exitCode 3 -> RestartJob`, `... after 10m`),
  a Command, an expired timeout, a PodGroup phase change, a pod event.

Pure functions of the spec, the request and the freshly computed status;
they run only when a phase actually changes (and a policy text only when a
policy matched), so the common path pays nothing.
"""

from __future__ import annotations

from typing import Any

from statemachines.job.handling import Check, task_min, total_replicas
from statemachines.model.objects import Job, LifecyclePolicy
from statemachines.model.vocabulary import Event
from statemachines.timers.rules import Timer


def _policy_content(policy: LifecyclePolicy) -> str:
    events = list(policy.events or ())
    if policy.event:
        events.append(policy.event)
    trigger = ", ".join(events)
    if policy.exit_code is not None:
        trigger = f"{trigger} or exitCode {policy.exit_code}" if trigger else f"exitCode {policy.exit_code}"
    text = f"{trigger or '(nothing)'} -> {policy.action}"
    if policy.timeout is not None:
        text += f" after {policy.timeout}"
    return text


def policy_text(job: Job | None, label: str) -> str:
    """A policy label (`job[0]`, `task[worker][1]`, `timer:job[0]`) as its content; "" when not a policy."""
    if job is None:
        return ""
    if label.startswith("timer:"):
        label = label[len("timer:"):]
    try:
        if label.startswith("job[") and label.endswith("]"):
            i = int(label[4:-1])
            policies = job.spec.policies or ()
            return f"{_policy_content(policies[i])} (job policy {i + 1})" if i < len(policies) else ""
        if label.startswith("task[") and label.endswith("]"):
            name, _, rest = label[5:-1].partition("][")
            i = int(rest)
            for task in job.spec.tasks:
                if task.name == name:
                    policies = task.policies or ()
                    if i < len(policies):
                        return f"task {name}: {_policy_content(policies[i])} (task policy {i + 1})"
            return ""
    except ValueError:
        return ""
    return ""


# plain str: a StrEnum member is slow to look up and compare (request_text runs on every phase change)
_TASK_EVENTS = (Event.TASK_COMPLETED.value, Event.TASK_FAILED.value)
_POD_FAILED = Event.POD_FAILED.value


def request_text(event: str, task: str, pod: str, exit_code: int) -> str:
    """`PodFailed of pod x (exitCode 1)`, `TaskCompleted of task master (pod y)`."""
    if event in _TASK_EVENTS:
        text = f"{event} of task {task}" + (f" (pod {pod})" if pod else "")
    elif pod:
        text = f"{event} of pod {pod}"
    elif task:
        text = f"{event} of task {task}"
    else:
        text = event
    if event == _POD_FAILED:
        text += f" (exitCode {exit_code})"
    return text


def guard_text(name: str, want: bool, c: Check) -> str:
    """The guard that decided the transition, with the figures it compared."""
    s, spec = c.status, c.spec
    if not want:
        return f"not {name.replace('_', ' ')}"
    if name == "min_available_reached":
        return (
            f"minAvailable met (running {s.running} + succeeded {s.succeeded} + failed {s.failed}"
            f" >= minAvailable {spec.min_available})"
        )
    if name == "too_many_pending":
        replicas = total_replicas(spec)
        return (
            f"minAvailable not met (pending {s.pending} > replicas {replicas} - minAvailable {spec.min_available})"
        )
    if name == "retries_exhausted":
        return f"retries exhausted (retryCount {s.retry_count} of maxRetry {spec.max_retry})"
    if name == "enough_pods_left":
        replicas = total_replicas(spec)
        return (
            f"retries left (retryCount {s.retry_count} of maxRetry {spec.max_retry}) and enough pods to restart"
            f" (replicas {replicas} - terminating {s.terminating} >= minAvailable {s.min_available})"
        )
    if name == "no_live_pods":
        return "all pods gone (terminating 0, pending 0, running 0)"
    if name == "min_success_reached":
        return f"minSuccess reached (succeeded {s.succeeded} >= minSuccess {spec.min_success})"
    if name == "min_success_not_met":
        return f"all pods finished, minSuccess not met (succeeded {s.succeeded} < minSuccess {spec.min_success})"
    if name == "succeeded_reach_min_available":
        return (
            f"all pods finished, minAvailable met (succeeded {s.succeeded} >= minAvailable {spec.min_available})"
        )
    if name == "all_pods_finished":
        return (
            f"all pods finished, minAvailable not met (succeeded {s.succeeded} < minAvailable {spec.min_available},"
            f" failed {s.failed})"
        )
    if name == "task_min_not_met":
        counts = s.task_status_count or {}
        for task in spec.tasks:
            if task.min_available is None or task.name not in counts:
                continue
            done = counts[task.name]["phase"].get("Succeeded", 0)
            if done < task.min_available:
                return (
                    f"all pods finished, task {task.name} minAvailable not met"
                    f" (succeeded {done} < minAvailable {task_min(task)})"
                )
        return "all pods finished, a task's minAvailable not met"
    if name == "scaled_to_zero":
        return "scaled to zero replicas"
    return name.replace("_", " ")


def combine(guard: str, request: str) -> str:
    """The cause of one phase change: the guard that held, the request that led to it."""
    if guard and request:
        return f"{guard}; on {request}"
    return guard or request


def phase_cause(why: object, entry: Any, guard: str, *, spec_changed: bool) -> str:
    """`PhaseChanged.cause`: the guard that held and the request being executed (`why`), in words.

    `why` is what the worker is executing: a (Request, Resolution) pair, a fired
    `Timer`, or a text (statemachines/worker.py); `entry` is the job's aggregate."""
    if isinstance(why, Timer):
        request = (
            f"timeout expired: {request_text(why.event, why.task, why.pod, 0)}, "
            f"policy {policy_text(entry.job, why.policy) or why.policy}"
        )
    elif isinstance(why, str):
        request = why
    elif isinstance(why, tuple):
        req, res = why
        if req.source == "command":
            request = f"command {req.action}"
        elif req.source == "self":
            request = ""  # the pass after our own status write: the guard says it all
        elif req.source == "podgroup":
            request = f"PodGroup {entry.pg.name} phase changed to {entry.pg.phase}" if entry.pg else ""
        elif req.source == "job":
            request = "job spec changed" if spec_changed else ""
        else:
            request = request_text(req.event, req.task, req.pod, req.exit_code)
            if res.policy != "default":
                request += f", policy {policy_text(entry.job, res.policy) or res.policy}"
    else:
        request = ""
    return combine(guard, request)
