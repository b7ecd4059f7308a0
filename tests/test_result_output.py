"""`-o json|yaml` on the bus's action commands (issue 29; vcbus/cli/results.py): `vcbus publish`,
`vcbus log import`, `vcbus projections rebuild|verify` and `vcbus bus repartition` print what they did
as one typed document (`kind` Published, Rebuilt, Verified, Repartitioned), and without `-o` the
same line as before. Run as a user runs them, against a real nats-server.
"""

from __future__ import annotations

import json
import pathlib

import pytest
import yaml

from tests.fixtures_nats import vcbus_cli
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.decider import Decider

pytestmark = pytest.mark.nats

ROOT = pathlib.Path(__file__).resolve().parents[1]
LOG = ROOT / "examples" / "retries-exhausted.jsonl"


def ok(*args: str) -> str:
    res = vcbus_cli(*args)
    assert res.returncode == 0, res.stderr.decode()
    assert res.stderr == b"", res.stderr.decode()  # the document is the whole answer
    return res.stdout.decode()


def records(path: pathlib.Path) -> int:
    return sum(1 for line in path.read_text().splitlines() if line.strip())


def test_publish_and_log_import_print_what_they_stored(bus_settings, tmp_path):
    url = bus_settings.nats_url
    first = json.loads(ok("publish", str(LOG), "-o", "json", "--nats", url))
    n = first["published"]
    assert first == {"kind": "Published", "source": str(LOG), "stream": s.K8S_STREAM, "published": n,
                     "firstSeq": 1, "lastSeq": n, "duplicates": 0, "skipped": records(LOG) - n}
    again = yaml.safe_load(ok("publish", str(LOG), "-o", "yaml", "--nats", url))  # stored once: all already there
    assert again == {**first, "published": 0, "firstSeq": None, "lastSeq": None, "duplicates": n}
    plain = vcbus_cli("publish", str(LOG), "--nats", url)  # the line, as before
    assert plain.returncode == 0 and plain.stdout == b""
    assert plain.stderr.decode().startswith(f"published 0 records from {LOG} to {s.K8S_STREAM}; {n} already there")

    exported = tmp_path / "bus.jsonl"
    assert vcbus_cli("log", "export", "-o", str(exported), "--nats", url).returncode == 0
    appended = json.loads(ok("log", "import", str(exported), "--append", "-o", "json", "--nats", url))
    assert appended["kind"] == "Published" and appended["source"] == str(exported)
    assert appended["published"] + appended["duplicates"] + appended["skipped"] == records(exported)


async def test_projections_rebuild_and_verify_print_their_outcome(bus_settings):
    url = bus_settings.nats_url
    assert vcbus_cli("publish", str(LOG), "--nats", url).returncode == 0
    async with open_bus(bus_settings) as bus:
        await Decider(bus).run(until_idle=True)
    rebuilt = json.loads(ok("projections", "rebuild", "-o", "json", "--nats", url))
    assert rebuilt["kind"] == "Rebuilt" and rebuilt["jobs"] == 1 and rebuilt["position"] > 0
    assert rebuilt["buckets"] == [s.STATUS_BUCKET, s.HISTORY_BUCKET] and rebuilt["stream"] == s.JOBS_STREAM
    verified = yaml.safe_load(ok("projections", "verify", "-o", "yaml", "--nats", url))
    assert verified == {"kind": "Verified", "buckets": [s.STATUS_BUCKET, s.HISTORY_BUCKET], "stream": s.JOBS_STREAM,
                        "equal": True, "differences": []}

    async with open_bus(bus_settings) as bus:  # a view that no longer equals the refold
        kv = await bus.js.key_value(s.STATUS_BUCKET)
        await kv.put("default.flaky", b'{"state":{"phase":"Running"}}')
    res = vcbus_cli("projections", "verify", "-o", "json", "--nats", url)
    assert res.returncode == 1
    differs = json.loads(res.stdout)
    assert differs["equal"] is False and any("default.flaky" in d for d in differs["differences"])
    assert res.stderr.decode() == f"error: {len(differs['differences'])} difference(s) between the KV views and VCBUS_JOBS\n"


async def test_bus_repartition_prints_what_it_did(bus_settings):
    url = bus_settings.nats_url
    assert vcbus_cli("publish", str(LOG), "--nats", url).returncode == 0
    async with open_bus(bus_settings) as bus:
        await Decider(bus).run(until_idle=True)
    same = json.loads(vcbus_cli("bus", "repartition", "1", "-o", "json", "--nats", url).stdout)
    assert same == {"kind": "Repartitioned", "stream": s.K8S_STREAM, "partitions": 1, "records": same["records"],
                    "changed": False}
    res = vcbus_cli("bus", "repartition", "2", "-o", "yaml", "--nats", url)
    assert res.returncode == 0, res.stderr.decode()
    done = yaml.safe_load(res.stdout)  # its progress lines stay on stderr
    assert done == {"kind": "Repartitioned", "stream": s.K8S_STREAM, "partitions": 2, "records": same["records"],
                    "changed": True}
