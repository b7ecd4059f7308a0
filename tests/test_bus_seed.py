"""The seed job end to end on a real server: published, decided, projected; what users and outside systems see."""

from __future__ import annotations

import json

import pytest

from tests.fixtures_nats import decide_and_project, publish_file, vcbus_cli
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.projector import live_buckets
from vcbus.replaying import replay_stream

pytestmark = pytest.mark.nats

JOB = "default/resnet-dist-train"
PHASES = [
    ("", "Pending"),
    ("Pending", "Running"),
    ("Running", "Restarting"),
    ("Restarting", "Pending"),
    ("Pending", "Running"),
    ("Running", "Completing"),
    ("Completing", "Completed"),
]


async def test_the_seed_job_completes_with_one_retry_as_vcbus_status_shows(bus_settings, seed_log):
    url = bus_settings.nats_url
    res = vcbus_cli("publish", str(seed_log), "--nats", url)
    assert res.returncode == 0, res.stderr.decode()
    assert b"published 64 records" in res.stderr and b"(seq 1..64)" in res.stderr
    res = vcbus_cli("up", "--once", "--nats", url)
    assert res.returncode == 0, res.stderr.decode()
    assert b"decided 64 records" in res.stderr

    res = vcbus_cli("status", JOB, "-o", "json", "--nats", url)
    assert res.returncode == 0, res.stderr.decode()
    job = json.loads(res.stdout)
    assert job["kind"] == "Job" and job["metadata"] == {"namespace": "default", "name": "resnet-dist-train"}
    assert job["status"]["state"]["phase"] == "Completed"
    assert job["status"]["retryCount"] == 1

    res = vcbus_cli("status", "--nats", url)
    assert res.returncode == 0
    header, row = res.stdout.decode().splitlines()
    assert header.split() == ["NAMESPACE", "NAME", "STATUS", "MINAVAILABLE", "RUNNINGS", "RETRIES"]
    assert row.split() == ["default", "resnet-dist-train", "Completed", "3", "0", "1"]


async def test_the_bus_decides_exactly_what_a_replay_of_the_file_decides(bus_settings, seed_log):
    await publish_file(bus_settings, seed_log)
    await decide_and_project(bus_settings)
    with open(seed_log, "rb") as fh:
        report = replay_stream(fh, str(seed_log)).report()
    (expected,) = report["jobs"]
    async with open_bus(bus_settings) as bus:
        buckets = await live_buckets(bus)
    status = json.loads(buckets[s.STATUS_BUCKET]["default.resnet-dist-train"])
    history = json.loads(buckets[s.HISTORY_BUCKET]["default.resnet-dist-train"])
    assert status == expected["status"]
    assert [(h["from"], h["to"]) for h in history["history"]] == PHASES
    expected.pop("commands")  # VCBUS_CMDS holds those; the history view folds VCBUS_JOBS only
    assert history == json.loads(json.dumps(expected))


async def test_events_tail_shows_every_phase_change_in_order(bus_settings, seed_log):
    await publish_file(bus_settings, seed_log)
    await decide_and_project(bus_settings)
    res = vcbus_cli(
        "events", "tail", "--job", JOB, "--type", "phase.changed", "--since", "1", "--no-follow", "--json",
        "--nats", bus_settings.nats_url,
    )
    assert res.returncode == 0, res.stderr.decode()
    events = [json.loads(line) for line in res.stdout.splitlines()]
    assert [(e["data"].get("from", ""), e["data"]["to"]) for e in events] == PHASES
    assert all(e["type"] == "sh.volcano.job.phase.changed.v1" and e["subject"] == JOB for e in events)
    assert [e["sequence"] for e in events] == sorted(e["sequence"] for e in events)
