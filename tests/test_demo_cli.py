"""`vcbus demo` (the README's quick start): the whole bus once, on embedded defaults."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.nats
ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_demo_runs_the_seed_job_through_an_embedded_bus(tmp_path):
    res = subprocess.run(
        [sys.executable, "-m", "vcbus.cli.main", "demo", "--keep", str(tmp_path / "store")],
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
    page = pathlib.Path(out.rsplit("timeline page (open it in a browser): ", 1)[1].strip())
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
