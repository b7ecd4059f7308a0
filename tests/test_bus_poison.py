"""Poison, never a halt, on a real server: bad records are set aside, good jobs complete, retry works."""

from __future__ import annotations

import dataclasses
import json

import pytest
import yaml

from statemachines.model.records import decode
from tests.fixtures_nats import FROZEN_EARLY, vcbus_cli
from tests.poison_logs import CRASH_JOB, crashing_engine, poison_lines, poison_log
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.decider import Decider
from vcbus.bus.projector import Projector, live_buckets
from vcbus.bus.publisher import prepare
from vcbus.bus.scheduling import SchedulerService
from vcbus.bus.streams import last_seq
from vcbus.replaying import replay_stream

pytestmark = pytest.mark.nats

SUBJECTS = {  # where a bad record that cannot be prepared is published (as a buggy bridge would)
    "no-namespace": "vcbus.k8s.job._.flaky",
    "deep": "vcbus.k8s.job.default.deep",
    "invalid-json": "vcbus.k8s.job.default.broken",
}


async def publish_poison_log(settings, tmp_path) -> dict[str, int]:
    """Publish good job A, the poison records, good job B; return the poison records' sequences."""
    log = poison_log(tmp_path / "poison.jsonl")
    bad = {v: k for k, v in poison_lines().items()}
    seqs: dict[str, int] = {}
    async with open_bus(settings) as bus:
        for line in log.read_bytes().splitlines():
            name = bad.get(line)
            if name in SUBJECTS:
                ack = await bus.js.publish(SUBJECTS[name], line, headers={"Nats-Msg-Id": f"bad:{name}"})
            else:
                msg = prepare(line, decode(line))
                assert msg is not None
                ack = await bus.js.publish(msg.subject, msg.body, headers=msg.headers)
            if name is not None:
                seqs[name] = ack.seq
    return seqs


async def run_services(settings) -> tuple[Decider, Projector]:
    async with open_bus(settings) as bus:
        decider = Decider(bus, clock=lambda: FROZEN_EARLY)
        await decider.run(until_idle=True)
        projector = Projector(bus)
        await projector.run(until_idle=True)
    return decider, projector


async def statuses(settings) -> dict[str, dict]:
    async with open_bus(settings) as bus:
        bucket = (await live_buckets(bus))[s.STATUS_BUCKET]
    return {s.job_of_key(k): json.loads(v) for k, v in bucket.items() if not k.startswith("_")}


def poisoned(status: dict) -> list[dict]:
    return [c for c in status.get("conditions") or () if c.get("type") == "Poisoned"]


def poison_list(settings) -> list[dict]:
    res = vcbus_cli("poison", "list", "-o", "json", "--nats", settings.nats_url)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


async def test_poison_records_are_set_aside_and_both_good_jobs_complete_and_retry_works(
    bus_settings, tmp_path, monkeypatch
):
    seqs = await publish_poison_log(bus_settings, tmp_path)
    with crashing_engine(monkeypatch):
        decider, _ = await run_services(bus_settings)
    st = decider.stats
    assert (st.poison, st.bad_times, st.rollbacks) == (4, 1, 1)
    assert decider.poisoned == {seqs[n] for n in ("no-namespace", "deep", "invalid-json", "crash-me")}
    assert not any(CRASH_JOB in j or j.startswith("/") for j in decider.engine.jobs)  # rolled back

    # both good jobs complete, exactly as a replay of the file decides them; bad times did not drop outputs
    with open(tmp_path / "poison.jsonl", "rb") as fh:
        reference = json.loads(json.dumps(replay_stream(fh, "poison.jsonl", skip_invalid=True).report()))
    want = {f"{j['namespace']}/{j['name']}": j["status"] for j in reference["jobs"]}
    have = await statuses(bus_settings)
    for job in ("default/resnet-dist-train", "team-b/resnet-dist-train"):
        assert have[job] == want[job] and have[job]["state"]["phase"] == "Completed"
    assert have["default/bad-time"]["state"]["phase"] == "Pending"

    # the owners see it: a Poisoned condition on the jobs that can be told
    for job in ("default/deep", "default/broken", f"default/{CRASH_JOB}"):
        (cond,) = poisoned(have[job])
        assert cond["status"] == "True" and cond["reason"] == "RecordPoisoned"
    assert "injected fault" in poisoned(have[f"default/{CRASH_JOB}"])[0]["message"]
    wide = vcbus_cli("status", "-o", "wide", f"default/{CRASH_JOB}", "--nats", bus_settings.nats_url)
    assert wide.returncode == 0 and wide.stdout.decode().splitlines()[1].split()[-1] == "True"

    listed = poison_list(bus_settings)
    by_seq = {e["sequence"]: e for e in listed}
    assert sorted(by_seq) == sorted(seqs[n] for n in ("no-namespace", "deep", "invalid-json", "crash-me"))
    assert {e["component"] for e in listed} == {"decider"} and not any(e["retried"] for e in listed)
    assert "without metadata.namespace" in by_seq[seqs["no-namespace"]]["reason"]
    assert by_seq[seqs["no-namespace"]]["job"] == "_/poison"
    assert "nested too deeply" in by_seq[seqs["deep"]]["reason"]
    assert "invalid JSON" in by_seq[seqs["invalid-json"]]["reason"]
    assert by_seq[seqs["crash-me"]]["reason"].startswith("KeyError: ")
    assert by_seq[seqs["crash-me"]]["subject"] == "vcbus.k8s.job.default.crash-me"
    table = vcbus_cli("poison", "list", "--nats", bus_settings.nats_url).stdout.decode().splitlines()
    assert table[0].split()[:3] == ["STREAM", "SEQ", "SUBJECT"] and len(table) == 5
    as_yaml = vcbus_cli("poison", "list", "-o", "yaml", "--nats", bus_settings.nats_url).stdout.decode()
    assert yaml.safe_load(as_yaml) == listed
    names = vcbus_cli("poison", "list", "-o", "name", "--nats", bus_settings.nats_url).stdout.decode().splitlines()
    assert names == [f"{e['stream']}/{e['sequence']}" for e in listed]
    in_default = vcbus_cli("poison", "list", "-n", "default", "-o", "name", "--nats", bus_settings.nats_url)
    assert in_default.stdout.decode().splitlines() == [
        f"{e['stream']}/{e['sequence']}" for e in listed if e["job"].startswith("default/")] != []

    # a restarted decider (the fault fixed) does not fold the records set aside again
    async with open_bus(bus_settings) as bus:
        jobs_end = await last_seq(bus.js, s.JOBS_STREAM)
    again, _ = await run_services(bus_settings)
    assert (again.stats.poison, again.stats.decided) == (0, 0)
    assert CRASH_JOB not in str(list(again.engine.jobs))
    async with open_bus(bus_settings) as bus:
        assert await last_seq(bus.js, s.JOBS_STREAM) == jobs_end

    # retry: the record is re-published, decided, and the job's Poisoned condition goes away
    res = vcbus_cli("poison", "retry", str(seqs["crash-me"]), "--nats", bus_settings.nats_url)
    assert res.returncode == 0, res.stderr
    assert f"seq {seqs['crash-me']} as seq" in res.stdout.decode()
    retried, _ = await run_services(bus_settings)
    assert (retried.stats.poison, retried.stats.decided) == (0, 1)
    have = await statuses(bus_settings)
    assert have[f"default/{CRASH_JOB}"]["state"]["phase"] == "Pending"
    assert not poisoned(have[f"default/{CRASH_JOB}"])
    assert poisoned(have["default/deep"])  # the others stay marked
    assert {e["sequence"] for e in poison_list(bus_settings) if e["retried"]} == {seqs["crash-me"]}

    # a record that was never set aside is refused
    res = vcbus_cli("poison", "retry", "1", "--nats", bus_settings.nats_url)
    assert res.returncode == 1 and b"was not set aside" in res.stderr and b"Traceback" not in res.stderr


async def test_the_scheduler_service_sets_poison_aside_and_goes_on(bus_settings, tmp_path):
    seqs = await publish_poison_log(bus_settings, tmp_path)
    async with open_bus(bus_settings) as bus:
        service = SchedulerService(bus, period=0.05)
        await service.run(until_idle=True)
        assert service.read == await last_seq(bus.js, s.K8S_STREAM)  # folded to the end
    listed = [e for e in poison_list(bus_settings) if e["component"] == "scheduler"]
    # the kinds the scheduler folds are Pod, PodGroup, Queue, Node, PriorityClass: of the bad vcjob
    # records only those it cannot even parse reach it as poison
    assert {e["sequence"] for e in listed} <= {seqs[n] for n in ("no-namespace", "deep", "invalid-json")}
    assert {e["sequence"] for e in listed} >= {seqs["deep"], seqs["invalid-json"]}
    assert all(e["stream"] == s.K8S_STREAM and e["reason"] for e in listed)


async def test_the_projector_sets_an_unreadable_event_aside_and_marks_its_job(bus_settings, seed_log):
    from tests.fixtures_nats import publish_file

    await publish_file(bus_settings, seed_log)
    async with open_bus(bus_settings) as bus:
        await Decider(bus, clock=lambda: FROZEN_EARLY).run(until_idle=True)
        bad = await bus.js.publish("vcbus.job.default.resnet-dist-train.status.changed.v1", b'{"type": "job.status')
        deep = b'{"type": "job.status.changed.v1", "job": "team-c/x", "seq": 1, "status": ' + b"[" * 1200 + b"]" * 1200 + b"}"
        worse = await bus.js.publish("vcbus.job.team-c.x.status.changed.v1", deep)
        projector = Projector(bus)
        await projector.run(until_idle=True)  # returns: it did not halt on either
        assert projector.views.poison == 2
    listed = {e["sequence"]: e for e in poison_list(bus_settings) if e["component"] == "projector"}
    assert set(listed) == {bad.seq, worse.seq}
    assert listed[bad.seq]["stream"] == s.JOBS_STREAM and listed[bad.seq]["job"] == "default/resnet-dist-train"
    assert "event not readable" in listed[worse.seq]["reason"] and listed[worse.seq]["job"] == "team-c/x"
    have = await statuses(bus_settings)
    assert have["default/resnet-dist-train"]["state"]["phase"] == "Completed"  # the rest still projected
    assert poisoned(have["default/resnet-dist-train"]) and poisoned(have["team-c/x"])


async def test_a_rebuild_that_meets_an_unrecorded_failure_refolds_without_it(bus_settings, tmp_path, monkeypatch):
    """A record set aside with no poison event on the bus (set aside by an older vcbus, or the event
    purged): the restarted decider's rebuild fails on it, starts its fold again without it and
    records the poison event then. (Snapshots off: a restart from one folds nothing it covers.)"""
    bus_settings = dataclasses.replace(bus_settings, snapshot_every=0)
    seqs = await publish_poison_log(bus_settings, tmp_path)
    with crashing_engine(monkeypatch):
        await run_services(bus_settings)
        async with open_bus(bus_settings) as bus:
            await bus.js.purge_stream(s.JOBS_STREAM, subject="vcbus.job.*.*.record.poison.v1")
        assert poison_list(bus_settings) == []
        again, _ = await run_services(bus_settings)
    assert again.stats.rollbacks == 1 and again.stats.decided == 0
    assert not any(CRASH_JOB in j or j.startswith("/") for j in again.engine.jobs)
    assert again.poisoned == {seqs[n] for n in ("no-namespace", "deep", "invalid-json", "crash-me")}
    # (its poison events are published again with the same msg ids: within the duplicate window
    # JetStream drops them as repeats, so the purged listing stays empty here)
    have = await statuses(bus_settings)
    assert have["team-b/resnet-dist-train"]["state"]["phase"] == "Completed"
