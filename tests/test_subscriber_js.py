"""The JavaScript subscriber example (examples/subscribers/js) reads vcbus's CloudEvents from a real nats-server.

The seed job's log is published and decided by the real CLI (`vcbus publish`, then
`vcbus up --once --source ...`), so the events carry the configured source. The
example, run with Node and the `nats` package (`make js-example` installs it), must
print exactly the CloudEvents `vcbus events tail --json` prints for the same filter:
same ids, source, types, dataschema and data. Without node or the package the test
skips saying how to get them, or fails when VCBUS_REQUIRE_K8S=1 (CI).
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess

import pytest

from tests.fixtures_nats import SEED_LOG, vcbus_cli

pytestmark = [pytest.mark.nats, pytest.mark.slow]

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "subscribers" / "js"
SOURCE = "/vcbus/clusters/test-eu-1"


def require_node() -> str:
    node = shutil.which("node")
    missing = None
    if node is None:
        missing = "no node on PATH (the JavaScript subscriber example needs Node 18+)"
    elif not (EXAMPLE / "node_modules" / "nats" / "package.json").exists():
        missing = f"the example's npm dependency is not installed (run `make js-example`, or `npm ci` in {EXAMPLE})"
    if missing is None:
        return node
    if any(os.environ.get(v, "") not in ("", "0", "false", "no") for v in ("VCBUS_REQUIRE_K8S", "VCBUS_REQUIRE_NODE")):
        pytest.fail(f"{missing}, and VCBUS_REQUIRE_K8S/VCBUS_REQUIRE_NODE say this test must run", pytrace=False)
    pytest.skip(missing)


def run_ok(*args: str, env: dict | None = None) -> str:
    res = vcbus_cli(*args, env=env)
    assert res.returncode == 0, f"vcbus {' '.join(args)}: {res.stderr.decode()}"
    return res.stdout.decode()


def node_example(node: str, url: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([node, "subscriber.mjs", *args], cwd=EXAMPLE, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "NATS_URL": url})


def test_js_subscriber_reads_the_cloudevents_vcbus_publishes(bus_settings):
    node = require_node()
    url = bus_settings.nats_url
    run_ok("publish", str(SEED_LOG), "--nats", url)
    run_ok("up", "--once", "--nats", url, "--source", SOURCE)
    job = "default/resnet-dist-train"
    expected = [json.loads(line) for line in run_ok(
        "events", "tail", "--nats", url, "--job", job, "--type", "phase.changed", "--json", "--no-follow").splitlines()]
    assert len(expected) >= 3 and expected[-1]["data"]["to"] == "Completed"

    res = node_example(node, url, "--job", job, "--json")
    assert res.returncode == 0, res.stderr
    got = [json.loads(line) for line in res.stdout.splitlines()]
    assert got == expected
    for ev in got:
        assert ev["source"] == SOURCE and ev["type"] == "sh.volcano.job.phase.changed.v1"
        assert ev["datacontenttype"] == "application/json"
        assert ev["dataschema"] == "urn:vcbus:schema:job.phase.changed.v1"
        assert (ROOT / "docs" / "schemas" / "job.phase.changed.v1.json").exists()

    text = node_example(node, url)  # every job, human lines, stops at the end of what is stored
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert len(lines) == len(expected) and lines[-1].endswith(f"({SOURCE} {expected[-1]['id']})")
    assert " Completing -> Completed [" in lines[-1]

    bad = node_example(node, url, "--job", "no-namespace")
    assert bad.returncode == 1 and bad.stderr.strip() == "error: --job no-namespace: expected NAMESPACE/NAME"


def test_source_is_a_uri_reference(bus_settings):
    res = vcbus_cli("up", "--once", "--nats", bus_settings.nats_url, "--source", "two words")
    assert res.returncode == 2
    assert res.stderr.decode().strip() == (
        "error: --source 'two words': expected a URI reference without spaces, e.g. /vcbus/clusters/prod")
