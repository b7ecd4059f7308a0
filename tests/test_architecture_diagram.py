"""The diagram of `statemachines/` in docs/architecture.md matches the code.

Every module or package the diagram names exists; every module of `statemachines/`
outside the packages it names whole (`scheduler/`, `admission/`, `plugins/`) is
named; and every solid arrow `A --> B` is an import of B by A in the source
(a dotted arrow is a call through a function passed in, and is not checked).
"""

from __future__ import annotations

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "statemachines"
DOC = ROOT / "docs" / "architecture.md"
WHOLE = ("scheduler/", "admission/", "plugins/")  # named as packages, not module by module

MODULE = re.compile(r"(?:\w+/)*\w+\.py\b")
PACKAGE_NAME = re.compile(r"(?<![\w/])(\w+)/(?=\s|$)")
NODE = re.compile(r'^\s*(\w+)\["(.*?)"\]\s*$')


def diagram() -> str:
    text = DOC.read_text()
    section = text.split("## Inside `statemachines/`", 1)
    assert len(section) == 2, "docs/architecture.md has no section 'Inside `statemachines/`'"
    block = re.search(r"```mermaid\n(.*?)```", section[1], re.S)
    assert block is not None, "the section has no mermaid block"
    return block.group(1)


def nodes(chart: str) -> dict[str, list[str]]:
    """Node id -> the modules (`job/sync.py`) and packages (`admission/`) its label names."""
    found: dict[str, list[str]] = {}
    for line in chart.splitlines():
        m = NODE.match(line)
        if m is None or line.strip().startswith("subgraph"):
            continue
        label = m.group(2).replace("<br/>", " ")
        names = MODULE.findall(label) + [p + "/" for p in PACKAGE_NAME.findall(label)]
        assert names, f"node {m.group(1)} names no module: {label!r}"
        found[m.group(1)] = names
    return found


def edges(chart: str) -> list[tuple[str, str]]:
    """(source id, target id) for every solid arrow, `A & B --> C` and chains expanded."""
    pairs = []
    for line in chart.splitlines():
        if "-->" not in line or "-.->" in line:
            continue
        groups = [re.sub(r"\|[^|]*\|", "", g) for g in line.split("-->")]
        ids = [[x.strip() for x in g.split("&")] for g in groups]
        for left, right in zip(ids, ids[1:]):
            pairs.extend((a, b) for a in left for b in right)
    return pairs


def dotted(name: str) -> str:
    return "statemachines." + name.removesuffix(".py").removesuffix("/").replace("/", ".")


def sources(name: str) -> list[pathlib.Path]:
    if name.endswith("/"):
        return sorted((PACKAGE / name).rglob("*.py"))
    return [PACKAGE / name]


def imported(path: pathlib.Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


def imports(source: str, target: str) -> bool:
    want = dotted(target)
    for path in sources(source):
        for mod in imported(path):
            if mod == want or (target.endswith("/") and mod.startswith(want + ".")):
                return True
    return False


def test_every_module_the_diagram_names_exists():
    named = [n for names in nodes(diagram()).values() for n in names]
    assert len(named) >= 40
    missing = [n for n in named if not ((PACKAGE / n / "__init__.py").is_file() if n.endswith("/") else (PACKAGE / n).is_file())]
    assert missing == []


def test_every_module_of_statemachines_is_in_the_diagram():
    named = {n for names in nodes(diagram()).values() for n in names}
    assert set(WHOLE) <= named
    modules = {
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if p.name != "__init__.py" and not str(p.relative_to(PACKAGE)).startswith(WHOLE)
    }
    assert sorted(modules - named) == []


def test_every_arrow_is_an_import():
    chart = diagram()
    known = nodes(chart)
    pairs = edges(chart)
    assert len(pairs) >= 40
    unknown = sorted({x for pair in pairs for x in pair if x not in known})
    assert unknown == [], f"arrows between undeclared nodes: {unknown}"
    wrong = [
        (a, b)
        for a, b in pairs
        if not any(imports(s, t) for s in known[a] for t in known[b])
    ]
    assert wrong == [], f"arrows that are no import in the code: {wrong}"


def test_the_check_sees_a_wrong_arrow():
    """The import check is not vacuous: an arrow against the grain fails it."""
    assert imports("engine.py", "worker.py")
    assert not imports("worker.py", "engine.py")
    assert imports("manifests/pod.py", "plugins/")
    assert not imports("model/objects.py", "job/")
