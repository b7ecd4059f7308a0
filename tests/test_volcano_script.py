"""scripts/volcano-controller.sh: what it says when it cannot build Volcano's controller.

The build itself (a few minutes of Go) is not run here; `benchmarks/latency.py --volcano`
uses its result. These check that every wrong input ends with one line naming the
variable and what is wrong with it, a non-zero exit and no output on stdout, and that
`--check` only looks.
"""

from __future__ import annotations

import os
import pathlib
import subprocess

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "scripts" / "volcano-controller.sh"


def run(tmp_path: pathlib.Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("VOLCANO_")}
    base["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    return subprocess.run(["bash", str(SCRIPT), *args], env=base | env, capture_output=True, text=True, timeout=60)


def source(tmp_path: pathlib.Path, *, module: str = "volcano.sh/volcano", replace: bool = True) -> pathlib.Path:
    src = tmp_path / "volcano"
    (src / "cmd" / "controller-manager").mkdir(parents=True)
    (src / "staging" / "src" / "volcano.sh" / "apis").mkdir(parents=True)
    (src / "staging" / "src" / "volcano.sh" / "apis" / "go.mod").write_text("module volcano.sh/apis\n")
    lines = [f"module {module}", "", "go 1.26.0"]
    if replace:
        lines.append("replace volcano.sh/apis => ./staging/src/volcano.sh/apis")
    (src / "go.mod").write_text("\n".join(lines) + "\n")
    return src


def refused(proc: subprocess.CompletedProcess, code: int, *words: str) -> None:
    assert proc.returncode == code, proc
    assert proc.stdout == ""
    message = proc.stderr.strip()
    assert len(message.splitlines()) == 1 and "Traceback" not in message, message
    for word in words:
        assert word in message, message


def test_without_a_source(tmp_path: pathlib.Path) -> None:
    refused(run(tmp_path), 1, "VOLCANO_SRC is not set", "volcano-sh/volcano")


def test_a_source_that_is_not_there(tmp_path: pathlib.Path) -> None:
    refused(run(tmp_path, VOLCANO_SRC=str(tmp_path / "nope")), 1, "VOLCANO_SRC=", "no such directory")


@pytest.mark.parametrize("module", ["example.com/other", "volcano.sh/volcano/v2"])
def test_a_source_of_another_module(tmp_path: pathlib.Path, module: str) -> None:
    src = source(tmp_path, module=module)
    refused(run(tmp_path, VOLCANO_SRC=str(src)), 1, "no go.mod of module volcano.sh/volcano")


def test_a_source_without_the_apis(tmp_path: pathlib.Path) -> None:
    src = source(tmp_path, replace=False)
    refused(run(tmp_path, VOLCANO_SRC=str(src)), 1, "does not carry volcano.sh/apis", "VOLCANO_APIS_SRC")
    refused(run(tmp_path, VOLCANO_SRC=str(src), VOLCANO_APIS_SRC=str(tmp_path / "none")), 1,
            "VOLCANO_APIS_SRC=", "no such directory")
    refused(run(tmp_path, VOLCANO_SRC=str(src), VOLCANO_APIS_SRC=str(src)), 1, "no go.mod of module volcano.sh/apis")


def test_check_only_looks(tmp_path: pathlib.Path) -> None:
    src = source(tmp_path)
    refused(run(tmp_path, "--check", VOLCANO_SRC=str(src), VOLCANO_VERSION="v9.9.9"), 1,
            "no vc-controller-manager v9.9.9", "without --check")
    assert not (tmp_path / "cache" / "vcbus" / "volcano" / "v9.9.9").exists()
    built = tmp_path / "cache" / "vcbus" / "volcano" / "v9.9.9" / "vc-controller-manager"
    built.parent.mkdir(parents=True)
    built.write_text("#!/bin/sh\n")
    built.chmod(0o755)
    proc = run(tmp_path, "--check", VOLCANO_SRC=str(src), VOLCANO_VERSION="v9.9.9")
    assert proc.returncode == 0 and proc.stdout.strip() == str(built), proc


@pytest.mark.parametrize("version, kept", [("../../escape", "_.._.._escape"), ("..", "_.."), ("a b/c", "a_b_c")])
def test_a_version_cannot_leave_the_cache(tmp_path: pathlib.Path, version: str, kept: str) -> None:
    src = source(tmp_path)
    proc = run(tmp_path, "--check", VOLCANO_SRC=str(src), VOLCANO_VERSION=version)
    refused(proc, 1, f"no vc-controller-manager {kept} in {tmp_path / 'cache' / 'vcbus' / 'volcano' / kept} ")


def test_a_wrong_argument(tmp_path: pathlib.Path) -> None:
    refused(run(tmp_path, "--build"), 2, "usage:", "VOLCANO_SRC=DIR")
