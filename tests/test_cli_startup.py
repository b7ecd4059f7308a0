"""`vcbus --help`, `--version` and `validate` start light: a command's module is imported when it runs.

`vcbus.cli.main.COMMANDS` names each command's module and short help; `LazyGroup` imports the
module only when the command is asked for (issue 29). Not timed: each run is a real process
running `vcbus ...` as `python -m vcbus` does, and the check is which modules it imported. The table's short
help is checked against each command's own help, so `vcbus --help` cannot drift from the commands.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import os
import pathlib
import subprocess
import sys

import click
import pytest

from vcbus.cli.main import COMMANDS, cli

ROOT = pathlib.Path(__file__).resolve().parents[1]
JOB = ROOT / "tests" / "data" / "volcano-examples" / "integrations_ray_ray-example.yaml"
HEAVY_PACKAGES = {"nats", "aiohttp", "kubernetes"}
ENGINE = ("statemachines.engine", "statemachines.worker", "statemachines.job", "statemachines.scheduler", "vcbus.bus")


def run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "COLUMNS": "100", **(env or {})})


def imported(tmp_path: pathlib.Path, *args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run `vcbus ARGS` as `python -m vcbus` does (runpy); the result and sys.modules when it exits."""
    out = tmp_path / "modules.json"
    program = ("import atexit, json, runpy, sys\n"
               f"atexit.register(lambda: open({str(out)!r}, 'w').write(json.dumps(sorted(sys.modules))))\n"
               f"sys.argv = ['vcbus', *{list(args)!r}]\n"
               "runpy.run_module('vcbus', run_name='__main__', alter_sys=True)\n")
    res = run("-c", program)
    return res, set(json.loads(out.read_text()))


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules
                  if m.split(".")[0] in HEAVY_PACKAGES or any(m == e or m.startswith(e + ".") for e in ENGINE))


@pytest.mark.parametrize("args", [("--version",), ("--help",), ("validate", str(JOB))], ids=["version", "help", "validate"])
def test_light_commands_import_no_bus_cluster_or_engine(tmp_path, args):
    res, modules = imported(tmp_path, *args)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "vcbus.cli.main" in modules  # the modules were read
    assert heavy(modules) == [], f"`vcbus {' '.join(args)}` imports {heavy(modules)}"
    if args[0] == "validate":
        assert "statemachines.admission.validate" in modules and "Job ray-cluster-job: ok" in res.stdout, res.stdout


def test_a_command_that_runs_still_imports_what_it_needs(tmp_path):
    res, modules = imported(tmp_path, "status", "--help")
    assert res.returncode == 0, res.stderr[-2000:]
    assert "vcbus.cli.status" in modules and "vcbus.cli.job" not in modules


def test_python_dash_m_vcbus_is_the_cli():
    res = run("-m", "vcbus", "--version")
    assert (res.returncode, res.stdout) == (0, f"vcbus, version {importlib.metadata.version('vcbus')}\n"), res.stderr
    res = run("-m", "vcbus", "no-such-command")
    assert res.returncode == 2 and "No such command 'no-such-command'" in res.stderr
    assert "Traceback" not in res.stderr


def test_every_table_entry_is_its_modules_command_with_the_same_short_help():
    for name, (module, short) in COMMANDS.items():
        scratch = click.Group()
        importlib.import_module(module).register(scratch)
        assert list(scratch.commands) == [name], module
        assert scratch.commands[name].get_short_help_str(limit=10_000) == short, name
        loaded = cli.get_command(click.Context(cli), name)
        assert loaded is not None and loaded.get_short_help_str(limit=10_000) == short, name


def test_every_command_module_is_in_the_table():
    modules = {f"vcbus.cli.{p.stem}" for p in (ROOT / "vcbus" / "cli").glob("*.py")
               if "\ndef register(group" in p.read_text()}
    assert modules == {module for module, _ in COMMANDS.values()}


def test_help_lists_what_the_loaded_commands_say():
    lazy = run("-m", "vcbus", "--help")
    eager = run("-c", "import sys, click; from vcbus.cli.main import cli, main; "
                      "[cli.get_command(click.Context(cli), n) for n in cli.list_commands(click.Context(cli))]; "
                      "sys.exit(main(['--help']))")
    assert lazy.returncode == eager.returncode == 0, lazy.stderr + eager.stderr
    assert lazy.stdout == eager.stdout
    listing = lazy.stdout.split("Commands:\n", 1)[1]
    assert [line.split()[0] for line in listing.splitlines()] == sorted(COMMANDS)
