"""When a watch record happened, from its object alone: the replay clock of a log without observed times.

A record from the bus carries the time the bridge observed it; `kubectl get -w`
output does not, and its time is then when the object was written
(`object_time`): the latest time the object shows, but never a future one (a
terminating object's `deletionTimestamp` is its deletion request plus the grace
period, `deletion_requested`).
"""

from __future__ import annotations

from statemachines.model.cronjob import CronJob
from statemachines.model.jobflow import JobFlow, JobTemplate
from statemachines.model.objects import Job, Meta, ObservedObject, Pod
from statemachines.model.timefmt import fmt, parse

MAX_GRACE_SECONDS = 10 * 365 * 86400  # a grace period beyond this is taken as this (no time before year 1)


def deletion_requested(meta: Meta) -> str | None:
    """When the object's deletion was asked for.

    The API server sets `deletionTimestamp` to that moment *plus* the grace period
    (`deletionGracePeriodSeconds`, 30 s for a pod by default): while a pod
    terminates its deletionTimestamp lies in the future. Without a grace period
    (custom resources, a forced deletion) it is the moment itself."""
    ts = meta.deletion_timestamp
    if not ts:
        return None
    grace = meta.deletion_grace_period_seconds
    if not grace or grace < 0:
        return ts
    key = (ts, grace)
    when = _requested.get(key)
    if when is None:  # the pods of a job are deleted at the same moments: each pair is computed once
        when = fmt(parse(ts) - min(grace, MAX_GRACE_SECONDS))
        if len(_requested) >= 4096:
            _requested.clear()
        _requested[key] = when
    return when


_requested: dict[tuple[str, int], str] = {}


def object_time(obj: ObservedObject | CronJob | JobFlow | JobTemplate) -> str | None:
    """When this version of the object was written, as far as the object tells; never a future time.

    The latest of: its creation, its `managedFields` times (the API server stamps
    each write there), when its deletion was asked for (`deletion_requested`: not
    the deletionTimestamp itself, which is that plus the grace period), and for
    a pod its conditions' and containers' times, for a vcjob its status's
    lastTransitionTime. (A record from the bus carries the time it was observed
    instead, and that is used.)"""
    meta = obj.metadata
    best = meta.creation_timestamp
    for entry in meta.managed_fields or ():
        t = entry.time
        if t and (best is None or t > best):
            best = t
    if meta.deletion_timestamp:
        t = deletion_requested(meta)
        if t and (best is None or t > best):
            best = t
    if obj.__class__ is Pod:  # exact classes (mypy narrows on them): a failed isinstance on a Struct is slow
        status = obj.status
        for cond in status.conditions or ():
            t = cond.last_transition_time
            if t and (best is None or t > best):
                best = t
        for cs in status.container_statuses or ():
            st = cs.state
            if st is None:
                continue
            if st.terminated is not None:
                t = st.terminated.finished_at or st.terminated.started_at
            elif st.running is not None:
                t = st.running.started_at
            else:
                t = None
            if t and (best is None or t > best):
                best = t
    elif obj.__class__ is Job and obj.status is not None:
        t = obj.status.state.last_transition_time
        if t and (best is None or t > best):
            best = t
    return best
