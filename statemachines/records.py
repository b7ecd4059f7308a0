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

Records may carry `"time"` (RFC 3339, when the bus observed them); kubectl
output has none, and the event time is then derived from the object itself.
"""

from __future__ import annotations

from typing import Union

import msgspec
from msgspec import Struct

from statemachines.objects import API_VERSIONS, KnownObject

WATCH_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED"})


class RecordError(ValueError):
    """A record that cannot be used; the message says what and where."""


class Observed(Struct, frozen=True, gc=False):
    type: str  # ADDED | MODIFIED | DELETED
    object: KnownObject
    time: str | None = None


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


def decode(data: bytes) -> Decoded:
    """Decode one record; raise `RecordError` if it is unusable."""
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
    return Observed(env.type, obj, env.time)


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
