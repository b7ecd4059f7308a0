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


def test_the_acyclic_contract_fails_on_a_cycle_inside_statemachines(tmp_path):
    """The contract is not vacuous: a copy of statemachines/ with engine <-> job closed again breaks it."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    [contract] = [c for c in config["contracts"] if c["type"] == "acyclic_siblings"]
    assert contract["ancestors"] == ["statemachines"]
    shutil.copytree(ROOT / "statemachines", tmp_path / "statemachines",
                    ignore=shutil.ignore_patterns("__pycache__"))
    handling = tmp_path / "statemachines" / "job" / "handling.py"
    handling.write_text(handling.read_text() + "\nfrom statemachines import engine  # noqa: E402\n")
    ignores = "".join(f'    "{i}",\n' for i in contract.get("ignore_imports", []))
    (tmp_path / "pyproject.toml").write_text(
        '[tool.importlinter]\nroot_packages = ["statemachines"]\n\n'
        '[[tool.importlinter.contracts]]\nname = "acyclic"\ntype = "acyclic_siblings"\n'
        f'ancestors = ["statemachines"]\nignore_imports = [\n{ignores}]\n'
    )
    exe = shutil.which("lint-imports", path=str(pathlib.Path(sys.executable).parent)) or shutil.which("lint-imports")
    res = subprocess.run([exe, "--no-cache"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert res.returncode != 0, res.stdout
    assert ".job -> .engine" in res.stdout or ".engine -> .job" in res.stdout
