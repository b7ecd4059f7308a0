"""The exit codes: docs/cli.md's table is vcbus/exitcodes.py's, the CLI uses those constants, and nothing else.

Three checks keep the documentation from drifting: the table in docs/cli.md is
exactly `exitcodes.markdown_table()`; every exit code written as a number anywhere in
vcbus/ (`exit_code=N`, `SystemExit(N)`, `exit_code = N`) is in the table; and the CLI
really exits with each documented failure code for the failure it names (run as a
user runs it, against a closed port for the bus and for the cluster).
"""

from __future__ import annotations

import pathlib
import re
import socket
import subprocess
import sys

import click
import yaml

from vcbus import exitcodes
from vcbus.bus.errors import BusError
from vcbus.cli.kubecli import ClusterError, NotFound
from vcbus.errors import UserError

ROOT = pathlib.Path(__file__).resolve().parents[1]
LITERAL = re.compile(r"(?:exit_code\s*=\s*|SystemExit\()\s*(\d+)")


def vcbus(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vcbus.cli.main", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_docs_table_is_the_module_table():
    doc = (ROOT / "docs" / "cli.md").read_text()
    assert exitcodes.markdown_table() in doc, "docs/cli.md: paste vcbus.exitcodes.markdown_table() over the table"
    rows = [line for line in doc.splitlines() if re.match(r"^\| \d+ \|", line)]
    assert [int(r.split("|")[1]) for r in rows] == [c for c, _, _ in exitcodes.TABLE]


def test_the_cli_uses_the_constants():
    assert UserError("x").exit_code == exitcodes.USAGE
    assert click.UsageError("x").exit_code == exitcodes.USAGE  # click's own usage errors agree
    assert BusError("x").exit_code == exitcodes.BUS
    assert ClusterError("x").exit_code == exitcodes.CLUSTER
    assert NotFound("x").exit_code == exitcodes.NEGATIVE


def test_no_exit_code_outside_the_table():
    found = {}
    for path in (ROOT / "vcbus").rglob("*.py"):
        for m in LITERAL.finditer(path.read_text()):
            found.setdefault(int(m.group(1)), []).append(str(path.relative_to(ROOT)))
    assert found, "the pattern finds the literal exit codes that exist today"
    stray = {code: where for code, where in found.items() if code not in exitcodes.CODES}
    assert not stray, f"exit codes missing from vcbus/exitcodes.py TABLE (and docs/cli.md): {stray}"


def test_each_failure_exits_with_its_documented_code(tmp_path):
    assert vcbus("status", "--no-such-option").returncode == exitcodes.USAGE
    res = vcbus("validate", str(tmp_path / "missing.yaml"))
    assert res.returncode == exitcodes.USAGE and res.stderr.startswith("error: ")
    res = vcbus("status", "--nats", f"nats://127.0.0.1:{closed_port()}")
    assert res.returncode == exitcodes.BUS, res.stderr
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{closed_port()}"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    res = vcbus("queue", "list", "--kubeconfig", str(kubeconfig))
    assert res.returncode == exitcodes.CLUSTER, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "cannot reach the API server" in res.stderr
    res = vcbus("replay", str(ROOT / "examples" / "abort-resume.jsonl"), "--job", "default/nope")
    assert res.returncode == exitcodes.NEGATIVE and "does not appear" in res.stderr
