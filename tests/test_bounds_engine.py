"""A job over the pod limit that arrives anyway (a cluster without the webhook) is poisoned, not fatal.

`replicas: 10000000` is a legal int32; it used to grow replay past 5.7 GB and
`vcbus up --once` to 21 GB. Now the engine refuses the record before anything
changes (`statemachines.admission.bounds.check_job_size`), the decider and the
file replay set it aside, and the good jobs around it complete. The replay runs
under an address-space limit far below what the old behaviour needed, so a
regression fails with MemoryError rather than passing slowly.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys

import pytest

from statemachines.admission.bounds import BoundsProblem
from statemachines.engine import Engine
from statemachines.model.records import decode
from tests.fixtures_nats import FROZEN_EARLY, vcbus_cli
from tests.poison_logs import ROOT, RV_SHIFT, copy_in_namespace, job_record, seed_records
from vcbus.bus import subjects as s
from vcbus.bus.connecting import open_bus
from vcbus.bus.decider import Decider
from vcbus.bus.projector import Projector, live_buckets
from vcbus.bus.publisher import prepare

HUGE = 10_000_000
LIMIT_BYTES = 1_500_000_000  # a 10M-pod job took 5.7 GB in replay before the bound


def huge_record(name: str = "huge", replicas: int = HUGE) -> dict:
    rec = job_record(name, "default", RV_SHIFT - 4)
    rec["object"]["spec"]["tasks"][1]["replicas"] = replicas
    return rec


def huge_log(tmp_path) -> tuple:
    recs = seed_records()
    lines = [json.dumps(r).encode() for r in recs]
    bad = json.dumps(huge_record()).encode()
    lines += [bad]
    lines += [json.dumps(r).encode() for r in copy_in_namespace(recs, "team-b")]
    path = tmp_path / "huge.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path, bad


def test_the_engine_refuses_a_job_over_the_limit_before_changing_anything():
    engine = Engine()
    rec = decode(json.dumps(huge_record()).encode())
    with pytest.raises(BoundsProblem, match=r"asks for 10000001 pods, more than the limit of 10000 pods per job"):
        engine.apply(1, rec)
    assert engine.jobs == {}  # nothing half-applied
    assert Engine(max_pods=HUGE + 1).apply(1, rec)  # configurable: the same job is decided under a larger limit


@pytest.mark.parametrize("timeout", ["soon", "99999999999h", ""])
def test_the_engine_refuses_a_job_whose_timeout_go_refuses(timeout):
    rec = huge_record(replicas=2)
    rec["object"]["spec"]["policies"] = [{"event": "PodFailed", "action": "RestartJob", "timeout": timeout}]
    with pytest.raises(BoundsProblem, match=r"spec.policies\[0\].timeout: time: invalid duration"):
        Engine().apply(1, decode(json.dumps(rec).encode()))
    rec["object"]["spec"]["policies"][0]["timeout"] = "90s"
    assert Engine().apply(1, decode(json.dumps(rec).encode()))


def test_a_scale_up_over_the_limit_is_refused_and_the_job_keeps_its_spec():
    engine = Engine()
    small = huge_record(replicas=2)
    engine.apply(1, decode(json.dumps(small).encode()))
    big = huge_record()
    big["type"] = "MODIFIED"
    big["object"]["metadata"]["resourceVersion"] = str(RV_SHIFT)
    with pytest.raises(BoundsProblem):
        engine.apply(2, decode(json.dumps(big).encode()))
    assert engine.jobs["default/huge"].job.spec.tasks[1].replicas == 2


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))


def test_file_replay_sets_the_huge_job_aside_and_both_good_jobs_complete(tmp_path):
    log, _ = huge_log(tmp_path)
    res = subprocess.run([sys.executable, "-m", "vcbus.cli.main", "replay", "--json", str(log)], capture_output=True,
                         cwd=ROOT, timeout=300, preexec_fn=_limit_memory)
    err = res.stderr.decode()
    assert res.returncode == 0, err
    assert "Traceback" not in err and "MemoryError" not in err
    skipped = [line for line in err.splitlines() if line.startswith("warning: skipped")]
    assert len(skipped) == 1 and "more than the limit of 10000 pods per job" in skipped[0], err
    report = json.loads(res.stdout)
    got = {f"{j['namespace']}/{j['name']}": j["status"]["state"].get("phase", "") for j in report["jobs"]}
    assert got["default/resnet-dist-train"] == "Completed" and got["team-b/resnet-dist-train"] == "Completed"
    assert "default/huge" not in got


@pytest.mark.nats
async def test_the_decider_poisons_the_huge_job_and_marks_it(bus_settings, tmp_path):
    log, bad = huge_log(tmp_path)
    async with open_bus(bus_settings) as bus:
        for line in log.read_bytes().splitlines():
            msg = prepare(line, decode(line))
            assert msg is not None
            ack = await bus.js.publish(msg.subject, msg.body, headers=msg.headers)
            if line == bad:
                huge_seq = ack.seq
        decider = Decider(bus, clock=lambda: FROZEN_EARLY)
        await decider.run(until_idle=True)
        await Projector(bus).run(until_idle=True)
        bucket = (await live_buckets(bus))[s.STATUS_BUCKET]
    assert decider.poisoned == {huge_seq} and decider.stats.poison == 1
    have = {s.job_of_key(k): json.loads(v) for k, v in bucket.items() if not k.startswith("_")}
    for job in ("default/resnet-dist-train", "team-b/resnet-dist-train"):
        assert have[job]["state"]["phase"] == "Completed"
    (cond,) = [c for c in have["default/huge"].get("conditions") or () if c.get("type") == "Poisoned"]
    assert "more than the limit of 10000 pods per job" in cond["message"]
    res = vcbus_cli("poison", "list", "-o", "json", "--nats", bus_settings.nats_url)
    (entry,) = json.loads(res.stdout)
    assert entry["sequence"] == huge_seq and entry["job"] == "default/huge"
    assert entry["reason"].startswith("BoundsProblem: ")


def test_podnames_answers_exactly_like_the_set_of_generated_names():
    import random

    from statemachines.job.podnames import PodNames

    lazy = PodNames("j-t-", 1500)
    names = set(lazy)
    assert len(names) == len(lazy) == 1500
    rng = random.Random(7)
    odd = ["j-t-01", "j-t-1500", "j-t-", "j-t-\u0661", "j-t--1", "x-t-1", "j-t-1 ", "j-t-00", "j-t-0", "j-t-0x1", 5]
    odd += [f"j-t-{rng.randrange(3000)}" for _ in range(500)]
    assert all((c in lazy) == (c in names) for c in [*names, *odd])


def test_a_big_task_creates_every_pod_without_holding_its_names(tmp_path):
    from tests.poison_logs import seed_records

    rec = huge_record(replicas=3000)  # tasks: master 1, worker 3000
    job_uid = rec["object"]["metadata"]["uid"]
    pg = json.loads(json.dumps([r for r in seed_records() if r["object"]["kind"] == "PodGroup"][2]))
    meta = pg["object"]["metadata"]
    meta.update(name=f"huge-{job_uid}", namespace="default", resourceVersion=str(RV_SHIFT))
    for ref in meta.get("ownerReferences") or ():
        ref.update(name="huge", uid=job_uid)
    engine = Engine()
    engine.apply(1, decode(json.dumps(rec).encode()))
    outs = engine.apply(2, decode(json.dumps(pg).encode()))
    created = [o.name for o in outs if type(o).__name__ == "CreatePod"]
    assert created == ["huge-master-0"] + [f"huge-worker-{i}" for i in range(3000)]
    from statemachines.job.podnames import PodNames

    names = engine.jobs["default/huge"].names[1]
    assert isinstance(names["worker"][0], PodNames) and isinstance(names["master"][0], list)


@pytest.mark.nats
async def test_the_decider_takes_its_limit_from_the_settings_and_keeps_it_after_a_rollback(bus_settings):
    import dataclasses

    async with open_bus(dataclasses.replace(bus_settings, max_pods_per_job=HUGE + 1)) as bus:
        decider = Decider(bus, clock=lambda: FROZEN_EARLY)
        assert decider.engine.max_pods == HUGE + 1
        assert decider._fresh_engine().max_pods == HUGE + 1  # the engine a rollback refolds into
        msg = prepare(json.dumps(huge_record()).encode(), decode(json.dumps(huge_record()).encode()))
        await bus.js.publish(msg.subject, msg.body, headers=msg.headers)
        await decider.run(until_idle=True)
    assert decider.stats.poison == 0 and "default/huge" in decider.engine.jobs  # allowed here: not poisoned
