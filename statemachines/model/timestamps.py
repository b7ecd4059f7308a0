"""Timestamps inside a watch record: which are RFC 3339, and the record with the others dropped.

The domain orders and subtracts times as RFC 3339 strings (`timefmt`), so a
record's `time` and every time in its object are checked once on decode
(`statemachines.model.records.checked_times`). Nearly every record is fine
(`all_valid`, the fast path, with a cache of the timestamps seen); `checked`
says which ones are not and treats them as absent.
"""

from __future__ import annotations

import re

from msgspec.structs import replace

from statemachines.model import timefmt
from statemachines.model.objects import Job, ObservedObject, Pod
from statemachines.model.record_time import deletion_requested

_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})?$")


_checked: dict[str, bool] = {}  # timestamps repeat a lot in a log: each is parsed once
_valid: set[str] = set()  # the valid ones among them (`object_time_if_valid` tests membership: no call)


def valid_time(ts: str) -> bool:
    """True when `ts` is an RFC 3339 timestamp the domain can order and do arithmetic on."""
    known = _checked.get(ts)
    if known is not None:
        return known
    ok = _RFC3339.match(ts) is not None
    if ok:
        try:
            timefmt.parse(ts)
        except ValueError:
            ok = False
    if len(_checked) >= 65536:
        _checked.clear()
        _valid.clear()
    _checked[ts] = ok
    if ok:
        _valid.add(ts)
    return ok


def all_valid(when: str | None, obj: ObservedObject) -> bool:
    """The fast path of `checked`: every timestamp of a record (its `time`, its object's) is fine
    (nearly always).

    It runs for every record: `valid_time`'s cache is looked up inline, and the
    kinds are told apart by class."""
    known = _checked.get
    ts = when
    if ts is not None and not (known(ts) or valid_time(ts)):
        return False
    meta = obj.metadata
    ts = meta.creation_timestamp
    if ts is not None and not (known(ts) or valid_time(ts)):
        return False
    ts = meta.deletion_timestamp
    if ts is not None and not (known(ts) or valid_time(ts)):
        return False
    for entry in meta.managed_fields or ():
        ts = entry.time
        if ts is not None and not (known(ts) or valid_time(ts)):
            return False
    if obj.__class__ is Pod:  # exact classes (mypy narrows on them): a failed isinstance on a Struct is slow
        status = obj.status
        for c in status.conditions or ():
            ts = c.last_transition_time
            if ts is not None and not (known(ts) or valid_time(ts)):
                return False
        for statuses in (status.container_statuses, status.init_container_statuses):
            for cs in statuses or ():
                st = cs.state
                if st is None:
                    continue
                term = st.terminated
                if term is not None:
                    ts = term.started_at
                    if ts is not None and not (known(ts) or valid_time(ts)):
                        return False
                    ts = term.finished_at
                    if ts is not None and not (known(ts) or valid_time(ts)):
                        return False
                run = st.running
                if run is not None:
                    ts = run.started_at
                    if ts is not None and not (known(ts) or valid_time(ts)):
                        return False
    elif obj.__class__ is Job:
        job_status = obj.status
        ts = job_status.state.last_transition_time if job_status is not None else None
        return ts is None or known(ts) or valid_time(ts)
    return True


INVALID = "not RFC 3339"  # `object_time_if_valid`'s answer for a record with a bad timestamp (never a time)


def object_time_if_valid(when: str | None, obj: ObservedObject) -> str | None:
    """`all_valid` and `record_time.object_time` in one walk: the object's time, or `INVALID`.

    Replay decodes a record (where every timestamp is checked) and the engine then
    takes the object's time (the latest timestamp): two walks over the same small
    objects, each a noticeable part of a pod record's cost. Done here at once, the
    time rides on the record (`Observed.at`). Equal to `INVALID if not all_valid(when,
    obj) else object_time(obj)`, always (tests/test_replay_time_walk.py checks it).

    A record's timestamps are mostly one moment (a pod's conditions and its container's
    start): one equal to the latest so far (`best`, checked already) needs neither the
    membership test (a decoded string's hash is computed afresh) nor the ordering. So
    `best` only ever holds checked timestamps: the deletion request (computed, not read)
    is taken last."""
    valid = _valid
    if when is not None and not (when in valid or valid_time(when)):
        return INVALID
    meta = obj.metadata
    best = ts = meta.creation_timestamp
    if ts is not None and not (ts in valid or valid_time(ts)):
        return INVALID
    deleted = meta.deletion_timestamp
    if deleted is not None and not (deleted in valid or valid_time(deleted)):
        return INVALID
    for entry in meta.managed_fields or ():
        ts = entry.time
        if ts is not None and ts != best:
            if not (ts in valid or valid_time(ts)):
                return INVALID
            if best is None or ts > best:
                best = ts
    if obj.__class__ is Pod:  # exact classes (mypy narrows on them): a failed isinstance on a Struct is slow
        status = obj.status
        for c in status.conditions or ():
            ts = c.last_transition_time
            if ts is not None and ts != best:
                if not (ts in valid or valid_time(ts)):
                    return INVALID
                if best is None or ts > best:
                    best = ts
        for cs in status.container_statuses or ():
            st = cs.state
            if st is None:
                continue
            term = st.terminated
            run = st.running
            if term is not None:
                started, ts = term.started_at, term.finished_at
                if started is not None and started != best and not (started in valid or valid_time(started)):
                    return INVALID
                if ts is not None and ts != best and not (ts in valid or valid_time(ts)):
                    return INVALID
                ts = ts or started
                if ts and (best is None or ts > best):
                    best = ts
            if run is not None:
                started = run.started_at
                if started is not None and started != best:
                    if not (started in valid or valid_time(started)):
                        return INVALID
                    if term is None and (best is None or started > best):
                        best = started
        for cs in status.init_container_statuses or ():  # checked, never the object's time
            st = cs.state
            if st is None:
                continue
            term = st.terminated
            if term is not None:
                ts = term.started_at
                if ts is not None and ts != best and not (ts in valid or valid_time(ts)):
                    return INVALID
                ts = term.finished_at
                if ts is not None and ts != best and not (ts in valid or valid_time(ts)):
                    return INVALID
            run = st.running
            if run is not None:
                ts = run.started_at
                if ts is not None and ts != best and not (ts in valid or valid_time(ts)):
                    return INVALID
    elif obj.__class__ is Job:
        job_status = obj.status
        if job_status is not None:
            ts = job_status.state.last_transition_time
            if ts is not None and ts != best:
                if not (ts in valid or valid_time(ts)):
                    return INVALID
                if best is None or ts > best:
                    best = ts
    if deleted:
        ts = deletion_requested(meta)
        if ts and (best is None or ts > best):
            best = ts
    return best


def checked(when: str | None, obj: ObservedObject) -> tuple[str | None, ObservedObject, list[str]]:
    """A record's `time` and object with every timestamp that is not RFC 3339 treated as absent, each one noted.

    The record's `time` and the object's `creationTimestamp`, managedFields,
    condition and container times become None, so the event time is derived as if they were
    missing. A bad `deletionTimestamp` keeps its meaning (the object is being
    deleted) but carries no time: it becomes the epoch, which never moves the
    log's clock. Jobs keep progressing; the caller reports `notes` (none: nothing changed).
    """
    notes: list[str] = []

    def ok(path: str, ts: str | None) -> bool:
        if ts is None or valid_time(ts):
            return True
        notes.append(f"{path}: {ts!r} is not an RFC 3339 time; treated as absent")
        return False

    when = when if ok("time", when) else None
    meta = obj.metadata
    fixed_meta = meta
    if not ok("metadata.creationTimestamp", meta.creation_timestamp):
        fixed_meta = replace(fixed_meta, creation_timestamp=None)
    if not ok("metadata.deletionTimestamp", meta.deletion_timestamp):
        fixed_meta = replace(fixed_meta, deletion_timestamp=timefmt.ZERO_TIME)
    if meta.managed_fields:
        entries = [
            e if ok(f"metadata.managedFields[{i}].time", e.time) else replace(e, time=None)
            for i, e in enumerate(meta.managed_fields)
        ]
        if any(a is not b for a, b in zip(entries, meta.managed_fields, strict=True)):
            fixed_meta = replace(fixed_meta, managed_fields=entries)
    if fixed_meta is not meta:
        obj = replace(obj, metadata=fixed_meta)
    if isinstance(obj, Job) and obj.status is not None:
        state = obj.status.state
        if not ok("status.state.lastTransitionTime", state.last_transition_time):
            obj = replace(obj, status=replace(obj.status, state=replace(state, last_transition_time=None)))
    elif isinstance(obj, Pod) and obj.status is not None:
        obj = _checked_pod(obj, ok)
    return when, obj, notes


def _checked_pod(pod: Pod, ok) -> Pod:
    status = pod.status
    conds = status.conditions
    if conds:
        new = [
            c if ok(f"status.conditions[{i}].lastTransitionTime", c.last_transition_time)
            else replace(c, last_transition_time=None)
            for i, c in enumerate(conds)
        ]
        if any(a is not b for a, b in zip(new, conds, strict=True)):
            status = replace(status, conditions=new)
    for field in ("container_statuses", "init_container_statuses"):
        statuses = getattr(status, field)
        if not statuses:
            continue
        json_name = "containerStatuses" if field == "container_statuses" else "initContainerStatuses"
        new_cs = [_checked_container(f"status.{json_name}[{i}]", cs, ok) for i, cs in enumerate(statuses)]
        if any(a is not b for a, b in zip(new_cs, statuses, strict=True)):
            status = replace(status, **{field: new_cs})
    return pod if status is pod.status else replace(pod, status=status)


def _checked_container(path: str, cs, ok):
    st = cs.state
    if st is None:
        return cs
    if st.terminated is not None:
        term = st.terminated
        fixed = term
        if not ok(f"{path}.state.terminated.startedAt", term.started_at):
            fixed = replace(fixed, started_at=None)
        if not ok(f"{path}.state.terminated.finishedAt", term.finished_at):
            fixed = replace(fixed, finished_at=None)
        return cs if fixed is term else replace(cs, state=replace(st, terminated=fixed))
    if st.running is not None and not ok(f"{path}.state.running.startedAt", st.running.started_at):
        return replace(cs, state=replace(st, running=replace(st.running, started_at=None)))
    return cs
