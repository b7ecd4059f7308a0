"""`vcbus demo` (the README's quick start): the whole bus once, on embedded defaults."""

from __future__ import annotations

import os
import pathlib
import shlex
import subprocess
import sys

import pytest

pytestmark = pytest.mark.nats
ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_demo_runs_the_seed_job_through_an_embedded_bus(tmp_path):
    res = subprocess.run(
        [sys.executable, "-m", "vcbus.cli.main", "demo", "--keep", "--data-dir", str(tmp_path / "store")],
        cwd=ROOT, capture_output=True, timeout=120,
    )
    out = res.stdout.decode()
    assert res.returncode == 0, res.stderr.decode()
    assert "Running -> Restarting  (RestartJob, retryCount 1)" in out
    assert "because PodFailed of pod resnet-dist-train-worker-1 (exitCode 1)" in out
    # the README's quick start shows exactly what the demo prints
    readme = (ROOT / "README.md").read_text()
    shown = readme.split("```text\nphase changes on VCBUS_JOBS", 1)[1].split("```", 1)[0].splitlines()[1:]
    printed = out.splitlines()
    assert [line for line in shown if line.strip()] and all(line in printed for line in shown if line.strip())
    assert "Completing -> Completed" in out
    row = next(line for line in out.splitlines() if line.startswith("default"))
    assert row.split()[:3] == ["default", "resnet-dist-train", "Completed"] and row.split()[-1] == "1"
    # and the log's timeline as a page, in the kept dir (tests/test_replay_html_browser.py looks at one)
    page = pathlib.Path(out.rsplit("timeline page (open it in a browser): ", 1)[1].splitlines()[0].strip())
    assert page == tmp_path / "store" / "timeline.html"
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and '"key":"default/resnet-dist-train"' in text
    # the kept store is a real JetStream store other commands can read
    status = subprocess.run(
        [sys.executable, "-m", "vcbus.cli.main", "status", "--data-dir", str(tmp_path / "store"), "-o", "json",
         "default/resnet-dist-train"],
        cwd=ROOT, capture_output=True, timeout=60,
    )
    assert status.returncode == 0, status.stderr.decode()
    assert b'"Completed"' in status.stdout


def test_demo_without_keep_leaves_only_its_page(tmp_path):
    res = subprocess.run([sys.executable, "-m", "vcbus.cli.main", "demo"], cwd=ROOT, capture_output=True, timeout=120,
                         env={**os.environ, "TMPDIR": str(tmp_path)})
    assert res.returncode == 0, res.stderr.decode()
    page = pathlib.Path(res.stdout.decode().rsplit("timeline page (open it in a browser): ", 1)[1].strip())
    assert page.parent == tmp_path and page.suffix == ".html" and page.stat().st_size > 0
    assert [p.name for p in tmp_path.iterdir()] == [page.name]  # the store's temporary dir is gone


def test_demo_of_a_missing_file_is_a_clear_error(tmp_path):
    res = subprocess.run([sys.executable, "-m", "vcbus.cli.main", "demo", str(tmp_path / "nope.log")],
                         cwd=ROOT, capture_output=True, timeout=60)
    assert res.returncode == 2 and b"no such file" in res.stderr and b"Traceback" not in res.stderr


def clean_env(tmp_path: pathlib.Path) -> dict[str, str]:
    """The environment of a user whose default store is under tmp_path (no bus named by the environment)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("VCBUS_") and k != "NATS_URL"}
    return {**env, "XDG_STATE_HOME": str(tmp_path / "state")}


def next_commands(out: str) -> list[str]:
    tail = out.split("the bus is kept in ", 1)[1].splitlines()[1:]
    return [line.strip() for line in tail if line.startswith("  vcbus ") or line.startswith("  VCBUS_")]


def vcbus_line(command: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """Run a printed `[VAR=value ]vcbus ARGS` line as the shell would, with this checkout's vcbus."""
    words = shlex.split(command)
    extra = dict(w.split("=", 1) for w in words[: words.index("vcbus")])
    return subprocess.run([sys.executable, "-m", "vcbus.cli.main", *words[words.index("vcbus") + 1:]], cwd=ROOT,
                          capture_output=True, timeout=120, env={**env, **extra})


@pytest.mark.parametrize("where", ["default store", "--data-dir"])
def test_demo_keep_ends_with_commands_that_read_the_kept_bus(tmp_path, where):
    env = clean_env(tmp_path)
    store = tmp_path / "state" / "vcbus" / "nats" if where == "default store" else tmp_path / "elsewhere"
    extra = [] if where == "default store" else ["--data-dir", str(store)]
    res = subprocess.run([sys.executable, "-m", "vcbus.cli.main", "demo", "--keep", *extra], cwd=ROOT,
                         capture_output=True, timeout=120, env=env)
    out = res.stdout.decode()
    assert res.returncode == 0, res.stderr.decode()
    assert f"the bus is kept in {store};" in out and (store / "timeline.html").is_file()
    commands = next_commands(out)
    assert len(commands) == 4, out
    # one way to name the store: every command takes --data-dir, `vcbus replay --nats` too (no VAR=... prefix)
    assert all(c.startswith("vcbus ") and c.endswith(f" --data-dir {store}") == bool(extra) for c in commands), commands
    for command in commands:  # each as printed, no flag added
        ran = vcbus_line(command, env)
        assert ran.returncode == 0, (command, ran.stderr.decode())
        assert b"resnet-dist-train" in ran.stdout, (command, ran.stdout.decode())
    assert "Completed" in vcbus_line(commands[0], env).stdout.decode()


def test_demo_keep_given_a_store_as_file_says_what_to_write(tmp_path):
    res = subprocess.run([sys.executable, "-m", "vcbus.cli.main", "demo", "--keep", str(tmp_path)], cwd=ROOT,
                         capture_output=True, timeout=60)
    assert res.returncode == 2 and f"the store to keep is --keep --data-dir {tmp_path}".encode() in res.stderr


def test_make_run_ends_with_the_path_line_and_keeps_the_bus(tmp_path):
    env = clean_env(tmp_path)
    res = subprocess.run(["make", "-s", "-o", ".venv/.installed", "run"], cwd=ROOT, capture_output=True, timeout=180,
                         env=env)
    out = res.stdout.decode()
    assert res.returncode == 0, res.stderr.decode()
    [line] = [x.strip() for x in out.splitlines() if x.strip().startswith("export PATH=")]
    assert line == f'export PATH="{ROOT / ".venv" / "bin"}:$PATH"'
    # the line, pasted into a shell without the venv on PATH, makes `vcbus` the README's next commands' vcbus
    bare = {**env, "PATH": "/usr/bin:/bin"}
    shell = subprocess.run(["sh", "-c", f"{line} && cd {shlex.quote(str(tmp_path))} && vcbus status"],
                           capture_output=True, timeout=120, env=bare)
    assert shell.returncode == 0, shell.stderr.decode()
    assert shell.stdout.decode().splitlines()[1].split()[:3] == ["default", "resnet-dist-train", "Completed"]
