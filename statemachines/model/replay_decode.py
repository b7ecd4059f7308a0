"""`decode_replay`: `decode` for a fold of many records (replay), equal results for less work.

A vcjob's records (its status writes, mostly) repeat the same spec bytes; the
spec is compared as bytes and the earlier decoded (equal, frozen) spec reused.
Anything unusual goes through `statemachines.model.records.decode`, so results
and error messages are the same.
"""

from __future__ import annotations

from typing import Union

import msgspec
from msgspec import Raw, Struct

from statemachines.model.objects import (
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
from statemachines.model.records import NAMESPACED, WATCH_TYPES, Decoded, Observed, checked_times, decode
from statemachines.model.timestamps import INVALID, object_time_if_valid

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


class _JobTail(Struct, frozen=True, rename="camel", gc=False):
    """`_JobSpecRaw` without the union's tag: for an object whose `kind` comes last.

    A tagged union looks for the tag before it decodes the object; when the tag
    is the last key (how vcjobs are often printed), that is a second pass over
    the whole object. Decoded as one known type, the tag is an ordinary field,
    checked afterwards."""

    api_version: str = ""
    kind: str = ""
    metadata: Meta = Meta()
    spec: Raw = Raw(b"")
    status: JobStatusView | None = None


class _JobTailEnvelope(Struct):
    type: str
    object: _JobTail
    time: str | None = None


_light = msgspec.json.Decoder(_LightEnvelope)
_job_spec = msgspec.json.Decoder(JobSpec)
# spec bytes -> (the same bytes, decoded spec); bounded, so memory does not grow with the log
_specs: dict[bytes, tuple[bytes, JobSpec]] = {}
_SPECS_MAX = 256
# job uid -> its last (spec bytes, spec): a job's next record is compared with it (no hashing of the
# bytes); dropped when the job is deleted, and bounded
_last_spec: dict[str, tuple[bytes, JobSpec]] = {}
_LAST_MAX = 1024
_job_tail = msgspec.json.Decoder(_JobTailEnvelope)
_HEAD_PEEK = 128  # `{"type":"MODIFIED","object":{"apiVersion":"scheduling.volcano.sh/v1beta1","kind":`


def decode_replay(data: bytes) -> Decoded:
    """`decode`, for a fold of many records: equal results, for less work.

    - A vcjob's records (its status writes, mostly) repeat the same spec bytes; the
      spec is compared as bytes and the earlier decoded (equal, frozen) spec reused.
    - A record whose object does not start with its `kind` (a peek at its first
      bytes) is decoded as a vcjob straight away, its kind checked after (`_JobTail`).

    Anything unusual (an error, a spec that does not decode, another kind at the
    end) takes the general path, and errors `decode`'s, so messages are the same.
    """
    if data.find(b'"kind":', 0, _HEAD_PEEK) < 0:  # the tag comes late: a vcjob, most likely
        try:
            tail = _job_tail.decode(data)
        except (msgspec.DecodeError, RecursionError):
            return decode(data)
        obj = tail.object
        if obj.kind == "Job":
            return _job_record(tail.type, obj, tail.time, data)
    try:
        env = _light.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return decode(data)
    obj = env.object
    if obj.__class__ is not _JobSpecRaw:
        return decode(data) if env.type not in WATCH_TYPES else _checked_env(env.type, obj, env.time, data)
    return _job_record(env.type, obj, env.time, data)


def _job_record(rtype: str, obj: _JobSpecRaw | _JobTail, when: str | None, data: bytes) -> Decoded:
    """The vcjob of a record, its spec decoded once per distinct spec."""
    key = bytes(obj.spec)
    if not key or rtype not in WATCH_TYPES:
        return decode(data)
    uid = obj.metadata.uid
    known = _last_spec.get(uid)
    if known is None or known[0] != key:
        known = _specs.get(key)
        if known is None:
            try:
                known = (key, _job_spec.decode(key))
            except (msgspec.DecodeError, RecursionError):
                return decode(data)
            if len(_specs) >= _SPECS_MAX:
                _specs.clear()
            _specs[key] = known
        if len(_last_spec) >= _LAST_MAX:
            _last_spec.clear()
        _last_spec[uid] = known
    if rtype == "DELETED":
        _last_spec.pop(uid, None)
    job = Job(obj.api_version, obj.metadata, known[1], obj.status)
    return _checked_env(rtype, job, when, data)


def _checked_env(rtype: str, obj: KnownObject, when: str | None, data: bytes) -> Decoded:
    """`_decode`'s checks for a watch event of a known kind; anything else goes through `decode`."""
    cls = obj.__class__
    meta = obj.metadata
    api_version = obj.api_version
    if (api_version and api_version != _API_OF[cls]) or not meta.name or (cls in _NAMESPACED and not meta.namespace):
        return decode(data)
    at = object_time_if_valid(when, obj)  # every timestamp checked, and the object's time
    if at is INVALID:
        return checked_times(Observed(rtype, obj, when))
    return Observed(rtype, obj, when, (), at)


_API_OF = {cls: API_VERSIONS[cls.__name__] for cls in (Job, Pod, PodGroup, Queue, Command)}
_NAMESPACED = frozenset(cls for cls in _API_OF if cls.__name__ in NAMESPACED)
