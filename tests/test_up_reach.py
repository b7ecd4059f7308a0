"""`vcbus up` against an API server that is not there: one line per retry, /readyz not ready, exit 4."""

from __future__ import annotations

import pathlib
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from tests.k8s_env import free_port

VCBUS = str(pathlib.Path(sys.executable).parent / "vcbus")
pytestmark = [pytest.mark.nats, pytest.mark.slow]


def kubeconfig(tmp_path: pathlib.Path) -> pathlib.Path:
    path = tmp_path / "kubeconfig"
    path.write_text(f"""apiVersion: v1
kind: Config
clusters:
- cluster: {{server: "https://127.0.0.1:{free_port()}"}}
  name: gone
contexts:
- context: {{cluster: gone, user: u}}
  name: gone
current-context: gone
users:
- name: u
  user: {{token: t}}
""")
    return path


def test_an_api_server_never_reached_exits_4_after_the_connect_timeout(tmp_path):
    proc = subprocess.run(
        [VCBUS, "up", "--kubeconfig", str(kubeconfig(tmp_path)), "--data-dir", str(tmp_path / "data"),
         "--connect-timeout", "4s", "--metrics-addr", ""],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 4, proc.stderr[-2000:]
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("error: the API server https://127.0.0.1:") and "--connect-timeout 4s" in lines[-1]
    tries = [line for line in lines if "is not reachable" in line]
    assert tries and all("failed, next in" in line and "Connection refused" in line for line in tries)
    assert "Traceback" not in proc.stderr and "urllib3" not in proc.stderr


def test_readyz_says_the_api_server_is_not_reached_while_it_waits(tmp_path):
    addr = f"127.0.0.1:{free_port()}"
    proc = subprocess.Popen(
        [VCBUS, "up", "--kubeconfig", str(kubeconfig(tmp_path)), "--data-dir", str(tmp_path / "data"),
         "--connect-timeout", "0", "--metrics-addr", addr],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline, said = time.monotonic() + 60, ""
        while "the API server is not reached yet" not in said:
            assert time.monotonic() < deadline, f"/readyz never said so: {said!r}"
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                urllib.request.urlopen(f"http://{addr}/readyz", timeout=5)
            except urllib.error.HTTPError as err:  # 503: not ready, and why
                said = err.read().decode()
            except OSError:
                pass  # not listening yet
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
