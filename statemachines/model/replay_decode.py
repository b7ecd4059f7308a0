"""`decode_replay`: `decode` for a fold of many records (replay), equal results for less work.

A vcjob's records (its status writes, mostly) repeat its spec byte for byte, and
the spec is most of the record (4.4 of 5.1 KB in the replay benchmark's log). A
JSON decoder must scan every byte of it, even to skip it. So the spec is cut out
before decoding (`_cut_spec`): its bytes are compared (memcmp) with the spec the
job's last record had, the rest of the record is decoded with a placeholder in
its place, and the spec decoded before (equal, frozen) is reused. A pod's spec is
not worth it: the status and metadata are most of what a pod record costs, and a
pod has few records, two of them with a new spec (created, bound). Remembering a
pod's spec and status the same way was measured (issue 11): a record that repeats
both decodes ~1.5 us faster, but finding and checking the spans costs about as
much on every record that does not, and the replay benchmark's log got slower.

Anything unusual goes through `statemachines.model.records.decode`, so results
and error messages are the same.
"""

from __future__ import annotations

from typing import Literal, Union, final

import msgspec
from msgspec import UNSET, Raw, Struct, UnsetType

from statemachines.model.objects import (
    API_VERSIONS,
    Command,
    DaemonSet,
    Job,
    JobSpec,
    JobStatusView,
    KnownObject,
    Meta,
    Pod,
    PodGroup,
    Queue,
    ReplicaSet,
    StatefulSet,
)
from statemachines.model.records import NAMESPACED, Decoded, Observed, checked_times, decode
from statemachines.model.timestamps import INVALID, object_time_if_valid


@final  # no subclass: `type(obj) is _JobLight` tells mypy the object is none else
class _JobLight(Struct, frozen=True, tag_field="kind", tag="Job", gc=False):
    """A vcjob, not decoded: the cut did not take it, so it is decoded whole (`decode`)."""


_WatchType = Literal["ADDED", "MODIFIED", "DELETED"]  # decoded as these very strings (their hash kept);
# any other type fails here and is decoded whole (`decode`), as the fold's first check
# The envelopes are gc=False, as the objects are: one per record, a tree, dropped at once.


class _LightEnvelope(Struct, gc=False):
    type: _WatchType
    object: Union[_JobLight, Pod, PodGroup, Queue, Command, ReplicaSet, StatefulSet, DaemonSet]
    time: str | None = None


_light = msgspec.json.Decoder(_LightEnvelope)
_job_spec = msgspec.json.Decoder(JobSpec)
_HEAD_PEEK = 128  # `{"type":"MODIFIED","object":{"apiVersion":"scheduling.volcano.sh/v1beta1","kind":`


class _Placeholder(Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """What a cut-out spec is replaced with: `{"vcbus":"\\u0000"}`. Nothing else decodes into it,
    and a record cannot hold it without a backslash (JSON strings escape control characters)."""

    vcbus: Literal["\x00"]


_PLACEHOLDER_TEXT = b'{"vcbus":"\\u0000"}'
# any JSON text that decodes as the placeholder spells its NUL so (JSON has no other escape for
# it, and no raw control characters): a record without it outside the span holds no placeholder
_NUL = b"\\u0000"


class _JobCut(Struct, frozen=True, rename="camel", gc=False):
    """A vcjob record with its spec cut out: `Job`'s fields, the spec only the placeholder.

    Not a tagged Struct: alone, one takes an object without its tag, which `decode`'s union
    does not. `kind` is a field instead, required, and every `kind` key must say "Job" (a
    duplicate key is decoded too), as the union requires."""

    kind: Literal["Job"]
    api_version: str = ""
    metadata: Meta = Meta()
    spec: _Placeholder | UnsetType = UNSET  # UNSET: no spec (null is not accepted)
    status: JobStatusView | None = None


class _CutEnvelope(Struct, gc=False):
    type: _WatchType
    object: _JobCut
    time: str | None = None


class _JobRaw(Struct, frozen=True, tag_field="kind", tag="Job", gc=False):
    """A vcjob's spec as bytes, the rest skipped: how a spec not seen before is learnt."""

    spec: Raw = Raw(b"")


class _RawEnvelope(Struct, gc=False):
    object: _JobRaw


_cut = msgspec.json.Decoder(_CutEnvelope)
_spec_bytes = msgspec.json.Decoder(_RawEnvelope)
_SPEC = b'"spec":'
_NAME = b'"name":"'
# the bytes of a vcjob record's first "name" (its metadata.name, as Kubernetes writes objects) ->
# (`"spec":` and its spec's bytes, that spec decoded, where the key started in the last record): its
# next record is compared with it (memcmp; the key with the spec: one call, not two); dropped when
# the object is deleted, and bounded, so memory follows live objects
_known: dict[bytes, tuple[bytes, JobSpec, int]] = {}
_KNOWN_MAX = 4096
_KNOWN_BYTES = 64 << 20  # and at most this much spec text held, however large the specs
_held = [0]  # the spec text `_known` holds, in bytes


def forget_specs() -> None:
    """Drop every remembered spec (a new fold; tests)."""
    _known.clear()
    _held[0] = 0


def _cut_spec(data: bytes) -> Decoded | None:
    """The record decoded with its spec cut out, or None: not this simple shape (decode it whole).

    The spec is guessed by the object's name: the spec bytes its last record had, compared
    (memcmp) after a `"spec":` key, where it was in that record or else at the first such key.
    A first record learns them (`_spec_bytes`, then the spec decoded alone). The span is
    replaced with `_PLACEHOLDER_TEXT` and the rest decoded, exact because:
    - the span is a whole JSON value (bytes that decoded alone before), after a key, so
      replacing it keeps the record's shape;
    - the object's spec must decode as the placeholder, and every `spec` of the object must
      (a duplicate key is decoded too): any text that decodes as the placeholder spells its
      value `\\u0000` (JSON has no other way to write a NUL), so with none of that elsewhere
      in the record, however spaced or escaped, the span was the object's one spec;
    - the object must name its kind, as `decode` requires (`_JobCut.kind`);
    - equal bytes decode to equal values, so the spec decoded before is the one a whole
      decode would give.
    A wrong guess costs a decode, never a wrong result."""
    name = data.find(_NAME)
    hint = data[name + 8 : data.find(b'"', name + 8)] if name >= 0 else b""
    last = _known.get(hint)
    if last is None:
        return _learn(data, hint)
    key_text, spec, at = last
    if not data.startswith(key_text, at):
        at = data.find(_SPEC)
        if at < 0 or not data.startswith(key_text, at):
            return _learn(data, hint)
    return _spliced(data, hint, key_text, spec, at, last)


def _learn(data: bytes, hint: bytes) -> Decoded | None:
    """A spec not seen for this name: its bytes (a scan of the record), the spec decoded alone,
    then the record cut as usual."""
    try:
        holder = _spec_bytes.decode(data).object
    except (msgspec.DecodeError, RecursionError):
        return None
    spec_text = bytes(holder.spec)
    at = data.find(_SPEC)
    if at < 0 or not spec_text or not data.startswith(spec_text, at + 7):
        return None  # not the first "spec": anything unusual is decoded whole
    try:
        spec = _job_spec.decode(spec_text)
    except (msgspec.DecodeError, RecursionError):
        return None
    return _spliced(data, hint, _SPEC + spec_text, spec, at)


def _spliced(
    data: bytes, hint: bytes, key_text: bytes, spec: JobSpec, at: int, last: tuple | None = None
) -> Decoded | None:
    """The record with `key_text` (`"spec":` and the spec's text) at `at` decoded with the placeholder
    for the spec; None if it does not decode so (see `_cut_spec`)."""
    start = at + 7
    end = at + len(key_text)
    if (data.find(b"\\", 0, start) >= 0 or data.find(b"\\", end) >= 0) and (
        data.find(_NUL, 0, start) >= 0 or data.find(_NUL, end) >= 0
    ):
        return None
    try:
        env = _cut.decode(data[:start] + _PLACEHOLDER_TEXT + data[end:])
    except (msgspec.DecodeError, RecursionError):
        return None
    obj = env.object
    if obj.spec is UNSET:  # (`type` is one of the three watch types: `_WatchType`)
        return None
    rtype = env.type
    if last is None:  # learnt: whatever the name held before
        last = _known.get(hint)
    # the same spec text where it was: `_known` already holds what would be stored (most records)
    if last is None or last[0] is not key_text or last[2] != at or rtype == "DELETED":
        if last is not None:
            del _known[hint]
            _held[0] -= len(last[0])
        if rtype != "DELETED":
            if len(_known) >= _KNOWN_MAX or _held[0] + len(key_text) > _KNOWN_BYTES:
                forget_specs()
            _known[hint] = (key_text, spec, at)
            _held[0] += len(key_text)
    return _checked_env(rtype, Job(obj.api_version, obj.metadata, spec, obj.status), env.time, data)


def decode_replay(data: bytes) -> Decoded:
    """`decode`, for a fold of many records: equal results, for less work.

    - A vcjob's spec that its last record had is neither decoded nor scanned
      (`_cut_spec`); any other vcjob record is decoded whole.
    - Other kinds are decoded into the same types as `decode` does, and their
      timestamps checked in the same walk that finds the object's time
      (`_checked_env`).

    Anything unusual (an error, another kind, another API group) takes the general
    path, and errors `decode`'s, so messages are the same.
    """
    kind = data.find(b'"kind":', 0, _HEAD_PEEK)
    # a vcjob, most likely (its first letter only: a slice costs less than `startswith`'s argument
    # parsing; a wrong guess costs a decode, never a wrong result)
    if kind < 0 or data[kind + 8 : kind + 9] == b"J":
        cut = _cut_spec(data)
        if cut is not None:
            return cut
    try:
        env = _light.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return decode(data)
    obj = env.object
    if type(obj) is _JobLight:  # (`type` is one of the three watch types: `_WatchType`)
        return decode(data)
    return _checked_env(env.type, obj, env.time, data)


def _checked_env(rtype: str, obj: KnownObject, when: str | None, data: bytes) -> Decoded:
    """`_decode`'s checks for a watch event of a known kind; anything else goes through `decode`."""
    cls = obj.__class__
    meta = obj.metadata
    api_version = obj.api_version
    if (api_version and api_version != _API_OF[cls]) or not meta.name or (not meta.namespace and cls in _NAMESPACED):
        return decode(data)
    at = object_time_if_valid(when, obj)  # every timestamp checked, and the object's time
    if at is INVALID:
        return checked_times(Observed(rtype, obj, when))
    return Observed(rtype, obj, when, (), at)


_API_OF = {cls: API_VERSIONS[cls.__name__] for cls in (Job, Pod, PodGroup, Queue, Command, ReplicaSet, StatefulSet, DaemonSet)}
_NAMESPACED = frozenset(cls for cls in _API_OF if cls.__name__ in NAMESPACED)
