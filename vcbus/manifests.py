"""Reading Kubernetes manifests from files: multi-document YAML, JSON, and `List` objects.

`load_documents(path)` returns one `Document` per object, each knowing its
file, its document number (1-based) and the line it starts on, so the CLI can
point at `file:line`. Unreadable input raises `ManifestError` (a `UserError`,
exit code 2) whose message names the file, the document and the line, e.g.
`bad.yaml:7:3: document 2: mapping values are not allowed here`.
`-` reads standard input.

Input that is not a manifest at all is named for what it is: gzip (or other
compressed) data, binary data, a file larger than `MAX_FILE_BYTES`, JSON
nested deeper than `MAX_DEPTH`. Each `Document` of a YAML file also knows the
line of each of its keys (`lines`, by field path) and the keys it gives twice
(`duplicates`), so strict checks can point at the line; JSON documents know
their duplicated keys, not their lines.
"""

from __future__ import annotations

import json
import sys
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from vcbus.compressed import compressed_message
from vcbus.errors import UserError
from vcbus.guarded_yaml import MAX_DEPTH, MAX_DOCUMENT_BYTES, YamlObject, yaml_objects

MAX_FILE_BYTES = 64 * 1024 * 1024
"""Largest manifest file read (a List of thousands of jobs fits; a larger file is not a manifest)."""

_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


class ManifestError(UserError):
    """A manifest file that cannot be read or parsed."""


@dataclass(frozen=True)
class Document:
    """One object of a manifest file."""

    source: str  # the path as given ("-" for stdin)
    index: int  # document number in the file, 1-based
    line: int  # line where the object starts, 1-based
    obj: dict[str, Any]
    lines: dict[str, int] = field(default_factory=dict, compare=False, repr=False)  # field path -> line of its key
    duplicates: tuple[tuple[str, int], ...] = ()  # (field path, line) of keys given twice

    def line_of(self, path: str) -> int:
        """The line of the key at field path `path` (the object's line when not known, e.g. in JSON)."""
        return self.lines.get(path, self.line)

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind", ""))

    @property
    def name(self) -> str:
        meta = self.obj.get("metadata")
        if not isinstance(meta, dict):
            return ""
        namespace = meta.get("namespace")
        return f"{namespace}/{meta.get('name', '')}" if namespace else str(meta.get("name", ""))

    @property
    def label(self) -> str:
        return f"{self.kind or '<no kind>'} {self.name or '<no name>'}"


def read_bytes(path: str) -> bytes:
    """The file's bytes (at most MAX_FILE_BYTES; `-` is standard input)."""
    try:
        if path == "-":
            data = sys.stdin.buffer.read(MAX_FILE_BYTES + 1)
        else:
            with Path(path).open("rb") as handle:
                data = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ManifestError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ManifestError(f"{path}: is a directory") from None
    except OSError as err:
        raise ManifestError(f"{path}: cannot read: {err.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ManifestError(
            f"{path}: more than {MAX_FILE_BYTES >> 20} MiB, larger than any manifest the API server would take"
            " (a request is at most 3 MiB): give the objects to check, not a dump"
        )
    return data


def read_text(path: str) -> str:
    """The file as text; compressed or binary data is refused with what it is and what to give instead."""
    data = read_bytes(path)
    compressed = compressed_message(path, data, "a YAML or JSON manifest", "vcbus validate")
    if compressed is not None:
        raise ManifestError(compressed)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ManifestError(
            f"{path}: binary data or another encoding (not UTF-8: {err.reason} at byte {err.start}),"
            " not a YAML or JSON manifest (kubectl reads UTF-8)"
        ) from None


def _expand(source: str, index: int, line: int, obj: Any, lines: dict[str, int] | None = None,
            duplicates: tuple[tuple[str, int], ...] = ()) -> list[Document]:
    if obj is None:
        return []
    if not isinstance(obj, dict):
        raise ManifestError(
            f"{source}:{line}: document {index}: expected an object (a mapping), got {type(obj).__name__}"
        )
    kind = str(obj.get("kind", ""))
    lines = lines or {}
    if kind.endswith("List") and isinstance(obj.get("items"), list):
        item_lines, item_dups = _per_item(lines), _per_item(dict(duplicates))
        docs = []
        for i, item in enumerate(obj["items"]):
            dups = tuple(item_dups.get(i, {}).items())
            docs += _expand(source, index, lines.get(f"items[{i}]", line), item, item_lines.get(i, {}), dups)
        return docs
    return [Document(source, index, line, obj, lines, duplicates)]


def _per_item(paths: dict[str, int]) -> dict[int, dict[str, int]]:
    """`items[3].spec.x` -> {3: {"spec.x": ...}}: a List's paths, re-rooted at each item (one pass)."""
    out: dict[int, dict[str, int]] = {}
    for path, line in paths.items():
        head, dot, rest = path.partition("].")
        if dot and head.startswith("items[") and head[6:].isdigit():
            out.setdefault(int(head[6:]), {})[rest] = line
    return out


def _json_too_deep(source: str, text: str) -> ManifestError:
    """The error for JSON nested deeper than MAX_DEPTH, with the line where it gets too deep."""
    depth = 0
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                line = text.count("\n", 0, match.start()) + 1
                return ManifestError(f"{source}:{line}: nesting deeper than {MAX_DEPTH} levels")
        elif token in "]}":
            depth -= 1
    return ManifestError(f"{source}: nesting deeper than {MAX_DEPTH} levels")


def _depth(obj: Any) -> int:
    """How deep `obj` nests (iterative: a deep value cannot exhaust the stack)."""
    deepest = 0
    stack = [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        deepest = max(deepest, depth)
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
    return deepest


def _load_json(source: str, text: str) -> list[Document]:
    try:
        obj = json.loads(text)  # the C parser first: fast, and it shows the depth and the size
    except json.JSONDecodeError as err:
        raise ManifestError(f"{source}:{err.lineno}:{err.colno}: invalid JSON: {err.msg}") from None
    except RecursionError:
        raise _json_too_deep(source, text) from None
    listed = isinstance(obj, list) or (isinstance(obj, dict) and str(obj.get("kind", "")).endswith("List"))
    if not listed and len(text) > MAX_DOCUMENT_BYTES:
        raise ManifestError(
            f"{source}:1: {len(text.encode()) / (1 << 20):.1f} MiB of JSON, more than the API server accepts in one"
            f" request ({MAX_DOCUMENT_BYTES >> 20} MiB; etcd stores at most 1.5 MiB per object)"
        )
    if _depth(obj) > MAX_DEPTH + 2:
        raise _json_too_deep(source, text)
    duplicated: dict[int, list[str]] = {}

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for key, value in items:
            if key in found:
                duplicated.setdefault(id(found), []).append(key)
            found[key] = value
        return found

    obj = json.loads(text, object_pairs_hook=pairs)  # again, to see the keys given twice
    if duplicated and isinstance(obj, dict):
        placed = _json_key_lines(source, text)
        if placed is not None:  # the keys' lines, and the duplicates in document order
            return _expand(source, 1, 1, obj, placed.lines, placed.duplicates)
    items = obj if isinstance(obj, list) else [obj]
    docs: list[Document] = []
    for item in items:
        dups = _duplicate_paths(item, duplicated) if duplicated else ()
        docs += _expand(source, 1, 1, item, None, tuple((p, 1) for p in dups))
    return docs


def _json_key_lines(source: str, text: str) -> YamlObject | None:
    """JSON read as YAML (a superset, nearly) for the lines of its keys; None when PyYAML reads it otherwise."""
    try:
        docs = yaml_objects(text, source)
    except UserError:
        return None
    return docs[0] if len(docs) == 1 else None


def _duplicate_paths(root: Any, duplicated: dict[int, list[str]]) -> list[str]:
    """Field paths of the keys `json.loads` saw twice (by the id of the object that holds them)."""
    out: list[str] = []
    stack: list[tuple[str, Any]] = [("", root)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            out += [f"{path}.{key}" if path else key for key in duplicated.get(id(value), ())]
            stack.extend((f"{path}.{k}" if path else k, v) for k, v in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((f"{path}[{i}]", v) for i, v in reversed(list(enumerate(value))))
    return out


def _load_yaml(source: str, text: str) -> list[Document]:
    docs: list[Document] = []
    for doc in yaml_objects(text, source):  # guarded: no alias bombs, bounded depth and size
        docs += _expand(source, doc.index, doc.line, doc.value, doc.lines, doc.duplicates)
    return docs


def load_documents(path: str) -> list[Document]:
    """Every object in `path` (YAML or JSON; `List` objects expanded).

    Raises:
        ManifestError: the file is missing, unreadable, compressed or binary, too large,
            not valid YAML/JSON, nested too deeply, or a document is not a mapping.
    """
    text = read_text(path)
    if text.lstrip().startswith(("{", "[")):
        return _load_json(path, text)
    return _load_yaml(path, text)


def load_all(paths: list[str]) -> list[Document]:
    docs: list[Document] = []
    for path in paths:
        docs += load_documents(path)
    return docs


def dump_yaml(objects: list[dict[str, Any]]) -> str:
    """Multi-document YAML, keys in the objects' own order."""
    return "".join(
        "---\n" + yaml.safe_dump(obj, sort_keys=False, default_flow_style=False, allow_unicode=True, width=1000)
        for obj in objects
    )


def dump_json(obj: Any) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"
