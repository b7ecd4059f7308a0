"""Reading Kubernetes manifests from files: multi-document YAML, JSON, and `List` objects.

`load_documents(path)` returns one `Document` per object, each knowing its
file, its document number (1-based) and the line it starts on, so the CLI can
point at `file:line`. Unreadable input raises `ManifestError` (a `UserError`,
exit code 2) whose message names the file, the document and the line, e.g.
`bad.yaml:7:3: document 2: mapping values are not allowed here`.
`-` reads standard input.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from vcbus.errors import UserError
from vcbus.guarded_yaml import yaml_values


class ManifestError(UserError):
    """A manifest file that cannot be read or parsed."""


@dataclass(frozen=True)
class Document:
    """One object of a manifest file."""

    source: str  # the path as given ("-" for stdin)
    index: int  # document number in the file, 1-based
    line: int  # line where the object starts, 1-based
    obj: dict[str, Any]

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


def read_text(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ManifestError(f"{path}: is a directory") from None
    except UnicodeDecodeError as err:
        raise ManifestError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    except OSError as err:
        raise ManifestError(f"{path}: cannot read: {err.strerror}") from None


def _expand(source: str, index: int, line: int, obj: Any) -> list[Document]:
    if obj is None:
        return []
    if not isinstance(obj, dict):
        raise ManifestError(
            f"{source}:{line}: document {index}: expected an object (a mapping), got {type(obj).__name__}"
        )
    kind = str(obj.get("kind", ""))
    if kind.endswith("List") and isinstance(obj.get("items"), list):
        docs = []
        for item in obj["items"]:
            docs += _expand(source, index, line, item)
        return docs
    return [Document(source, index, line, obj)]


def _load_json(source: str, text: str) -> list[Document]:
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as err:
        raise ManifestError(f"{source}:{err.lineno}:{err.colno}: invalid JSON: {err.msg}") from None
    if isinstance(obj, list):
        return [doc for item in obj for doc in _expand(source, 1, 1, item)]
    return _expand(source, 1, 1, obj)


def _load_yaml(source: str, text: str) -> list[Document]:
    docs: list[Document] = []
    for line, index, obj in yaml_values(text, source):  # guarded: no alias bombs, bounded depth
        docs += _expand(source, index, line, obj)
    return docs


def load_documents(path: str) -> list[Document]:
    """Every object in `path` (YAML or JSON; `List` objects expanded).

    Raises:
        ManifestError: the file is missing, unreadable or not valid YAML/JSON,
            or a document is not a mapping.
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
