"""Policy resolution: Volcano's `applyPolicies` (§5.1), plus an explanation for humans.

Given the job and a request, pick `(action, delay)`: a Command's action as is;
SyncJob for internal events, for requests from another job UID or from an
older job version; then the task's policies, then the job's, each in list
order, the event check before the exit-code check; SyncJob when nothing
matches. A PodPending event only matches a policy that has a timeout.

`Resolution.policy` names the winner the way `vcbus replay` prints it:
`task[<task>][i]`, `job[i]`, `command` or `default`. With `explain=True` the
resolution also says why every other policy did not match.
"""

from __future__ import annotations

from msgspec import Struct

from statemachines.model.objects import Job, LifecyclePolicy
from statemachines.model.timefmt import parse_duration
from statemachines.model.vocabulary import INTERNAL_EVENTS, Action, Event


class Request(Struct, gc=False):
    """What the controller is asked to handle (Volcano's `apis.Request`).

    gc=False (and for `Resolution`): plain strings and numbers, never part of a cycle, so the
    collector need not track the one made for every record."""

    event: str = ""
    exit_code: int = 0
    task: str = ""
    pod: str = ""
    pod_uid: str = ""
    job_uid: str = ""
    partition: str = ""
    job_version: int = 0
    action: str = ""  # set by Commands (and fired timers)
    source: str = ""  # "pod", "job", "podgroup", "command", "self" (our own status write), "timer"


class Resolution(Struct, gc=False):
    action: str
    delay: float = 0.0
    delay_text: str = ""
    policy: str = "default"
    reason: str = ""
    explain: list[str] = []


def _events(policy: LifecyclePolicy) -> list[str]:
    events = list(policy.events or ())
    if policy.event:
        events.append(policy.event)
    return events


def _match(policy: LifecyclePolicy, req: Request, why: list[str] | None, label: str) -> bool:
    events = _events(policy)
    if events and req.event:
        if req.event in events or _ANY in events:
            if req.event != _POD_PENDING or policy.timeout is not None:
                return True
            if why is not None:
                why.append(f"{label}: matches {req.event} but has no timeout (PodPending needs one)")
        elif why is not None:
            why.append(f"{label}: events {events} do not include {req.event}")
    if policy.exit_code is not None:
        if policy.exit_code == req.exit_code:
            return True
        if why is not None:
            why.append(f"{label}: exitCode {policy.exit_code} != {req.exit_code}")
    elif not events and why is not None:
        why.append(f"{label}: neither event nor exitCode")
    return False


def _resolved(policy: LifecyclePolicy, label: str, why: list[str]) -> Resolution:
    delay = parse_duration(policy.timeout) if policy.timeout is not None else 0.0
    return Resolution(
        action=policy.action,
        delay=delay,
        delay_text=policy.timeout or "",
        policy=label,
        explain=why,
    )


def resolve(
    job: Job, req: Request, *, version: int, explain: bool = False, memo: dict | None = None
) -> Resolution:
    """Volcano's applyPolicies for `req` against `job`'s spec; `version` is the job's status version.
    `fixed_answer`, else `policy_answer`."""
    return fixed_answer(req) or policy_answer(job, req, version=version, explain=explain, memo=memo)


def fixed_answer(req: Request) -> Resolution | None:
    """The answers that need no spec: a Command's (or timer's) action, or an internal event's one
    shared, never-changed answer (most requests); None for the others."""
    if req.action:
        return Resolution(action=req.action, policy="command" if req.source == "command" else req.source)
    return INTERNAL_ANSWERS.get(req.event)


def policy_answer(
    job: Job, req: Request, *, version: int, explain: bool = False, memo: dict | None = None
) -> Resolution:
    """applyPolicies' answer from the job's spec, for a request `fixed_answer` has none for.

    `memo`: a dict the caller keeps for this very spec object (and only it), in which the
    policy match is remembered per (event, task, exit code): the pods of a job ask the same
    questions over and over, and the answer depends on nothing else. Unused with `explain`."""
    if req.job_uid and req.job_uid != job.metadata.uid:
        return Resolution(action=_SYNC_JOB, reason=f"event from another job uid {req.job_uid}")
    if req.job_version < version:
        return Resolution(
            action=_SYNC_JOB, reason=f"event from job version {req.job_version} < current {version}"
        )
    if memo is not None and not explain:
        key = (req.event, req.task, req.exit_code)
        res = memo.get(key)
        if res is None:
            res = _match_policies(job, req, None)
            if len(memo) < _MEMO_MAX:
                memo[key] = res
        return res
    return _match_policies(job, req, [] if explain else None)


_MEMO_MAX = 64  # answers kept per spec: a few events x tasks, and exit codes, which a log could vary without end


def _match_policies(job: Job, req: Request, why: list[str] | None) -> Resolution:
    """The task's policies, then the job's, in list order (resolve's last step)."""
    if req.task:
        for task in job.spec.tasks:
            if task.name == req.task:
                for i, policy in enumerate(task.policies or ()):
                    label = f"task[{task.name}][{i}]"
                    if _match(policy, req, why, label):
                        return _resolved(policy, label, why or [])
                break
    for i, policy in enumerate(job.spec.policies or ()):
        label = f"job[{i}]"
        if _match(policy, req, why, label):
            return _resolved(policy, label, why or [])
    return Resolution(action=_SYNC_JOB, reason="no policy matched", explain=why or [])


# Plain str, not the StrEnum members: those are slow to hash and compare, and these run per request.
# (Resolution.action stays the member: the bus encoding of ActionResolved depends on it, its
# `action` is written out even when it equals the field's default "SyncJob".)
_SYNC_JOB = Action.SYNC_JOB
_ANY = Event.ANY.value
_POD_PENDING = Event.POD_PENDING.value
# resolve's answer to an internal event (the worker looks it up first: most requests are these)
INTERNAL_ANSWERS = {
    event.value: Resolution(action=_SYNC_JOB, reason=f"internal event {event}") for event in INTERNAL_EVENTS
}
