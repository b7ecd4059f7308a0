"""The architecture contracts (pyproject's [tool.importlinter]) hold: run import-linter."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_import_contracts_hold():
    exe = shutil.which("lint-imports", path=str(pathlib.Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert exe, "import-linter is part of the dev extra"
    res = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "broken" not in res.stdout.split("Contracts:")[-1].lower() or "0 broken" in res.stdout
