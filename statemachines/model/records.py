"""Decoding one watch record: `{"type": ..., "object": {...}}` bytes into typed input.

This is the pure half of reading a log (the I/O half, which finds record
boundaries in files and streams, is `vcbus.watchlog`). One record decodes to:

- `Observed`: a watch event of a kind the controller reads (Job, Pod, PodGroup,
  Queue, Command, and a pod's owners ReplicaSet, StatefulSet, DaemonSet), its object decoded into a view of `statemachines.model.objects`;
- `Ignored`: a valid record of another kind, a BOOKMARK, or the same kind in
  another API group; a `batch/v1` Job is `Observed` as a `BatchJob`, a pod's owner;
- `TimerRecord`: a delayed action firing, as the bus log stores it;
- `RefusalRecord`: a command the API server refused for good (a pod create denied by admission,
  quota, a terminating namespace...), as the actuator appends it to the bus log: the outcome of
  a decision, folded as any record is;
- `CronJobRecord` (statemachines/model/cronjob.py): a watch event of a
  `batch.volcano.sh/v1alpha1` CronJob, with the time zones its schedule names
  (`zones`, resolved by the bridge);
- `FlowRecord` (statemachines/model/jobflow.py): a watch event of a
  `flow.volcano.sh/v1alpha1` JobFlow or JobTemplate;
- or `RecordError`, raised with a message naming what is wrong and where
  (a JSON path) — the caller adds the position in the file.

`statemachines.model.replay_decode.decode_replay` gives equal results for a
fold of many records (replay): a vcjob's spec, repeated in every record of the
job, is decoded once per distinct spec. Every timestamp is checked
(`statemachines.model.timestamps`).

Records may carry `"time"` (RFC 3339, when the bus observed them); kubectl
output has none, and the event time is then derived from the object itself.
"""

from __future__ import annotations

from typing import Union

import msgspec
from msgspec import Struct

from statemachines.model.cronjob import API_VERSION as CRONJOB_API_VERSION
from statemachines.model.cronjob import CronJobRecord
from statemachines.model.jobflow import API_VERSION as FLOW_API_VERSION
from statemachines.model.jobflow import FLOW_KINDS, FlowRecord, JobFlow
from statemachines.model.objects import (
    API_VERSIONS,
    BATCH_JOB_API_VERSION,
    BatchJob,
    KnownObject,
    Meta,
    ObservedObject,
)
from statemachines.model.timestamps import all_valid, checked, valid_time

WATCH_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED"})


class RecordError(ValueError):
    """A record that cannot be used; the message says what and where."""


class Observed(Struct, frozen=True, gc=False):
    type: str  # ADDED | MODIFIED | DELETED
    object: ObservedObject
    time: str | None = None
    # timestamps that were not RFC 3339 and were treated as absent ("time: 'x' is not a time")
    notes: tuple[str, ...] = ()
    # when the object was written (`record_time.object_time`), if the decoder already worked it out
    # (replay: `timestamps.object_time_if_valid`); None: not worked out (or no time at all)
    at: str | None = None


class Ignored(Struct, frozen=True):
    kind: str  # "BOOKMARK", "Node", "batch/v1 Job", ...


class TimerSpec(Struct, frozen=True, rename="camel"):
    job: str
    id: str
    due: str = ""


class TimerRecord(Struct, frozen=True):
    timer: TimerSpec
    time: str | None = None


class RefusalSpec(Struct, frozen=True, rename="camel"):
    """What the API server refused: the command (`command`: its type, e.g. CreatePod; `name`, `task`:
    the object it named), the decision it came from (`seq`, the log record's sequence; `jobUid`,
    `jobVersion`: the incarnation it was for) and the answer (`code`, `reason`, `message`)."""

    job: str
    command: str
    name: str = ""
    task: str = ""
    seq: int = 0
    job_uid: str = ""
    job_version: int = 0
    code: int = 0
    reason: str = ""
    message: str = ""


class RefusalRecord(Struct, frozen=True):
    refusal: RefusalSpec
    time: str | None = None


REFUSED = "REFUSED"  # the record's `type`

Decoded = Union[Observed, Ignored, TimerRecord, RefusalRecord, CronJobRecord, FlowRecord]


class _Envelope(Struct):
    type: str
    object: KnownObject
    time: str | None = None


class _TimerEnvelope(Struct):
    type: str
    timer: TimerSpec
    time: str | None = None


class _RefusalEnvelope(Struct):
    type: str
    refusal: RefusalSpec
    time: str | None = None


_typed = msgspec.json.Decoder(_Envelope)
_timer = msgspec.json.Decoder(_TimerEnvelope)
_refusal = msgspec.json.Decoder(_RefusalEnvelope)
_generic = msgspec.json.Decoder()
_cronjob = msgspec.json.Decoder(CronJobRecord)
_flow = msgspec.json.Decoder(FlowRecord)


NAMESPACED = frozenset({"Job", "Pod", "PodGroup", "Command", "ReplicaSet", "StatefulSet", "DaemonSet"})


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
        if kind == "Job" and obj.api_version == BATCH_JOB_API_VERSION and env.type in WATCH_TYPES:
            return _batch_job(env.type, obj.metadata, env.time)
        return Ignored(f"{obj.api_version} {kind}")
    if env.type not in WATCH_TYPES:
        if env.type == "BOOKMARK":
            return Ignored("BOOKMARK")
        raise RecordError(f"unknown watch event type {env.type!r} (expected ADDED, MODIFIED, DELETED or BOOKMARK)")
    if not obj.metadata.name:
        raise RecordError(f"{what(kind)} without metadata.name")
    if kind in NAMESPACED and not obj.metadata.namespace:
        raise RecordError(f"{what(kind)} {obj.metadata.name!r} without metadata.namespace")
    return checked_times(Observed(env.type, obj, env.time))


class _BatchEnvelope(Struct):
    object: BatchJob


_batch = msgspec.json.Decoder(_BatchEnvelope)


def _batch_job(rtype: str, meta: Meta, when: object) -> Decoded:
    """A `batch/v1` Job, a pod's owner (the podgroup controller reads its annotations); one without a name
    or namespace is ignored, as any object vcbus does not act on."""
    if not meta.name or not meta.namespace or not (when is None or isinstance(when, str)):
        return Ignored(f"{BATCH_JOB_API_VERSION} Job")
    return checked_times(Observed(rtype, BatchJob(BATCH_JOB_API_VERSION, meta), when))


def what(kind: str) -> str:
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
    if rtype == REFUSED:
        return _refusal_record(data)
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
    if kind == "CronJob" and api_version in ("", CRONJOB_API_VERSION):
        return _cronjob_record(data, rtype, obj)
    if kind in FLOW_KINDS and api_version in ("", FLOW_API_VERSION):
        return _flow_record(data, kind, obj)
    if not isinstance(kind, str) or kind not in API_VERSIONS:  # a list or mapping as kind is no kind either
        return Ignored(str(kind)[:60] if kind else "object without kind")
    if kind == "Job" and api_version == BATCH_JOB_API_VERSION:  # a spec the vcjob's view could not take
        try:
            return _batch_job(rtype, _batch.decode(data).object.metadata, value.get("time"))
        except msgspec.DecodeError:
            return Ignored(f"{api_version} {kind}")
    if api_version and api_version != API_VERSIONS[kind]:
        return Ignored(f"{api_version} {kind}")
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name"):
        raise RecordError(f"{what(kind)} without metadata.name")
    message = str(typed_error).replace("$.object", f"{what(kind)} $")
    raise RecordError(message)


def _refusal_record(data: bytes) -> RefusalRecord:
    """A REFUSED record: its job a NAMESPACE/NAME key, its time RFC 3339 when it has one."""
    try:
        env = _refusal.decode(data)
    except msgspec.DecodeError as err:
        raise RecordError(f"invalid REFUSED record: {err}") from None
    spec = env.refusal
    ns, sep, name = spec.job.partition("/")
    if not sep or not ns or not name:
        raise RecordError(f"invalid REFUSED record: refusal.job {spec.job!r} is not NAMESPACE/NAME")
    if not spec.command:
        raise RecordError("invalid REFUSED record: refusal.command is empty")
    if env.time is not None and not valid_time(env.time):
        raise RecordError(f"invalid REFUSED record: time {env.time!r} is not an RFC 3339 time")
    return RefusalRecord(spec, env.time)


def _cronjob_record(data: bytes, rtype: str, obj: dict) -> CronJobRecord:
    """A CronJob's watch record (its `zones` too); the same checks as a known kind's."""
    if rtype not in WATCH_TYPES:
        raise RecordError(f"unknown watch event type {rtype!r} (expected ADDED, MODIFIED, DELETED or BOOKMARK)")
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name"):
        raise RecordError("CronJob without metadata.name")
    if not meta.get("namespace"):
        raise RecordError(f"CronJob {meta['name']!r} without metadata.namespace")
    try:
        rec = _cronjob.decode(data)
    except msgspec.DecodeError as err:
        raise RecordError(str(err).replace("$.object", "CronJob $")) from None
    cj = rec.object
    for field, ts in (("time", rec.time), ("metadata.creationTimestamp", cj.metadata.creation_timestamp),
                      ("metadata.deletionTimestamp", cj.metadata.deletion_timestamp),
                      ("status.lastScheduleTime", cj.status.last_schedule_time),
                      ("status.lastSuccessfulTime", cj.status.last_successful_time)):
        if ts is not None and not valid_time(ts):
            raise RecordError(f"CronJob {meta['name']!r}: {field} {ts!r} is not an RFC 3339 time")
    return rec


def _flow_record(data: bytes, kind: str, obj: dict) -> FlowRecord:
    """A JobFlow's or JobTemplate's watch record; the same checks as a known kind's."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name"):
        raise RecordError(f"{kind} without metadata.name")
    if not meta.get("namespace"):
        raise RecordError(f"{kind} {meta['name']!r} without metadata.namespace")
    try:
        rec = _flow.decode(data)
    except msgspec.DecodeError as err:
        raise RecordError(str(err).replace("$.object", f"{kind} $")) from None
    m = rec.object.metadata
    times = [("time", rec.time), ("metadata.creationTimestamp", m.creation_timestamp),
             ("metadata.deletionTimestamp", m.deletion_timestamp)]
    if isinstance(rec.object, JobFlow):
        for i, js in enumerate(rec.object.status.job_status_list or ()):
            times += [(f"status.jobStatusList[{i}].startTimestamp", js.start_timestamp),
                      (f"status.jobStatusList[{i}].endTimestamp", js.end_timestamp)]
            for j, h in enumerate(js.running_histories or ()):
                times += [(f"status.jobStatusList[{i}].runningHistories[{j}].startTimestamp", h.start_timestamp),
                          (f"status.jobStatusList[{i}].runningHistories[{j}].endTimestamp", h.end_timestamp)]
    for field, ts in times:
        if ts is not None and not valid_time(ts):
            raise RecordError(f"{kind} {meta['name']!r}: {field} {ts!r} is not an RFC 3339 time")
    return rec


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


def checked_times(rec: Observed) -> Observed:
    """`rec` with every timestamp that is not RFC 3339 treated as absent, each one noted
    (`statemachines.model.timestamps.checked`)."""
    if all_valid(rec.time, rec.object):
        return rec
    when, obj, notes = checked(rec.time, rec.object)
    if not notes:
        return rec
    return Observed(rec.type, obj, when, tuple(notes))
