"""`vcbus publish` and `vcbus log import` on a real nats-server: the whole input is checked first, all or nothing.

Each bad input holds good records *before* the bad one, so a publisher that
checked as it went would store those; the stream must stay empty. The bad
records are the issue's: a 50 MB record (over the server's max payload, which vcbus
sets to 8 MB) and TIMER records without a usable job key.
"""

from __future__ import annotations

import json

import pytest

from tests.fixtures_nats import vcbus_cli
from tests.poison_logs import seed_records
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.streams import last_seq

pytestmark = pytest.mark.nats

TIME = "2026-11-30T08:20:00Z"


def big_record() -> dict:
    rec = seed_records()[1]
    rec = json.loads(json.dumps(rec))
    rec["object"]["metadata"]["annotations"] = {"blob": "x" * (50 * 1024 * 1024)}
    return rec


def timer(job: object) -> dict:
    spec = {"id": "t-1", "due": TIME}
    if job is not None:
        spec["job"] = job
    return {"type": "TIMER", "time": TIME, "timer": spec}


BAD = {
    "50MB-record": (big_record, "bytes, more than the server's max payload of "),
    "timer-without-job": (lambda: timer(None), "invalid TIMER record"),
    "timer-bad-job-key": (lambda: timer("no-slash"), "cannot be published: not a job key (NAMESPACE/NAME): 'no-slash'"),
}


def write_log(tmp_path, bad: dict):
    lines = [json.dumps(r) for r in seed_records()[:5]] + [json.dumps(bad)] + [json.dumps(r) for r in seed_records()[5:]]
    path = tmp_path / "log.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


async def stored(settings) -> int:
    async with open_bus(settings) as bus:
        return await last_seq(bus.js, s.K8S_STREAM)


@pytest.mark.parametrize("name", sorted(BAD))
@pytest.mark.parametrize("command", [("publish",), ("log", "import")])
async def test_a_bad_record_anywhere_publishes_nothing(bus_settings, tmp_path, name, command):
    make, message = BAD[name]
    path = write_log(tmp_path, make())
    res = vcbus_cli(*command, str(path), "--nats", bus_settings.nats_url)
    err = res.stderr.decode()
    assert res.returncode == 2, err
    assert "Traceback" not in err
    assert f"{path}:6: record 6" in err and message in err
    assert err.count("\n") == 1
    assert await stored(bus_settings) == 0


async def test_the_same_log_without_the_bad_record_is_published_whole(bus_settings, tmp_path):
    path = tmp_path / "good.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in seed_records()) + "\n")
    res = vcbus_cli("publish", str(path), "--nats", bus_settings.nats_url)
    assert res.returncode == 0, res.stderr
    assert await stored(bus_settings) == len(seed_records())
