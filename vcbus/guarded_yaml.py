"""YAML read with guards: no alias bombs, no nesting deep enough to exhaust the stack.

PyYAML's SafeLoader builds aliases as shared references, so a "billion laughs" document
costs little to load but explodes as soon as anything walks it (folding, JSON encoding);
and its composer recurses once per nesting level, so `[[[[...` ten thousand deep ends in
a RecursionError. `yaml_documents` composes each document with a depth limit, measures
the node graph it would expand to (iteratively, memoised per shared node) and refuses
documents whose aliases add more than `MAX_ALIAS_EXPANSION` nodes, refer to a node that
contains them, or nest deeper than `MAX_DEPTH` through aliases. A document whose text is
larger than `MAX_DOCUMENT_BYTES` is refused before it is parsed (PyYAML reads about a megabyte
a second). Errors are `YamlInputError` (a `UserError`, exit code 2) naming the file, the line
and the document.

`yaml_objects` also returns, per document, the line of every mapping key (by field path,
`spec.tasks[0].name`) and the keys a mapping holds twice, for kubectl-strict checks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from vcbus.errors import UserError

MAX_DEPTH = 100
"""Deepest nesting accepted. A Kubernetes object is rarely deeper than 20 (managedFields)."""

MAX_ALIAS_EXPANSION = 1_000_000
"""Nodes YAML aliases may add to a document once expanded (a billion-laughs document adds 10^9)."""

MAX_DOCUMENT_BYTES = 3 * 1024 * 1024
"""Largest YAML document read: kube-apiserver refuses request bodies over 3 MiB (`Request entity too
large: limit is 3145728`), and etcd stores objects of at most 1.5 MiB."""

_MARKER = re.compile(r"\n(?:---|\.\.\.)(?=[ \t\r\n]|$)")  # a document marker, after the newline before it


class YamlInputError(UserError):
    """YAML that cannot be read, or that the guards refuse."""


class _GuardedLoader(yaml.SafeLoader):
    """SafeLoader that refuses nesting deeper than MAX_DEPTH while composing.

    Like Kubernetes' YAML (sigs.k8s.io/yaml), an unquoted date such as `name: 2026-11-30` stays a
    string: SafeLoader's timestamp resolver would make it a `datetime.date`, which no object field
    accepts and JSON cannot encode.
    """

    yaml_implicit_resolvers = {
        first: [r for r in resolvers if r[0] != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:  # PyYAML's signature
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH + 2:
                mark = self.peek_event().start_mark
                raise _TooDeep(mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _TooDeep(Exception):
    def __init__(self, mark: Any) -> None:
        super().__init__("too deep")
        self.mark = mark


@dataclass(frozen=True)
class YamlObject:
    """One YAML document: its first line, its number in the stream, its value, and where its keys are."""

    line: int
    index: int
    value: Any
    lines: dict[str, int] = field(default_factory=dict)  # field path -> line of its key
    duplicates: tuple[tuple[str, int], ...] = ()  # (field path, line) of each key given twice in one mapping


def yaml_documents(data: bytes, source: str) -> list[tuple[str, Any]]:
    """(place, value) of each YAML document, with the depth and alias guards."""
    return [(f"{source}:{line}: document {index}", value) for line, index, value in yaml_values(data, source)]


def yaml_values(data: bytes | str, source: str) -> list[tuple[int, int, Any]]:
    """(first line, document number, value) of each non-empty YAML document, guarded."""
    if not isinstance(data, str):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise YamlInputError(f"{source}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    return [(o.line, o.index, o.value) for o in _values(data, source, keys=False)]


def yaml_objects(text: str, source: str) -> list[YamlObject]:
    """Each non-empty YAML document of a manifest, guarded, with the lines of its keys and its duplicated keys.

    A document over MAX_DOCUMENT_BYTES is refused before it is parsed, unless it is a `List`
    (`kind: ...List` and `items:` at the start of a line), whose items are objects of their own.
    """
    return _values(text, source, keys=True)


def _check_document_sizes(text: str, source: str) -> None:
    """Refuse a document larger than MAX_DOCUMENT_BYTES before parsing it (document markers start a line)."""
    if len(text) <= MAX_DOCUMENT_BYTES:
        return
    starts = [0] + [m.start() + 1 for m in _MARKER.finditer(text)] + [len(text)]
    number = 0
    for begin, end in zip(starts, starts[1:]):
        if begin == 0 and end < len(text) and not _content(text, 0, end):
            continue  # nothing but comments before the first `---`: not a document
        number += 1
        if end - begin <= MAX_DOCUMENT_BYTES // 4:
            continue  # no UTF-8 character takes more than 4 bytes
        if _is_list(text, begin, end):
            continue
        size = len(text[begin:end].encode("utf-8", "surrogatepass"))
        if size > MAX_DOCUMENT_BYTES:
            line = text.count("\n", 0, begin) + 1
            raise YamlInputError(
                f"{source}:{line}: document {number}: {size / (1 << 20):.1f} MiB of YAML, more than the API server"
                f" accepts in one request ({MAX_DOCUMENT_BYTES // (1 << 20)} MiB; etcd stores at most 1.5 MiB per object)"
            )


_LIST_KIND = re.compile(r"\nkind: *[\"']?[A-Za-z0-9]*List[\"']? *\r?\n")
_ITEMS = re.compile(r"\nitems: *(?:\r?\n|\[)")


def _is_list(text: str, begin: int, end: int) -> bool:
    """Whether the document text[begin:end] is a block-style `List` (its kind and its items at column 0)."""
    segment = "\n" + text[begin:end]
    return bool(_LIST_KIND.search(segment)) and bool(_ITEMS.search(segment))


def _content(text: str, begin: int, end: int) -> bool:
    return any(line.strip() and not line.lstrip().startswith("#") for line in text[begin:end].splitlines())


def _values(text: str, source: str, *, keys: bool) -> list[YamlObject]:
    if keys:  # a manifest: one object per document, as kubectl sends it
        _check_document_sizes(text, source)
    out: list[YamlObject] = []
    index = 0
    try:
        loader = _GuardedLoader(text)
    except yaml.reader.ReaderError as err:
        raise _reader_error(err, text, source) from None
    try:
        while loader.check_node():
            index += 1
            node = loader.get_node()
            if node is None:
                continue
            where = f"{source}:{node.start_mark.line + 1}: document {index}"
            _check_aliases(node, where)
            lines, duplicates = _key_lines(node) if keys else ({}, ())
            out.append(YamlObject(node.start_mark.line + 1, index, loader.construct_document(node), lines, duplicates))
    except _TooDeep as err:
        raise YamlInputError(
            f"{source}:{err.mark.line + 1}: document {max(index, 1)}: nesting deeper than {MAX_DEPTH} levels"
        ) from None
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        problem = err.problem or err.context or "invalid YAML"
        raise YamlInputError(f"{where}: document {max(index, 1)}: {problem}") from None
    except yaml.reader.ReaderError as err:
        raise _reader_error(err, text, source, max(index, 1)) from None
    except yaml.YAMLError as err:
        raise YamlInputError(f"{source}: document {max(index, 1)}: {err}") from None
    finally:
        loader.dispose()
    return out


def _reader_error(err: yaml.reader.ReaderError, text: str, source: str, index: int = 1) -> YamlInputError:
    """A character YAML does not allow (a NUL byte, a control character), with its line and column."""
    position = min(max(err.position, 0), len(text))
    line = text.count("\n", 0, position) + 1
    column = position - (text.rfind("\n", 0, position) + 1) + 1
    what = "a NUL byte" if err.character == 0 else f"the control character #x{err.character:04x}"
    return YamlInputError(
        f"{source}:{line}:{column}: document {index}: {what}, which YAML does not allow"
        " (binary data? write it as \\u escapes in a quoted string, or base64 in a Secret's data)"
    )


def _key_lines(root: yaml.Node) -> tuple[dict[str, int], tuple[tuple[str, int], ...]]:
    """Field path -> line of each mapping key, and the keys given twice in one mapping (iterative; aliases once)."""
    lines: dict[str, int] = {}
    duplicates: list[tuple[int, str, int]] = []  # (offset in the text, path, line): sorted into document order
    seen: set[int] = set()
    stack: list[tuple[str, yaml.Node]] = [("", root)]
    while stack:
        path, node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        kids: list[tuple[str, yaml.Node]] = []
        if isinstance(node, yaml.MappingNode):
            keys: set[str] = set()
            for key, value in node.value:
                if not isinstance(key, yaml.ScalarNode) or key.tag == "tag:yaml.org,2002:merge":
                    continue
                here = f"{path}.{key.value}" if path else str(key.value)
                if key.value in keys:
                    duplicates.append((key.start_mark.index, here, key.start_mark.line + 1))
                else:
                    lines[here] = key.start_mark.line + 1
                keys.add(key.value)
                kids.append((here, value))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                lines.setdefault(f"{path}[{i}]", item.start_mark.line + 1)
                kids.append((f"{path}[{i}]", item))
        stack.extend(reversed(kids))
    return lines, tuple((path, line) for _, path, line in sorted(duplicates))


def _check_aliases(root: yaml.Node, where: str) -> None:
    """Refuse a document whose aliases expand too far (billion laughs) or refer to themselves."""
    sizes: dict[int, int] = {}
    depths: dict[int, int] = {}
    distinct = 0
    # iterative post-order walk over the node graph (aliases are shared nodes)
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    open_: set[int] = set()
    while stack:
        node, done = stack.pop()
        nid = id(node)
        if done:
            open_.discard(nid)
            kids = _children(node)
            sizes[nid] = 1 + sum(sizes[id(k)] for k in kids)
            depths[nid] = 1 + max((depths[id(k)] for k in kids), default=0)
            continue
        if nid in sizes:
            continue
        if nid in open_:
            raise YamlInputError(f"{where}: a YAML alias refers to the node that contains it")
        open_.add(nid)
        distinct += 1
        stack.append((node, True))
        for kid in _children(node):
            kid_id = id(kid)
            if kid_id in open_:
                raise YamlInputError(f"{where}: a YAML alias refers to the node that contains it")
            if kid_id not in sizes:
                stack.append((kid, False))
    if sizes[id(root)] - distinct > MAX_ALIAS_EXPANSION:
        raise YamlInputError(
            f"{where}: YAML aliases expand to {sizes[id(root)]:,} nodes (more than {MAX_ALIAS_EXPANSION:,} "
            "beyond the document itself: an alias bomb?)"
        )
    if depths[id(root)] > MAX_DEPTH + 2:
        raise YamlInputError(f"{where}: nesting deeper than {MAX_DEPTH} levels (through YAML aliases)")


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []
