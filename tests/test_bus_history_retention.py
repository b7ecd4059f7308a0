"""The projector keeps a deleted job's history in KV, not in memory, and drops it after the retention.

A fold that never forgets (`verify`, `rebuild`) must write exactly what the
forgetting live projector wrote: after deletions, after a job of the same name
comes back (its stored entry is the base of the new one), after a restart that
refolds across both, and with a retention that has dropped some keys.
"""

from __future__ import annotations

import json

import pytest

from statemachines import outputs as o
from statemachines.engine import Engine
from statemachines.model.records import decode
from statemachines.model.timefmt import parse
from tests.fixtures_nats import decide_and_project, publish_file
from tests.poison_logs import seed_records
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.projector import live_buckets, verify
from vcbus.replaying import replay_stream

pytestmark = pytest.mark.nats


def history(buckets) -> dict[str, dict]:
    return {s.job_of_key(k): json.loads(v) for k, v in buckets[s.HISTORY_BUCKET].items() if not k.startswith("_")}


async def test_deleted_jobs_leave_memory_and_their_history_stays_in_kv(bus_settings, many_jobs_log):
    await publish_file(bus_settings, many_jobs_log)
    _, projector = await decide_and_project(bus_settings)
    views = projector.views
    assert views.history.jobs == {} and views.statuses.statuses == {} and views.timers == {}
    assert len(views.deleted_jobs.evicted) == 30 and len(views.deleted_jobs.deleted) == 30
    async with open_bus(bus_settings) as bus:
        stored = history(await live_buckets(bus))
        assert await verify(bus) == []  # a fold that keeps everything in memory writes the same
    assert len(stored) == 30 and all(entry["deleted"] for entry in stored.values())
    with open(many_jobs_log, "rb") as fh:
        report = json.loads(json.dumps(replay_stream(fh, str(many_jobs_log), skip_invalid=True).report()))
    first = report["jobs"][0]
    key = f"{first['namespace']}/{first['name']}"
    assert stored[key]["history"] == first["history"] and stored[key]["actions"] == first["actions"]


def deletion_times(path) -> tuple[dict[str, int], int]:
    engine, deleted, last = Engine(timers="recorded"), {}, 0
    for i, line in enumerate(path.read_bytes().splitlines(), 1):
        for out in engine.apply(i, decode(line)):
            last = max(last, parse(out.time))
            if isinstance(out, o.JobDeleted):
                deleted[out.job] = parse(out.time)
    return deleted, last


async def test_the_retention_drops_the_history_key_of_jobs_deleted_long_enough_ago(bus_settings, many_jobs_log):
    deleted, last = deletion_times(many_jobs_log)
    retention = 60.0
    gone = {job for job, when in deleted.items() if when + retention <= last}
    assert 0 < len(gone) < len(deleted)  # the log's waves: the early ones expire, the last one stays
    await publish_file(bus_settings, many_jobs_log)
    async with open_bus(bus_settings) as bus:
        from tests.fixtures_nats import FROZEN_EARLY
        from vcbus.bus.decider import Decider
        from vcbus.bus.projector import Projector

        await Decider(bus, clock=lambda: FROZEN_EARLY).run(until_idle=True)
        projector = Projector(bus, history_retention=retention)
        await projector.run(until_idle=True)
        stored = history(await live_buckets(bus))
        assert await verify(bus, history_retention=retention) == []
    assert set(stored) == set(deleted) - gone
    assert set(projector.views.deleted_jobs.deleted) == set(deleted) - gone


def seed_with(*extra: dict) -> list[bytes]:
    return [json.dumps(r).encode() for r in seed_records()] + [json.dumps(r).encode() for r in extra]


def job_again(rec: dict, rtype: str, rv: int, *, uid: str | None = None, when: str) -> dict:
    new = json.loads(json.dumps(rec))
    new["type"] = rtype
    meta = new["object"]["metadata"]
    meta["resourceVersion"] = str(rv)
    if uid:
        meta["uid"] = uid
        meta["creationTimestamp"] = when
        new["object"].pop("status", None)
    new["time"] = when
    return new


def comes_back() -> tuple[str, list[list[bytes]]]:
    """The seed log's last job deleted at its end, created again under the same name, then changed:
    the job, and the log's lines in those three parts."""
    recs = seed_records()
    last_job = [r for r in recs if r["object"]["kind"] == "Job"][-1]
    rv = 10_000_000
    gone = job_again(last_job, "DELETED", rv, when="2026-11-30T09:00:00Z")
    back = job_again(last_job, "ADDED", rv + 1, uid="uid-second-life", when="2026-11-30T09:05:00Z")
    later = job_again(back, "MODIFIED", rv + 2, when="2026-11-30T09:06:00Z")
    later["object"]["spec"]["minAvailable"] = 1
    job = f"{last_job['object']['metadata']['namespace']}/{last_job['object']['metadata']['name']}"
    return job, [seed_with(gone), [json.dumps(back).encode()], [json.dumps(later).encode()]]


async def test_a_job_that_comes_back_after_being_forgotten_continues_its_stored_history(bus_settings, tmp_path):
    job, parts = comes_back()
    for i, lines in enumerate(parts):
        (tmp_path / f"{i}.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    await publish_file(bus_settings, tmp_path / "0.jsonl")
    _, first = await decide_and_project(bus_settings)
    assert job in first.views.deleted_jobs.evicted and job not in first.views.history.jobs
    await publish_file(bus_settings, tmp_path / "1.jsonl")
    _, second = await decide_and_project(bus_settings)  # a fresh projector: refolds, then the job comes back live
    assert job in second.views.deleted_jobs.bases
    async with open_bus(bus_settings) as bus:
        assert await verify(bus) == []
    await publish_file(bus_settings, tmp_path / "2.jsonl")
    await decide_and_project(bus_settings)  # the return is now inside the refold
    async with open_bus(bus_settings) as bus:
        assert await verify(bus) == []
        stored = history(await live_buckets(bus))[job]
    whole = tmp_path / "all.jsonl"
    whole.write_bytes(b"".join((tmp_path / f"{i}.jsonl").read_bytes() for i in range(3)))
    with open(whole, "rb") as fh:
        report = json.loads(json.dumps(replay_stream(fh, str(whole), skip_invalid=True).report()))
    (want,) = [j for j in report["jobs"] if f"{j['namespace']}/{j['name']}" == job]
    assert stored["uid"] == "uid-second-life" and stored["deleted"] is False
    assert stored["history"] == want["history"] and stored["actions"] == want["actions"]
    times = [h["time"] for h in stored["history"]]
    assert min(times) < "2026-11-30T09:00:00Z" <= "2026-11-30T09:05:00Z" <= max(times)  # both lives, in one entry


def test_the_retention_comes_from_the_environment(monkeypatch):
    from vcbus.bus.projector import Views
    from vcbus.settings import BusSettings, from_environment

    assert BusSettings().history_retention == 7 * 86400
    monkeypatch.setenv("VCBUS_HISTORY_RETENTION", "12h")
    assert from_environment().history_retention == 12 * 3600
    monkeypatch.setenv("VCBUS_HISTORY_RETENTION", "0")
    assert from_environment().history_retention == 0  # forever: the projector gets None
    assert Views(retention=None).deleted_jobs.expired() == []
