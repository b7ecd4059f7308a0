"""The docs stand alone: no README or docs page points at files outside the repository.

Volcano is cited by upstream path (`pkg/controllers/job/job_controller_actions.go`), never by
the team's private notes (`../shared/reference/...`) or their section numbers (`§4`).
"""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
OUTSIDE = re.compile(r"\.\./shared|shared/reference|§\s*\d")


def test_there_are_pages_to_check():
    assert ROOT / "README.md" in PAGES and len(PAGES) > 10


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_page_cites_nothing_outside_the_repository(page):
    hits = [
        f"{page.relative_to(ROOT)}:{n}: {line.strip()}"
        for n, line in enumerate(page.read_text().splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert hits == []


def test_the_check_catches_a_pointer_outside():
    for text in ("see `../shared/reference/volcano-job-controller.md`", "shared/reference/x.md", "(§4 of the notes)"):
        assert OUTSIDE.search(text), text
    assert not OUTSIDE.search("`pkg/controllers/job/job_controller_actions.go`")
