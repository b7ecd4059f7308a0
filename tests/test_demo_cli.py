"""`vcbus demo` (the README's quick start): the whole bus once, on embedded defaults."""

from __future__ import annotations

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
    assert "Completing -> Completed" in out
    row = next(line for line in out.splitlines() if line.startswith("default"))
    assert row.split()[:3] == ["default", "resnet-dist-train", "Completed"] and row.split()[-1] == "1"
    # the kept store is a real JetStream store other commands can read
    status = subprocess.run(
        [sys.executable, "-m", "vcbus.cli.main", "status", "--data-dir", str(tmp_path / "store"), "-o", "json",
         "default/resnet-dist-train"],
        cwd=ROOT, capture_output=True, timeout=60,
    )
    assert status.returncode == 0, status.stderr.decode()
    assert b'"Completed"' in status.stdout


def test_demo_of_a_missing_file_is_a_clear_error(tmp_path):
    res = subprocess.run([sys.executable, "-m", "vcbus.cli.main", "demo", str(tmp_path / "nope.log")],
                         cwd=ROOT, capture_output=True, timeout=60)
    assert res.returncode == 2 and b"no such file" in res.stderr and b"Traceback" not in res.stderr
