"""Usage errors are one line, as kubectl's: `error: <what is wrong> (see '<command> --help')`, exit 2,
no traceback and no usage block; a bare command group still shows its help."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _vcbus(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vcbus", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("args", "where", "what"),
    [
        (("replay", "--nope"), "vcbus replay", "No such option '--nope'"),
        (("nosuch",), "vcbus", "No such command 'nosuch'"),
        (("validate",), "vcbus validate", "Missing argument 'FILE...'"),
        (("up", "--port", "abc"), "vcbus up", "'abc' is not a valid integer"),
        (("job", "list", "--bogus"), "vcbus job list", "No such option '--bogus'"),
    ],
)
def test_a_usage_error_is_one_line(args, where, what) -> None:
    done = _vcbus(*args)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ") and what in lines[0] and lines[0].endswith(f"(see '{where} --help')")
    assert "Traceback" not in done.stderr and "Usage:" not in done.stderr


def test_a_bare_group_shows_its_help() -> None:
    done = _vcbus("job")
    assert "Usage: vcbus job" in done.stdout + done.stderr and "Commands:" in done.stdout + done.stderr
