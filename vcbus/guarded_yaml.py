"""YAML read with guards: no alias bombs, no nesting deep enough to exhaust the stack.

PyYAML's SafeLoader builds aliases as shared references, so a "billion laughs" document
costs little to load but explodes as soon as anything walks it (folding, JSON encoding);
and its composer recurses once per nesting level, so `[[[[...` ten thousand deep ends in
a RecursionError. `yaml_documents` composes each document with a depth limit, measures
the node graph it would expand to (iteratively, memoised per shared node) and refuses
documents whose aliases add more than `MAX_ALIAS_EXPANSION` nodes, refer to a node that
contains them, or nest deeper than `MAX_DEPTH` through aliases. Errors are `YamlInputError`
(a `UserError`, exit code 2) naming the file, the line and the document.
"""

from __future__ import annotations

from typing import Any

import yaml

from vcbus.errors import UserError

MAX_DEPTH = 100
"""Deepest nesting accepted. A Kubernetes object is rarely deeper than 20 (managedFields)."""

MAX_ALIAS_EXPANSION = 1_000_000
"""Nodes YAML aliases may add to a document once expanded (a billion-laughs document adds 10^9)."""


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

    def compose_node(self, parent: Any, index: Any) -> Any:  # noqa: ANN401 - PyYAML's signature
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


def yaml_documents(data: bytes, source: str) -> list[tuple[str, Any]]:
    """(place, value) of each YAML document, with the depth and alias guards."""
    return [(f"{source}:{line}: document {index}", value) for line, index, value in yaml_values(data, source)]


def yaml_values(data: bytes | str, source: str) -> list[tuple[int, int, Any]]:
    """(first line, document number, value) of each non-empty YAML document, guarded."""
    if isinstance(data, str):
        return _values(data, source)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise YamlInputError(f"{source}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    return _values(text, source)


def _values(text: str, source: str) -> list[tuple[int, int, Any]]:
    out: list[tuple[int, int, Any]] = []
    loader = _GuardedLoader(text)
    index = 0
    try:
        while loader.check_node():
            index += 1
            node = loader.get_node()
            if node is None:
                continue
            where = f"{source}:{node.start_mark.line + 1}: document {index}"
            _check_aliases(node, where)
            out.append((node.start_mark.line + 1, index, loader.construct_document(node)))
    except _TooDeep as err:
        raise YamlInputError(
            f"{source}:{err.mark.line + 1}: document {max(index, 1)}: nesting deeper than {MAX_DEPTH} levels"
        ) from None
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        problem = err.problem or err.context or "invalid YAML"
        raise YamlInputError(f"{where}: document {max(index, 1)}: {problem}") from None
    except yaml.YAMLError as err:
        raise YamlInputError(f"{source}: document {max(index, 1)}: {err}") from None
    finally:
        loader.dispose()
    return out


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
