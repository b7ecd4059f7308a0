"""Shared pytest setup: fixture modules named `tests/fixtures_*.py` are loaded as plugins."""

from __future__ import annotations

import pathlib

pytest_plugins = sorted(
    f"tests.{p.stem}" for p in pathlib.Path(__file__).parent.glob("fixtures_*.py")
)
