"""docs/cli.md's exit-code table, case by case, for the commands that once broke it (issue 29).

Each case runs `vcbus` as a user does (a real subprocess, real sockets, real signals,
a real nats-server for the bus commands): a taken port is bad input (2) whichever
command is given it, as is a --sync-interval that does not parse; a cluster `vcbus record` cannot reach is "the cluster is
unavailable" (4), as for every other cluster command; `vcbus events tail` and
`vcbus replay --follow` stopped by Ctrl-C or SIGTERM exit 130 (interrupted), the
replay after printing its report of what it read.
"""

from __future__ import annotations

import json
import pathlib
import signal
import socket
import subprocess
import sys

import pytest

from tests.fixtures_nats import decide_and_project, publish_file
from tests.test_replay_cli import SEED, records
from tests.test_replay_live import DEADLINE, Output, expected_rows, interruptible, row_of
from tests.test_up_reach import kubeconfig  # of an API server that is not there
from vcbus import exitcodes

ROOT = pathlib.Path(__file__).resolve().parents[1]


def vcbus(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "vcbus.cli.main", *args], cwd=ROOT, preexec_fn=interruptible,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vcbus.cli.main", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def one_error_line(res: subprocess.CompletedProcess) -> str:
    lines = res.stderr.strip().splitlines()
    assert lines and lines[-1].startswith("error: ") and "Traceback" not in res.stderr, res.stderr
    return lines[-1]


@pytest.fixture
def taken_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


@pytest.mark.slow
def test_a_taken_port_of_the_embedded_server_is_bad_input(tmp_path, taken_port):
    res = run("up", "--once", "--port", str(taken_port), "--data-dir", str(tmp_path / "data"), "--metrics-addr", "")
    assert res.returncode == exitcodes.USAGE, res.stderr
    assert f"port {taken_port} on 127.0.0.1 is taken" in one_error_line(res)


def test_a_sync_interval_that_does_not_parse_is_bad_input(tmp_path):
    res = run("up", "--once", "--sync-interval", "bogus", "--data-dir", str(tmp_path / "data"))
    assert res.returncode == exitcodes.USAGE, res.stderr
    assert "sync interval 'bogus'" in one_error_line(res)


def test_record_of_an_unreachable_cluster_is_the_cluster_unavailable(tmp_path):
    res = run("record", "-A", "--kubeconfig", str(kubeconfig(tmp_path)), "-o", str(tmp_path / "w.log"))
    assert res.returncode == exitcodes.CLUSTER, res.stderr
    assert "cannot reach the Kubernetes API server at https://127.0.0.1:" in one_error_line(res)
    assert not (tmp_path / "w.log").exists()


@pytest.mark.nats
async def test_events_tail_stopped_by_ctrl_c_exits_130(bus_settings, seed_log):
    await publish_file(bus_settings, seed_log)
    await decide_and_project(bus_settings)
    proc = vcbus("events", "tail", "--since", "1", "--nats", bus_settings.nats_url)
    out = Output(proc.stdout)
    try:
        out.wait_for(lambda line: bool(line.strip()), "a stored event")
        proc.send_signal(signal.SIGINT)  # following: only Ctrl-C ends it
        assert proc.wait(timeout=DEADLINE) == exitcodes.INTERRUPTED, proc.stderr.read().decode()
    finally:
        proc.kill()
        proc.wait()
    assert b"Traceback" not in proc.stderr.read()


def test_replay_follow_stopped_by_sigterm_reports_what_it_read_and_exits_130(tmp_path):
    recs = records(SEED)
    rows = expected_rows()
    first = min(rows)
    log = tmp_path / "watch.log"
    log.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in recs[:first]))
    proc = vcbus("replay", "--follow", str(log))
    out = Output(proc.stdout)
    try:
        out.wait_for(row_of(first, rows[first][0]), "the first row")
        proc.send_signal(signal.SIGTERM)  # as `kill`, `timeout` or a pod's stop would
        tail = out.rest()
        assert proc.wait(timeout=DEADLINE) == exitcodes.INTERRUPTED, proc.stderr.read().decode()
    finally:
        proc.kill()
        proc.wait()
    assert f"{first} records read" in tail and "interrupted" in tail and "final status" in tail
    assert b"Traceback" not in proc.stderr.read()


@pytest.mark.nats
async def test_up_once_stopped_by_ctrl_c_before_it_is_done_exits_130(bus_settings, many_jobs_log):
    """`up --once` has an end, so it is not a server: stopped before it decided everything is 130, not 0."""
    await publish_file(bus_settings, many_jobs_log)  # 30 jobs, some 4,000 records: seconds to decide
    proc = vcbus("up", "--once", "--nats", bus_settings.nats_url, "--metrics-addr", "")
    err = Output(proc.stderr)
    try:
        err.wait_for(lambda line: "running decider, projector" in line, "the services started")
        assert proc.poll() is None, "up --once was done before the signal: the log is too small for this test"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=DEADLINE) == exitcodes.INTERRUPTED
        rest = err.rest()
    finally:
        proc.kill()
        proc.wait()
    assert "interrupted before the streams were decided and projected to their end" in rest
    assert "Traceback" not in rest
