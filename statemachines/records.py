"""Decoding one watch record: `{"type": ..., "object": {...}}` bytes into typed input.

This is the pure half of reading a log (the I/O half, which finds record
boundaries in files and streams, is `vcbus.watchlog`). One record decodes to:

- `Observed`: a watch event of a kind the controller reads (Job, Pod, PodGroup,
  Queue, Command), its object decoded into a view of `statemachines.objects`;
- `Ignored`: a valid record of another kind, a BOOKMARK, or the same kind in
  another API group (`batch/v1` Job);
- `TimerRecord`: a delayed action firing, as the bus log stores it;
- or `RecordError`, raised with a message naming what is wrong and where
  (a JSON path) — the caller adds the position in the file.

`decode_replay` gives equal results for a fold of many records (replay): a
vcjob's spec, repeated in every record of the job, is decoded once per
distinct spec.

Records may carry `"time"` (RFC 3339, when the bus observed them); kubectl
output has none, and the event time is then derived from the object itself.
"""

from __future__ import annotations

import re
from typing import Union

import msgspec
from msgspec import Raw, Struct
from msgspec.structs import replace

from statemachines import timefmt
from statemachines.objects import (
    API_VERSIONS,
    Command,
    Job,
    JobSpec,
    JobStatusView,
    KnownObject,
    Meta,
    Pod,
    PodGroup,
    Queue,
)

WATCH_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED"})


class RecordError(ValueError):
    """A record that cannot be used; the message says what and where."""


class Observed(Struct, frozen=True, gc=False):
    type: str  # ADDED | MODIFIED | DELETED
    object: KnownObject
    time: str | None = None
    # timestamps that were not RFC 3339 and were treated as absent ("time: 'x' is not a time")
    notes: tuple[str, ...] = ()


class Ignored(Struct, frozen=True):
    kind: str  # "BOOKMARK", "Node", "batch/v1 Job", ...


class TimerSpec(Struct, frozen=True, rename="camel"):
    job: str
    id: str
    due: str = ""


class TimerRecord(Struct, frozen=True):
    timer: TimerSpec
    time: str | None = None


Decoded = Union[Observed, Ignored, TimerRecord]


class _Envelope(Struct):
    type: str
    object: KnownObject
    time: str | None = None


class _TimerEnvelope(Struct):
    type: str
    timer: TimerSpec
    time: str | None = None


_typed = msgspec.json.Decoder(_Envelope)
_timer = msgspec.json.Decoder(_TimerEnvelope)
_generic = msgspec.json.Decoder()


NAMESPACED = frozenset({"Job", "Pod", "PodGroup", "Command"})


def decode(data: bytes) -> Decoded:
    """Decode one record; raise `RecordError` if it is unusable.

    A JSON document nested deeper than the decoder's recursion limit is a
    `RecordError` too (never a `RecursionError` escaping to the caller).
    """
    try:
        return _decode(data)
    except RecursionError:
        raise RecordError("nested too deeply to decode (JSON depth limit exceeded)") from None


def _decode(data: bytes) -> Decoded:
    try:
        env = _typed.decode(data)
    except msgspec.DecodeError as err:
        return _slow_path(data, err)
    obj = env.object
    kind = type(obj).__name__
    if obj.api_version and obj.api_version != API_VERSIONS[kind]:
        return Ignored(f"{obj.api_version} {kind}")
    if env.type not in WATCH_TYPES:
        if env.type == "BOOKMARK":
            return Ignored("BOOKMARK")
        raise RecordError(f"unknown watch event type {env.type!r} (expected ADDED, MODIFIED, DELETED or BOOKMARK)")
    if not obj.metadata.name:
        raise RecordError(f"{_what(kind)} without metadata.name")
    if kind in NAMESPACED and not obj.metadata.namespace:
        raise RecordError(f"{_what(kind)} {obj.metadata.name!r} without metadata.namespace")
    return checked_times(Observed(env.type, obj, env.time))


# ------------------------------------------------------------------ replay's decode: job specs once


class _JobSpecRaw(Struct, frozen=True, tag_field="kind", tag="Job", rename="camel", gc=False):
    """A vcjob with its spec left as bytes: a job's spec rarely changes between its records."""

    api_version: str = ""
    metadata: Meta = Meta()
    spec: Raw = Raw(b"")  # empty: no spec in the record
    status: JobStatusView | None = None


class _LightEnvelope(Struct):
    type: str
    object: Union[_JobSpecRaw, Pod, PodGroup, Queue, Command]
    time: str | None = None


_light = msgspec.json.Decoder(_LightEnvelope)
_job_spec = msgspec.json.Decoder(JobSpec)
_specs: dict[bytes, JobSpec] = {}  # spec bytes -> decoded spec; bounded, so memory does not grow with the log
_SPECS_MAX = 256


def decode_replay(data: bytes) -> Decoded:
    """`decode`, for a fold of many records: equal results, each distinct job spec decoded once.

    A vcjob's records (its status writes, mostly) repeat the same spec bytes; the
    spec is compared as bytes and the earlier decoded (equal, frozen) spec reused.
    Anything unusual (an error, a spec that does not decode) takes `decode`'s path,
    so messages are the same.
    """
    try:
        env = _light.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return decode(data)
    obj = env.object
    if obj.__class__ is not _JobSpecRaw:
        return decode(data) if env.type not in WATCH_TYPES else _checked_env(env.type, obj, env.time, data)
    key = bytes(obj.spec)
    if not key:
        return decode(data)
    spec = _specs.get(key)
    if spec is None:
        try:
            spec = _job_spec.decode(key)
        except (msgspec.DecodeError, RecursionError):
            return decode(data)
        if len(_specs) >= _SPECS_MAX:
            _specs.clear()
        _specs[key] = spec
    if env.type not in WATCH_TYPES:
        return decode(data)
    job = Job(api_version=obj.api_version, metadata=obj.metadata, spec=spec, status=obj.status)
    return _checked_env(env.type, job, env.time, data)


def _checked_env(rtype: str, obj: KnownObject, when: str | None, data: bytes) -> Decoded:
    """`_decode`'s checks for a watch event of a known kind; anything else goes through `decode`."""
    kind = obj.__class__.__name__
    meta = obj.metadata
    if (obj.api_version and obj.api_version != API_VERSIONS[kind]) or not meta.name or (
        kind in NAMESPACED and not meta.namespace
    ):
        return decode(data)
    return checked_times(Observed(rtype, obj, when))


def _what(kind: str) -> str:
    return "vcjob" if kind == "Job" else kind


def _slow_path(data: bytes, typed_error: Exception) -> Decoded:
    """Why the fast decode failed: invalid JSON, a wrong shape, or just another kind."""
    try:
        value = _generic.decode(data)
    except msgspec.DecodeError as err:
        raise RecordError(f"invalid JSON: {err}") from None
    if not isinstance(value, dict):
        raise RecordError(f"expected a JSON object {{\"type\": ..., \"object\": ...}}, got {_json_type(value)}")
    rtype = value.get("type")
    if rtype is None:
        raise RecordError('missing field "type"')
    if not isinstance(rtype, str):
        raise RecordError(f'field "type" must be a string, got {_json_type(rtype)}')
    if rtype == "TIMER":
        try:
            env = _timer.decode(data)
        except msgspec.DecodeError as err:
            raise RecordError(f"invalid TIMER record: {err}") from None
        return TimerRecord(env.timer, env.time)
    if rtype == "BOOKMARK":
        return Ignored("BOOKMARK")
    if rtype == "ERROR":
        return Ignored("ERROR")
    if "object" not in value:
        raise RecordError('missing field "object"')
    obj = value["object"]
    if not isinstance(obj, dict):
        raise RecordError(f'field "object" must be an object, got {_json_type(obj)}')
    if rtype not in WATCH_TYPES:
        raise RecordError(f"unknown watch event type {rtype!r} (expected ADDED, MODIFIED, DELETED or BOOKMARK)")
    kind = obj.get("kind")
    api_version = obj.get("apiVersion", "")
    if kind not in API_VERSIONS:
        return Ignored(str(kind) if kind else "object without kind")
    if api_version and api_version != API_VERSIONS[kind]:
        return Ignored(f"{api_version} {kind}")
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name"):
        raise RecordError(f"{_what(kind)} without metadata.name")
    message = str(typed_error).replace("$.object", f"{_what(kind)} $")
    raise RecordError(message)


def _json_type(value: object) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if value is None:
        return "null"
    return "an object"


# ------------------------------------------------------------------ timestamps

_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})?$")


_checked: dict[str, bool] = {}  # timestamps repeat a lot in a log: each is parsed once


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
    _checked[ts] = ok
    return ok


def _all_valid(rec: Observed) -> bool:
    """The fast path of `checked_times`: every timestamp of the record is fine (nearly always)."""
    if rec.time is not None and not valid_time(rec.time):
        return False
    obj = rec.object
    meta = obj.metadata
    for ts in (meta.creation_timestamp, meta.deletion_timestamp):
        if ts is not None and not valid_time(ts):
            return False
    if isinstance(obj, Job):
        ltt = obj.status.state.last_transition_time if obj.status is not None else None
        return ltt is None or valid_time(ltt)
    if isinstance(obj, Pod):
        known = _checked.get  # valid_time's cache, looked up inline: this runs for every pod record
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
    return True


def checked_times(rec: Observed) -> Observed:
    """`rec` with every timestamp that is not RFC 3339 treated as absent, each one noted.

    The record's `time` and the object's `creationTimestamp`, condition and
    container times become None, so the event time is derived as if they were
    missing. A bad `deletionTimestamp` keeps its meaning (the object is being
    deleted) but carries no time: it becomes the epoch, which never moves the
    log's clock. Jobs keep progressing; the caller reports `notes`.
    """
    if _all_valid(rec):
        return rec
    notes: list[str] = []

    def ok(path: str, ts: str | None) -> bool:
        if ts is None or valid_time(ts):
            return True
        notes.append(f"{path}: {ts!r} is not an RFC 3339 time; treated as absent")
        return False

    when = rec.time if ok("time", rec.time) else None
    obj = rec.object
    meta = obj.metadata
    fixed_meta = meta
    if not ok("metadata.creationTimestamp", meta.creation_timestamp):
        fixed_meta = replace(fixed_meta, creation_timestamp=None)
    if not ok("metadata.deletionTimestamp", meta.deletion_timestamp):
        fixed_meta = replace(fixed_meta, deletion_timestamp=timefmt.ZERO_TIME)
    if fixed_meta is not meta:
        obj = replace(obj, metadata=fixed_meta)
    if isinstance(obj, Job) and obj.status is not None:
        state = obj.status.state
        if not ok("status.state.lastTransitionTime", state.last_transition_time):
            obj = replace(obj, status=replace(obj.status, state=replace(state, last_transition_time=None)))
    elif isinstance(obj, Pod) and obj.status is not None:
        obj = _checked_pod(obj, ok)
    if not notes:
        return rec
    return Observed(rec.type, obj, when, tuple(notes))


def _checked_pod(pod: Pod, ok) -> Pod:
    status = pod.status
    conds = status.conditions
    if conds:
        new = [
            c if ok(f"status.conditions[{i}].lastTransitionTime", c.last_transition_time)
            else replace(c, last_transition_time=None)
            for i, c in enumerate(conds)
        ]
        if any(a is not b for a, b in zip(new, conds)):
            status = replace(status, conditions=new)
    for field in ("container_statuses", "init_container_statuses"):
        statuses = getattr(status, field)
        if not statuses:
            continue
        json_name = "containerStatuses" if field == "container_statuses" else "initContainerStatuses"
        new_cs = [_checked_container(f"status.{json_name}[{i}]", cs, ok) for i, cs in enumerate(statuses)]
        if any(a is not b for a, b in zip(new_cs, statuses)):
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
