"""The long user documents start with a table of contents that lists every section (issue 29).

docs/operations.md and docs/replay.md open with `Contents:`, a link per `##` section in order, each to
the anchor GitHub gives the heading (lower case, punctuation dropped, blanks as hyphens, `-1`... for
repeats). A section added without its line, or renamed, fails here.
"""

from __future__ import annotations

import pathlib
import re

import pytest

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"


def anchor(title: str, seen: dict[str, int]) -> str:
    base = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
    n = seen.get(base, 0)
    seen[base] = n + 1
    return base if n == 0 else f"{base}-{n}"


def sections(text: str) -> list[tuple[str, str]]:
    """(title, anchor) of each `##` heading outside code fences."""
    seen: dict[str, int] = {}
    out, fence = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
            continue
        m = None if fence else re.match(r"(#{1,6}) (.*)", line)
        if m:
            a = anchor(m.group(2), seen)
            if len(m.group(1)) == 2:
                out.append((m.group(2), a))
    return out


@pytest.mark.parametrize("name", ["operations.md", "replay.md"])
def test_the_contents_list_every_section_in_order(name):
    text = (DOCS / name).read_text()
    head, _, _ = text.partition("\n## ")
    assert "\nContents:\n" in head, f"docs/{name}: no `Contents:` before its first section"
    listed = re.findall(r"^- \[(.*)\]\(#([^)]*)\)$", head.split("\nContents:\n", 1)[1], flags=re.M)
    assert listed == sections(text), f"docs/{name}: the contents and the sections differ"
