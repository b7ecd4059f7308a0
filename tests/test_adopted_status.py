"""A status the log already shows is the status reported, in replay and on the bus.

Nearly every recorded `kubectl get -w` log starts with jobs that already have a
status. vcbus adopts it (a restarted controller); when it then writes nothing,
the status projection must still report the adopted status, not `null`.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from tests.fixtures_nats import decide_and_project, publish_file
from tests.test_replay_cli import SEED, records, vcbus, write_jsonl
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.projector import live_buckets

KEY = "default/resnet-dist-train"
COUNTERS = ("minAvailable", "running", "pending", "succeeded", "failed", "retryCount", "version", "taskStatusCount")


def running_job_log(tmp_path: pathlib.Path) -> tuple[pathlib.Path, dict]:
    """A log of one record: the seed job, already Running after its restart (retryCount 1)."""
    recs = records(SEED)
    rec = next(
        r
        for r in recs
        if r["object"]["kind"] == "Job"
        and (r["object"].get("status") or {}).get("state", {}).get("phase") == "Running"
        and r["object"]["status"].get("retryCount") == 1
    )
    rec["type"] = "ADDED"
    return write_jsonl(tmp_path / "running.jsonl", [rec]), rec["object"]["status"]


def assert_is_recorded(status: dict | None, recorded: dict) -> None:
    assert status is not None
    assert status["state"]["phase"] == "Running" == recorded["state"]["phase"]
    assert status["state"].get("lastTransitionTime") == recorded["state"]["lastTransitionTime"]
    for field in COUNTERS:
        assert status.get(field) == recorded.get(field), field
    assert recorded["running"] == 3 and recorded["retryCount"] == 1  # the log is what this test needs


def test_replay_json_reports_the_adopted_status_when_vcbus_writes_none(tmp_path):
    log, recorded = running_job_log(tmp_path)
    res = vcbus("replay", "--json", str(log))
    assert res.returncode == 0, res.stderr.decode()
    (job,) = json.loads(res.stdout)["jobs"]
    assert job["adopted"]["phase"] == "Running"
    assert job["history"] == []  # vcbus decided no phase change ...
    assert [c["command"] for c in job["commands"]] == ["CreatePodGroup"]  # no status write
    assert_is_recorded(job["status"], recorded)  # ... and still reports what the log showed


def test_replay_text_prints_the_adopted_phase(tmp_path):
    log, _ = running_job_log(tmp_path)
    res = vcbus("replay", str(log))
    assert res.returncode == 0, res.stderr.decode()
    out = res.stdout.decode()
    assert 'phase ""' not in out
    final = out[out.index("final status"):]
    phase_line = next(line for line in final.splitlines() if line.startswith("phase"))
    assert phase_line.split() == ["phase", "Running"]
    retry_line = next(line for line in final.splitlines() if line.startswith("retryCount"))
    assert retry_line.split() == ["retryCount", "1"]


def test_a_recreated_job_without_a_status_does_not_keep_the_old_one(tmp_path):
    log, _ = running_job_log(tmp_path)
    rec = json.loads(log.read_text())
    gone = dict(rec, type="DELETED")
    fresh = json.loads(json.dumps(rec))
    fresh["object"].pop("status")
    fresh["object"]["metadata"]["uid"] = "00000000-0000-4000-8000-00000000000f"
    fresh["object"]["metadata"]["resourceVersion"] = "999999"
    log2 = write_jsonl(tmp_path / "recreated.jsonl", [rec, gone, fresh])
    res = vcbus("replay", "--json", str(log2))
    assert res.returncode == 0, res.stderr.decode()
    (job,) = json.loads(res.stdout)["jobs"]
    # the new incarnation starts over: Pending with no retries, never the old Running/retryCount 1
    assert job["status"]["state"]["phase"] == "Pending"
    assert job["status"].get("retryCount", 0) == 0


@pytest.mark.nats
async def test_the_bus_status_bucket_holds_the_adopted_status(bus_settings, tmp_path):
    log, recorded = running_job_log(tmp_path)
    await publish_file(bus_settings, log)
    await decide_and_project(bus_settings)
    async with open_bus(bus_settings) as bus:
        buckets = await live_buckets(bus)
    key = s.kv_key(KEY)
    assert_is_recorded(json.loads(buckets[s.STATUS_BUCKET][key]), recorded)
    history = json.loads(buckets[s.HISTORY_BUCKET][key])
    assert history["history"] == [] and history["adopted"]["phase"] == "Running"
    assert_is_recorded(history["status"], recorded)
