"""Every form kubectl prints, turned into watch records `{"type", "object"}`.

`vcbus replay` reads watch events; kubectl prints objects in more shapes than
that, and users save whatever they ran. Told apart by the first line of an input
(`sniff`):

- JSON (`{`): watch events, pretty or one per line (the fast path, in
  `vcbus.watchlog`); a record that is no watch event is `rescue`d here: a
  `v1 List` (`kubectl get a,b -o json`, or `<Kind>List` from the raw API) gives
  its items, a plain object (`kubectl get -w -o json` without
  `--output-watch-events`) gives itself, a one-line array its elements;
- a JSON array (`[`, e.g. `jq -s`): each element as above;
- YAML (`---`, `key:`): `kubectl -o yaml` watches (`{object, type}` documents
  separated by `---`), objects and Lists.

An object without an event type is a **snapshot**: its first appearance is
ADDED, a later one (same uid) MODIFIED; a deletion cannot be seen. The first
snapshot of an input is announced with a warning saying so. Anything else is
refused with a message naming a command that records a usable log.

Each produced record is an `Entry`: the JSON bytes of a watch record, or an
error message; `cut` marks an error that a record cut short would give (JSON
that ends early, a YAML document without its trailing `type`), which only
matters when it is the last record of the input.
"""

from __future__ import annotations

import re
from typing import Callable, Iterable, Iterator, NamedTuple

import msgspec

from vcbus.compressed import compressed_message

RECORD_HINT = (
    "record one with `vcbus record -A -o watch.log` (every kind, merged), or with "
    "`kubectl get <kind> -A --watch --output-watch-events -o json > <kind>.log` per kind "
    "and give all the files to `vcbus replay`"
)

_YAML_KEY = re.compile(rb'^(?:"[^"]*"|[A-Za-z_][\w.-]*)\s*:(?:\s|$)')
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f]")  # in no text kubectl writes (tab, CR, ESC are)
_KUBECTL_ERROR = re.compile(rb"^(?:error: |Error from server|Error: |W\d{4} |E\d{4} )")
_generic = msgspec.json.Decoder()
_encode = msgspec.json.Encoder().encode


class Entry(NamedTuple):
    data: bytes
    prefix: str  # where inside the input value, e.g. "item 3 of the List: "
    error: str | None
    cut: bool = False


class Value(NamedTuple):
    """One parsed value of a YAML or JSON-array input, with its place."""

    line: int
    offset: int
    obj: object
    error: str | None = None
    last: bool = False


def sniff(first: bytes) -> str | None:
    """"json", "array", "yaml", or None (not a watch log) from an input's first non-blank line."""
    c = first[:1]
    if c == b"{":
        return "json"
    if c == b"[":
        return "array"
    if _KUBECTL_ERROR.match(first):
        return None
    if first.startswith((b"---", b"- ")) or _YAML_KEY.match(first):
        return "yaml"
    return None


def unusable_message(source: str, first: bytes, *, stdin: bool = True) -> str:
    """Why an input whose first line is `first` is no watch log, and what to give instead (`stdin`: the
    command reads standard input too)."""
    compressed = compressed_message(source, first, "a watch log", "vcbus replay", stdin=stdin)
    if compressed is not None:
        return compressed
    try:
        first.decode("utf-8")
        control = _CONTROL.search(first)
        why = f"a control character, byte 0x{control.group()[0]:02x}" if control else ""
    except UnicodeDecodeError as err:
        why = f"not UTF-8: {err.reason} at byte {err.start}"
    if why:
        return f"{source}: binary data ({why}), not a watch log: {RECORD_HINT}"
    text = first.decode(errors="replace")
    shown = text if len(text) <= 80 else text[:77] + "..."
    if _KUBECTL_ERROR.match(first):
        what = f"an error message of kubectl ({shown!r}), not a watch log"
        if "single resource type" in text:
            what += "; kubectl watches one resource type at a time"
        return f"{source}:1: {what}: {RECORD_HINT}"
    columns = first.split()
    if len(columns) >= 2 and all(c.isupper() or c in (b"READY", b"AGE") for c in columns[:2]):
        return f"{source}:1: this is kubectl's table output ({shown!r}), not a watch log: {RECORD_HINT}"
    return f"{source}:1: not a watch log (it starts with {shown!r}; expected JSON or YAML watch events): {RECORD_HINT}"


class Snapshots:
    """Event types for objects printed without one: ADDED the first time, MODIFIED after."""

    def __init__(self, source: str, warn: Callable[[str], None] | None) -> None:
        self.source = source
        self.warn = warn
        self.seen: set = set()
        self.announced = False

    def event_type(self, obj: dict) -> str:
        if not self.announced:
            self.announced = True
            if self.warn is not None:
                self.warn(
                    f"{self.source}: objects without a watch event type (kubectl without --output-watch-events, "
                    "or a List): read as snapshots, ADDED when first seen and MODIFIED after; deletions cannot "
                    f"be seen. For a full log, {RECORD_HINT}"
                )
        meta = obj.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        key = meta.get("uid") or (obj.get("kind"), meta.get("namespace"), meta.get("name"))
        if key in self.seen:
            return "MODIFIED"
        self.seen.add(key)
        return "ADDED"


def _is_envelope(value: dict) -> bool:
    return "type" in value or "object" in value


def _is_object(value: dict) -> bool:
    return isinstance(value.get("kind"), str) and isinstance(value.get("metadata"), dict)


def _is_list(value: dict) -> bool:
    kind = value.get("kind")
    return isinstance(kind, str) and kind.endswith("List") and isinstance(value.get("items"), list)


def _snapshot(obj: dict, snapshots: Snapshots, prefix: str) -> Entry:
    try:
        return Entry(_encode({"type": snapshots.event_type(obj), "object": obj}), prefix, None)
    except (TypeError, ValueError) as err:
        return Entry(b"", prefix, f"cannot be read as JSON: {err}")


def expand(value: object, snapshots: Snapshots, prefix: str = "") -> list[Entry] | None:
    """The records an alternative form holds, or None if `value` is none of them."""
    if isinstance(value, dict):
        if _is_envelope(value):
            return None
        if _is_list(value):
            item_kind = value["kind"][: -len("List")]
            out: list[Entry] = []
            for i, item in enumerate(value["items"], 1):
                where = f"{prefix}item {i} of the {value['kind']}: "
                if not isinstance(item, dict):
                    out.append(Entry(b"", where, "not an object"))
                    continue
                if item_kind and "kind" not in item:  # the raw API's PodList items carry no kind
                    item = {"apiVersion": value.get("apiVersion", ""), "kind": item_kind, **item}
                out.extend(expand(item, snapshots, where) or [Entry(b"", where, "not a Kubernetes object")])
            return out
        if _is_object(value):
            return [_snapshot(value, snapshots, prefix)]
        return None
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        out = []
        for i, element in enumerate(value, 1):
            out.extend(_element(element, snapshots, f"{prefix}element {i} of the array: "))
        return out
    return None


def _element(value: object, snapshots: Snapshots, prefix: str) -> list[Entry]:
    if isinstance(value, dict) and _is_envelope(value):
        try:
            return [Entry(_encode(value), prefix, None)]
        except (TypeError, ValueError) as err:
            return [Entry(b"", prefix, f"cannot be read as JSON: {err}")]
    found = expand(value, snapshots, prefix)
    if found is None:
        return [Entry(b"", prefix, "neither a watch event {type, object} nor a Kubernetes object with kind and metadata")]
    return found


def rescue(data: bytes, err: Exception, snapshots: Snapshots) -> list[Entry]:
    """A JSON record the fast path refused: the records it holds in another form, else its error."""
    message = str(err)
    try:
        value = _generic.decode(data)
    except msgspec.DecodeError:
        return [Entry(b"", "", message, "truncated" in message)]
    except RecursionError:  # nested too deeply: `message` (decode's RecordError) says so
        return [Entry(b"", "", message)]
    found = expand(value, snapshots)
    return found if found is not None else [Entry(b"", "", message)]


def records_of(value: Value, snapshots: Snapshots) -> list[Entry]:
    """The records of one YAML document or JSON-array element."""
    if value.error is not None:
        return [Entry(b"", "", value.error, value.last)]
    obj = value.obj
    if obj is None:
        return []
    if isinstance(obj, dict) and _is_envelope(obj):
        cut = value.last and "type" not in obj  # kubectl prints `object:` first, `type:` last
        try:
            return [Entry(_encode(obj), "", None, cut)]
        except (TypeError, ValueError) as err:
            return [Entry(b"", "", f"cannot be read as JSON: {err}")]
    return _element(obj, snapshots, "")


# ------------------------------------------------------------------ YAML


_loader: type | None = None


def _yaml_loader() -> type:
    """Safe YAML without timestamp resolution: times stay the RFC 3339 strings of the API.

    (yaml is imported on first use: a JSON log never needs it.)"""
    global _loader
    if _loader is None:
        import yaml

        base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        _loader = type("WatchLogLoader", (base,), {})
        _loader.yaml_implicit_resolvers = {
            k: [r for r in v if r[0] != "tag:yaml.org,2002:timestamp"]
            for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()
        }
    return _loader


def _is_separator(line: bytes) -> bool:
    s = line.rstrip()
    return s == b"---" or s.startswith(b"--- ") or s == b"..."


def yaml_values(lines: Iterable[bytes], source: str) -> Iterator[Value]:
    """The documents of a YAML input (separated by `---`), streaming, each with its first line."""
    doc: list[bytes] = []
    doc_line = doc_offset = 0
    line_no = offset = 0
    pending: Value | None = None
    for line in lines:
        line_no += 1
        start = offset
        offset += len(line)
        if _is_separator(line):
            if doc:
                if pending is not None:
                    yield pending
                pending = _parse(doc, doc_line, doc_offset)
                doc = []
            continue
        if not doc:
            if not line.strip():
                continue
            doc_line, doc_offset = line_no, start
        doc.append(line)
    if doc:
        if pending is not None:
            yield pending
        pending = _parse(doc, doc_line, doc_offset)
    if pending is not None:
        yield pending._replace(last=True)


def _parse(doc: list[bytes], line: int, offset: int) -> Value:
    import yaml

    text = b"".join(doc)
    try:
        return Value(line, offset, yaml.load(text, Loader=_yaml_loader()))  # a safe loader
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        where = f" (line {line + mark.line})" if mark is not None else ""
        return Value(line, offset, None, f"invalid YAML{where}: {err.problem or err}")
    except yaml.YAMLError as err:
        return Value(line, offset, None, f"invalid YAML: {err}")


# ------------------------------------------------------------------ JSON arrays


def array_values(lines: Iterable[bytes], source: str) -> Iterator[Value]:
    """The elements of a JSON array input (read whole), each with the line it starts on."""
    import json

    text = b"".join(lines).decode("utf-8", errors="replace")
    dec = json.JSONDecoder()
    closed = text.rstrip().endswith("]")
    pos = text.index("[") + 1
    line, byte, mark = 1, 0, 0

    def advance(to: int) -> None:
        nonlocal line, byte, mark
        chunk = text[mark:to]
        line += chunk.count("\n")
        byte += len(chunk.encode())
        mark = to

    n = len(text)
    count = 0
    while True:
        while pos < n and text[pos] in " \t\r\n":
            pos += 1
        if pos >= n:
            advance(pos)
            yield Value(line, byte, None, "the JSON array is not closed (the log was cut off)", last=True)
            return
        if text[pos] == "]":
            rest = text[pos + 1 :].strip()
            if rest:
                advance(pos + 1 + text[pos + 1 :].index(rest[0]))
                yield Value(line, byte, None, "more input after the end of the JSON array")
            return
        if count:
            if text[pos] != ",":
                advance(pos)
                yield Value(line, byte, None, f"invalid JSON array: expected ',' or ']', found {text[pos]!r}")
                return
            pos += 1
            while pos < n and text[pos] in " \t\r\n":
                pos += 1
        advance(pos)
        try:
            obj, end = dec.raw_decode(text, pos)
        except json.JSONDecodeError as err:
            yield Value(line, byte, None, f"invalid JSON: {err.msg}", last=not closed)
            return
        except RecursionError:  # where this element ends is not known: the rest of the array goes with it
            yield Value(line, byte, None, "nested too deeply to decode (JSON depth limit exceeded); the rest of "
                        "the JSON array is not read")
            return
        count += 1
        yield Value(line, byte, obj)
        pos = end
