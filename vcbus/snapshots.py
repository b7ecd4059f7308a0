"""Reading a cluster snapshot for the offline scheduler commands (`vcbus schedule`, `vcbus why-pending --from`).

A snapshot comes in one of three forms, told apart by their first bytes:

- a watch log, as `vcbus replay` reads it (kubectl's `--watch --output-watch-events -o json`,
  pretty-printed or one record per line, or a `vcbus log export`): every record is folded in
  order, so the snapshot is the last state of each object;
- a JSON document: one object, a `v1 List` (`kubectl get ... -o json`) or an array of objects;
- YAML: one or more documents, each an object or a `List`.

Manifest objects are folded as `ADDED` in file order (a later object with the same kind and
name replaces the earlier one). The kinds the scheduler reads (Node, Queue, PodGroup, Pod,
PriorityClass, Namespace, PersistentVolumeClaim, PersistentVolume, StorageClass, Service,
ReplicationController, ReplicaSet, StatefulSet) and vcjobs (so a
job can be named by its vcjob) are kept as plain dicts in
`Snapshot.objects`, so the offline cluster can show the scheduler's decisions between
sessions; other kinds are counted and ignored.

Unusable input raises `SnapshotError` (a `UserError`, exit code 2) whose one-line message
names the file, the place (line, document or record) and the object. YAML is read through
`vcbus.guarded_yaml` (no alias bombs, no nesting deeper than `MAX_DEPTH`); JSON nested
deeper than `MAX_DEPTH` is refused too.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import msgspec

from statemachines.model.records import RecordError
from vcbus.errors import UserError
from vcbus.guarded_yaml import MAX_DEPTH, yaml_documents
from vcbus.watchlog import read_records


SCHEDULER_KINDS = frozenset({"Node", "Queue", "PodGroup", "Pod", "PriorityClass", "Namespace", "PersistentVolumeClaim",
                             "PersistentVolume", "StorageClass", "CSINode", "VolumeAttachment", "Service",
                             "ReplicationController", "ReplicaSet", "StatefulSet"})
KEPT_KINDS = SCHEDULER_KINDS | {"Job"}
CLUSTER_SCOPED = frozenset({"Node", "Queue", "PriorityClass", "Namespace", "PersistentVolume", "StorageClass",
                            "CSINode", "VolumeAttachment"})
VCJOB_API = "batch.volcano.sh/v1alpha1"


class SnapshotError(UserError):
    """A snapshot input that cannot be used; the message names the file, the place and the object."""


Key = tuple[str, str, str]  # kind, namespace ("" for cluster-scoped kinds), name


@dataclass
class Snapshot:
    """The objects of a snapshot input (last state of each), and how it was read."""

    source: str
    form: str  # "watch log", "JSON", "YAML"
    objects: dict[Key, dict[str, Any]] = field(default_factory=dict)
    ignored: dict[str, int] = field(default_factory=dict)  # other kinds -> count
    records: int = 0  # records (watch log) or objects (manifests) read

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [obj for (k, _, _), obj in self.objects.items() if k == kind]


class Sink:
    """Where the objects go: the scheduler cache (`apply`, `apply_object` as in the contract)."""

    def __init__(self, apply: Callable[[int, bytes], None], apply_object: Callable[[str, dict], None]) -> None:
        self.apply = apply
        self.apply_object = apply_object


# ------------------------------------------------------------------ entry points


def open_snapshot(path: str) -> tuple[bytes, str]:
    """The bytes of INPUT (`-` is standard input) and the name to use in messages."""
    if path == "-":
        return sys.stdin.buffer.read(), "<stdin>"
    try:
        with open(path, "rb") as fh:
            return fh.read(), path
    except FileNotFoundError:
        raise SnapshotError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise SnapshotError(f"{path}: is a directory, expected a snapshot file") from None
    except PermissionError:
        raise SnapshotError(f"{path}: permission denied") from None
    except OSError as err:
        raise SnapshotError(f"{path}: cannot read: {err.strerror}") from None


def load_snapshot(data: bytes, source: str, sink: Sink) -> Snapshot:
    """Fold every object of `data` into `sink` and return the snapshot's objects."""
    text_start = data.lstrip()[:1]
    if text_start == b"{" and _is_watch_log(data):
        return load_watch_log(iter(data.splitlines(keepends=True)), source, sink)
    if text_start in (b"{", b"["):
        snap = Snapshot(source, "JSON")
        _fold_manifests(snap, _json_documents(data, source), sink)
        return snap
    snap = Snapshot(source, "YAML")
    _fold_manifests(snap, _yaml_documents(data, source), sink)
    return snap


def load_watch_log(lines: Iterable[bytes], source: str, sink: Sink) -> Snapshot:
    """Fold a watch log (records as `vcbus replay` reads them) into `sink`."""
    snap = Snapshot(source, "watch log")
    decoder = msgspec.json.Decoder()
    for rec in read_records(lines):
        snap.records += 1
        where = f"{source}:{rec.line}: record {rec.seq}"
        try:
            value = decoder.decode(rec.data)
        except msgspec.DecodeError as err:
            raise SnapshotError(f"{where}: invalid JSON: {err}") from None
        except RecursionError:
            raise SnapshotError(f"{where}: nesting deeper than {MAX_DEPTH} levels") from None
        obj = value.get("object") if isinstance(value, dict) else None
        label = _label(obj) if isinstance(obj, dict) else "record"
        if isinstance(obj, dict) and _depth(obj) > MAX_DEPTH:
            raise SnapshotError(f"{where} ({label}): nesting deeper than {MAX_DEPTH} levels")
        watched = isinstance(value, dict) and value.get("type") in ("ADDED", "MODIFIED", "DELETED")
        if watched and isinstance(obj, dict):
            _check_identity(where, obj, watch=True)
        try:
            sink.apply(rec.seq, rec.data)
        except RecordError as err:
            raise SnapshotError(f"{where} ({label}): {err}") from None
        except RecursionError:
            raise SnapshotError(f"{where} ({label}): nesting deeper than {MAX_DEPTH} levels") from None
        if watched and isinstance(obj, dict):
            _keep(snap, obj, deleted=value["type"] == "DELETED")
    return snap


# ------------------------------------------------------------------ manifests


@dataclass
class _Doc:
    where: str  # "file:line: document 2" or "file: items[3]"
    obj: Any


def _fold_manifests(snap: Snapshot, docs: Iterable[_Doc], sink: Sink) -> None:
    for doc in docs:
        obj = doc.obj
        if not isinstance(obj, dict):
            raise SnapshotError(f"{doc.where}: expected an object (a mapping), got {_type_name(obj)}")
        kind = _check_identity(doc.where, obj, watch=False)
        snap.records += 1
        if kind not in KEPT_KINDS or (kind == "Job" and obj.get("apiVersion", VCJOB_API) != VCJOB_API):
            snap.ignored[kind] = snap.ignored.get(kind, 0) + 1
            continue
        if kind != "Job":
            try:
                sink.apply_object("ADDED", obj)
            except RecordError as err:
                raise SnapshotError(f"{doc.where} ({_label(obj)}): {err}") from None
            except RecursionError:
                raise SnapshotError(f"{doc.where} ({_label(obj)}): nesting deeper than {MAX_DEPTH} levels") from None
        _keep(snap, obj, deleted=False)


def _expand(where: str, obj: Any, out: list[_Doc], depth: int = 0) -> None:
    """`List` objects (any kind ending in List with items) become their items."""
    if isinstance(obj, dict) and str(obj.get("kind", "")).endswith("List") and isinstance(obj.get("items"), list):
        if depth > 4:
            raise SnapshotError(f"{where}: Lists nested more than 4 deep")
        for i, item in enumerate(obj["items"]):
            _expand(f"{where}: items[{i}]", item, out, depth + 1)
        return
    if obj is not None:
        out.append(_Doc(where, obj))


def _json_documents(data: bytes, source: str) -> list[_Doc]:
    try:
        value = msgspec.json.decode(data)
    except msgspec.DecodeError as err:
        raise SnapshotError(f"{source}: invalid JSON: {err}") from None
    except RecursionError:
        raise SnapshotError(f"{source}: nesting deeper than {MAX_DEPTH} levels") from None
    if _depth(value) > MAX_DEPTH + 2:
        raise SnapshotError(f"{source}: nesting deeper than {MAX_DEPTH} levels")
    out: list[_Doc] = []
    if isinstance(value, list):
        for i, item in enumerate(value):
            _expand(f"{source}: [{i}]", item, out)
    else:
        _expand(source, value, out)
    return out


def _yaml_documents(data: bytes, source: str) -> list[_Doc]:
    out: list[_Doc] = []
    for where, value in yaml_documents(data, source):
        _expand(where, value, out)
    return out


# ------------------------------------------------------------------ helpers


def _is_watch_log(data: bytes) -> bool:
    """Whether the first record looks like `{"type": ..., "object": ...}` (or a TIMER/BOOKMARK)."""
    first = next(read_records(iter(data.splitlines(keepends=True))), None)
    if first is None:
        return False
    try:
        value = msgspec.json.decode(first.data)
    except (msgspec.DecodeError, RecursionError):
        return False  # a document over many lines that is no record: the JSON path reports it
    return isinstance(value, dict) and "type" in value and ("object" in value or "timer" in value)


def _check_identity(where: str, obj: dict[str, Any], *, watch: bool) -> str:
    kind = obj.get("kind")
    meta = obj.get("metadata")
    if not kind or not isinstance(kind, str):
        name = meta.get("name") if isinstance(meta, dict) else None
        named = f" (name {name!r})" if isinstance(name, str) and name else ""
        raise SnapshotError(f"{where}: object without kind{named}")
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
        if watch and kind not in KEPT_KINDS:
            return kind
        raise SnapshotError(f"{where}: {kind} without metadata.name")
    return kind


def object_key(obj: dict[str, Any]) -> Key:
    kind = obj["kind"]
    meta = obj["metadata"]
    ns = "" if kind in CLUSTER_SCOPED else (meta.get("namespace") or "default")
    return kind, ns, meta["name"]


def _keep(snap: Snapshot, obj: dict[str, Any], *, deleted: bool) -> None:
    kind = obj.get("kind")
    if kind not in KEPT_KINDS:
        if isinstance(kind, str):
            snap.ignored[kind] = snap.ignored.get(kind, 0) + 1
        return
    if kind == "Job" and obj.get("apiVersion", VCJOB_API) != VCJOB_API:
        return
    if not isinstance(obj.get("metadata"), dict) or not obj["metadata"].get("name"):
        return
    key = object_key(obj)
    if deleted:
        snap.objects.pop(key, None)
    else:
        snap.objects[key] = obj


def _label(obj: Any) -> str:
    if not isinstance(obj, dict):
        return "record"
    kind = obj.get("kind") or "object"
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    name = meta.get("name") or "<no name>"
    ns = meta.get("namespace")
    return f"{kind} {ns}/{name}" if ns and kind not in CLUSTER_SCOPED else f"{kind} {name}"


def _depth(value: Any) -> int:
    """Nesting depth of a decoded JSON value (iterative, so deep input cannot overflow the stack)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if d > deepest:
            deepest = d
            if deepest > MAX_DEPTH + 2:
                return deepest
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values() if isinstance(x, (dict, list)))
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v if isinstance(x, (dict, list)))
    return deepest


def _type_name(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "null" if value is None else type(value).__name__


__all__ = [
    "MAX_DEPTH",
    "Snapshot",
    "SnapshotError",
    "Sink",
    "load_snapshot",
    "load_watch_log",
    "open_snapshot",
]

