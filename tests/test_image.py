"""The image's pins: the base image by digest, every Python package by version and hash (requirements.lock).

* the lock covers pyproject.toml's dependencies, each pin within its range and hashed, and
  holds the versions the tests run with (so the image runs what was tested);
* the Dockerfile builds from the pinned base only and installs nothing unhashed;
* (slow, needs PyPI) the Dockerfile's own RUN steps, run outside Docker (no container engine
  here) in stage directories with a fresh CPython 3.11 venv as each stage's Python: the wheels
  build from the lock, install with `--no-index`, `pip check` is clean and `vcbus --help` runs.
"""

from __future__ import annotations

import importlib.metadata
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = pathlib.Path(__file__).resolve().parents[1]
DOCKERFILE = REPO / "Dockerfile"


def pins(path: pathlib.Path) -> dict[str, tuple[str, int]]:
    """name -> (version, number of hashes) of a `uv pip compile --generate-hashes` file."""
    out: dict[str, tuple[str, int]] = {}
    current = None
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s\\]+)", line)
        if m:
            current = canonicalize_name(m.group(1))
            out[current] = (m.group(2), 0)
        elif current and line.strip().startswith("--hash=sha256:"):
            version, n = out[current]
            out[current] = (version, n + 1)
    return out


def project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_lock_pins_every_dependency_within_its_range_with_hashes():
    locked = pins(REPO / "requirements.lock")
    assert len(locked) >= 20
    for text in project()["project"]["dependencies"]:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        assert name in locked, f"{req.name} is not in requirements.lock: run make lock"
        assert req.specifier.contains(locked[name][0]), f"{name}=={locked[name][0]} is outside {req.specifier}"
        for extra in req.extras:  # nats-py[nkeys] -> nkeys
            assert canonicalize_name(extra) in locked
    unhashed = [n for n, (_, hashes) in locked.items() if hashes == 0]
    assert unhashed == []


def test_lock_holds_the_versions_the_tests_run_with():
    differ = {}
    for name, (version, _) in pins(REPO / "requirements.lock").items():
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            differ[name] = (version, None)
            continue
        if installed != version:
            differ[name] = (version, installed)
    assert differ == {}, f"locked vs installed (run make lock, or install the locked versions): {differ}"


def test_build_lock_pins_the_build_backend():
    locked = pins(REPO / "requirements-build.lock")
    (requires,) = [Requirement(r) for r in project()["build-system"]["requires"]]
    version, hashes = locked[canonicalize_name(requires.name)]
    assert requires.specifier.contains(version) and hashes >= 1


def _instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_uses_only_the_pinned_base_and_installs_nothing_unhashed():
    steps = _instructions()
    (arg,) = [rest for word, rest in steps if word == "ARG" and rest.startswith("PYTHON_IMAGE=")]
    assert re.fullmatch(r"PYTHON_IMAGE=python:3\.11-slim@sha256:[0-9a-f]{64}", arg)
    froms = [rest for word, rest in steps if word == "FROM"]
    assert froms and all(f.split()[0] == "${PYTHON_IMAGE}" for f in froms)
    for word, rest in steps:
        if word != "RUN":
            continue
        for command in rest.split("&&"):
            argv = shlex.split(command)
            if argv[:2] in (["pip", "install"], ["pip", "wheel"]):
                hashed = "--require-hashes" in argv or "--no-index" in argv
                own = argv[-1] == "." and "--no-deps" in argv  # vcbus itself, from the copied sources
                assert hashed or own, command


def _run_dockerfile_outside_docker(tmp: pathlib.Path) -> pathlib.Path:
    """Each stage's COPY and RUN, with absolute paths moved under tmp/<stage>/ and a fresh venv as its Python."""
    stages: dict[str, pathlib.Path] = {}
    root = workdir = venv = None
    env = {**os.environ, "PIP_NO_CACHE_DIR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env.pop("PIP_FIND_LINKS", None)

    def here(path: str) -> pathlib.Path:
        return root / path.lstrip("/") if path.startswith("/") else workdir / path

    for word, rest in _instructions():
        if word == "FROM":
            parts = rest.split()
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else f"stage{len(stages)}"
            root = tmp / name
            venv = root / "python"
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
            workdir = root
            stages[name] = root
        elif word == "WORKDIR":
            workdir = here(rest)
            workdir.mkdir(parents=True, exist_ok=True)
        elif word == "COPY":
            argv = shlex.split(rest)
            source_root = REPO
            if argv[0].startswith("--from="):
                source_root = stages[argv[0].split("=", 1)[1]]
                argv = argv[1:]
            *sources, dest = argv
            for src in sources:
                origin = source_root / src.lstrip("/")
                target = here(dest) / origin.name if dest.endswith("/") else here(dest)
                target.parent.mkdir(parents=True, exist_ok=True)
                if origin.is_dir():
                    shutil.copytree(origin, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
                else:
                    shutil.copy2(origin, target)
        elif word == "RUN":
            for command in rest.split("&&"):
                argv = shlex.split(command)
                if argv[0] == "useradd":
                    continue  # the image's user; nothing to install
                moved = []
                for a in argv:
                    if a.startswith("/"):
                        p = here(a)
                        moved.extend(sorted(str(x) for x in p.parent.glob(p.name)) if "*" in a else [str(p)])
                    else:
                        moved.append(a)
                if moved[0] == "pip":
                    moved[0] = str(venv / "bin" / "pip")
                done = subprocess.run(moved, cwd=workdir, env=env, capture_output=True, text=True, timeout=900)
                assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return venv


@pytest.mark.slow
def test_dockerfile_steps_build_a_working_install_from_the_lock(tmp_path):
    venv = _run_dockerfile_outside_docker(tmp_path)
    check = subprocess.run([str(venv / "bin" / "pip"), "check"], capture_output=True, text=True, timeout=120)
    assert check.returncode == 0, check.stdout
    installed = {canonicalize_name(d.metadata["Name"]): d.version
                 for d in importlib.metadata.distributions(path=[str(p) for p in (venv / "lib").glob("python*/site-packages")])}  # fmt: skip
    locked = {name: version for name, (version, _) in pins(REPO / "requirements.lock").items()}
    assert {n: v for n, v in installed.items() if n in locked} == locked
    assert set(installed) - set(locked) - {"pip", "setuptools"} == {"vcbus"}
    done = subprocess.run([str(venv / "bin" / "vcbus"), "up", "--help"], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0 and "Usage: vcbus up" in done.stdout
    # The generated CRD schemas ship as package data (the admission checks read them).
    done = subprocess.run([str(venv / "bin" / "python"), "-c",
                           "import statemachines.admission.schema as s; print(sorted(s.CRD_SCHEMAS))"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)  # fmt: skip
    assert "jobs.batch.volcano.sh" in done.stdout, done.stderr
