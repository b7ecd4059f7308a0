"""Every `# type: ignore` and `# noqa` in statemachines/, projections/ and vcbus/ says why.

A suppression without a reason hides a finding and leaves the next reader to guess whether it
is still needed. The rule is simple: after the directive and its codes there is some text, for
example `# type: ignore[attr-defined]  # set by msgspec` or `# noqa: E731 - read once per event`.
Only real comments count (the tokenizer's COMMENT tokens), not text in strings or docstrings.
"""

from __future__ import annotations

import io
import pathlib
import re
import tokenize

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
TREES = ("statemachines", "projections", "vcbus")

# one directive, its codes, and what follows up to the next directive in the same comment
DIRECTIVE = re.compile(r"#\s*(?:type:\s*ignore(?:\[[^\]]*\])?|noqa(?::\s*[A-Z]+[0-9]*(?:\s*,\s*[A-Z]+[0-9]*)*)?)",
                       re.IGNORECASE)
REASON = re.compile(r"[A-Za-z]{2,}")  # some words, not only punctuation


def unexplained(source: str) -> list[tuple[int, str]]:
    """(line, comment) of each directive in `source` with no reason after it."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT:
            continue
        matches = list(DIRECTIVE.finditer(tok.string))
        for i, m in enumerate(matches):
            end = matches[i + 1].start() if i + 1 < len(matches) else len(tok.string)
            if not REASON.search(tok.string[m.end():end]):
                out.append((tok.start[0], tok.string))
    return out


def files() -> list[pathlib.Path]:
    return sorted(p for tree in TREES for p in (ROOT / tree).rglob("*.py"))


def test_every_type_ignore_and_noqa_says_why():
    missing = [f"{p.relative_to(ROOT)}:{line}: {comment}"
               for p in files() for line, comment in unexplained(p.read_text())]
    assert not missing, "type: ignore / noqa without a reason:\n" + "\n".join(missing)


def test_the_trees_are_there():
    assert len(files()) > 200


@pytest.mark.parametrize("line", [
    "x = f()  # type: ignore\n",
    "x = f()  # type: ignore[attr-defined]\n",
    "x = f()  #type:ignore[attr-defined, union-attr]\n",
    "x = f()  # noqa\n",
    "x = f()  # noqa: E731\n",
    "x = f()  # noqa: E731, B008 -\n",
    "x = f()  # noqa: E731 - a lambda  # type: ignore[misc]\n",
    "x = f()  # type: ignore[misc]  # noqa: E731\n",
])
def test_a_directive_without_a_reason_is_found(line):
    assert unexplained(line)


@pytest.mark.parametrize("line", [
    "x = f()  # type: ignore[attr-defined]  # set by msgspec\n",
    "x = f()  # type: ignore[attr-defined] - ours, replaced below\n",
    "x = f()  # noqa: E731 - a lambda read once per event\n",
    "x = f()  # noqa: SIM115 closed by the caller\n",
    "x = f()  # noqa: E731 - a lambda  # type: ignore[misc]  # msgspec's field\n",
    "x = '# type: ignore'  # a string, not a comment\n",
    '"""# noqa in a docstring"""\n',
    "x = f()  # an ordinary comment\n",
])
def test_a_directive_with_a_reason_or_none_at_all_passes(line):
    assert not unexplained(line)
