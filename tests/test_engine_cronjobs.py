"""Volcano's cronjob controller inside the engine: CronJob records decoded from bytes, its timers on
the engine's heap (fired by TIMER records on the bus, by the log's time in a replay), its outputs in
the bus contract (the global lists, the decoders), its records published on their own subject.
"""

from __future__ import annotations

import msgspec

from statemachines import outputs as o
from statemachines.engine import Engine
from statemachines.model.cronjob import CronJobRecord
from statemachines.model.records import RecordError, decode
from vcbus.bus.publisher import prepare
from vcbus.cronjobs.zonedata import zones_for

NS, NAME, UID = "default", "tick", "cj-1"
T0 = "2026-01-01T00:00:00Z"


def at(seconds: int) -> str:
    return f"2026-01-01T00:{seconds // 60:02d}:{seconds % 60:02d}Z"


def cronjob_bytes(*, seconds=1, rtype="ADDED", rv="1", zone=None, **spec) -> bytes:
    obj = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "CronJob",
           "metadata": {"name": NAME, "namespace": NS, "uid": UID, "resourceVersion": rv, "creationTimestamp": T0},
           "spec": {"schedule": "@every 5s", "concurrencyPolicy": "Allow",
                    "jobTemplate": {"metadata": {"labels": {"app": "tick"}},
                                    "spec": {"minAvailable": 1, "queue": "default",
                                             "tasks": [{"name": "t", "replicas": 1}]}}, **spec}}
    if zone:
        obj["spec"]["timeZone"] = zone
    return msgspec.json.encode({"type": rtype, "object": obj, "time": at(seconds),
                                "zones": msgspec.to_builtins(zones_for(zone))})


def vcjob_bytes(name, *, seconds, uid="run-1", rv="10", phase="Pending", rtype="ADDED", owned=True) -> bytes:
    obj = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
           "metadata": {"name": name, "namespace": NS, "uid": uid, "resourceVersion": rv, "creationTimestamp": at(seconds),
                        "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "CronJob",
                                             "name": NAME, "uid": UID, "controller": True}] if owned else None},
           "spec": {"minAvailable": 1, "queue": "default", "tasks": [{"name": "t", "replicas": 1}]},
           "status": {"state": {"phase": phase, "lastTransitionTime": at(seconds)}}}
    return msgspec.json.encode({"type": rtype, "object": obj, "time": at(seconds)})


def timer_bytes(timer: o.TimerScheduled) -> bytes:
    return msgspec.json.encode({"type": "TIMER", "time": timer.due,
                                "timer": {"job": timer.job, "id": timer.timer, "due": timer.due}})


def of(out, cls):
    return [x for x in out if isinstance(x, cls)]


def test_a_cronjob_record_decodes_with_its_zones_and_goes_on_its_own_subject():
    data = cronjob_bytes(zone="Asia/Tokyo")
    rec = decode(data)
    assert isinstance(rec, CronJobRecord)
    assert rec.zones["Asia/Tokyo"].first_offset == 9 * 3600
    msg = prepare(data, rec)
    assert msg is not None and msg.subject == "vcbus.k8s.cronjob.default.tick"
    assert msg.headers["Nats-Msg-Id"] == f"{UID}:1:ADDED" and "Vcbus-Job" not in msg.headers


def test_a_bad_cronjob_record_is_refused_naming_the_field():
    obj = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "CronJob",
           "metadata": {"name": NAME, "namespace": NS}, "spec": {"schedule": 5}}
    try:
        decode(msgspec.json.encode({"type": "ADDED", "object": obj}))
    except RecordError as err:
        assert "CronJob $.spec.schedule" in str(err)
    else:
        raise AssertionError("a schedule that is a number decoded")


def test_the_bus_engine_creates_a_run_when_the_timer_record_comes_and_writes_the_status():
    engine = Engine(timers="recorded")
    out = engine.apply(1, decode(cronjob_bytes()))
    (timer,) = of(out, o.TimerScheduled)
    assert (timer.job, timer.action, timer.due) == (f"{NS}/cronjob:{NAME}", "SyncCronJob", at(5))
    assert not of(engine.apply(2, decode(vcjob_bytes("other", seconds=2, uid="x", owned=False))), o.CreateCronJobRun)
    out = engine.apply(3, decode(timer_bytes(timer)))
    (create,) = of(out, o.CreateCronJobRun)
    assert create.time == at(5) and create.name == f"{NAME}-{1767225600 // 60}"
    assert (create.cronjob, create.cronjob_uid, create.labels) == (NAME, UID, {"app": "tick"})
    assert create.spec["tasks"] == [{"name": "t", "replicas": 1}]
    assert [e.reason for e in of(out, o.RecordEvent)] == ["SuccessfulCreate"]
    # the run's vcjob: the job controller takes it like any other, the CronJob controller puts it in status.active
    out = engine.apply(4, decode(vcjob_bytes(create.name, seconds=6)))
    (write,) = of(out, o.UpdateCronJobStatus)
    assert [(r.name, r.uid) for r in write.status.active] == [(create.name, "run-1")]
    assert write.status.last_schedule_time == at(5)
    assert f"{NS}/{create.name}" in engine.jobs  # the job controller's aggregate


def test_outputs_are_in_the_bus_contract():
    engine = Engine(timers="recorded")
    (timer,) = of(engine.apply(1, decode(cronjob_bytes())), o.TimerScheduled)
    out = engine.apply(2, decode(timer_bytes(timer))) + engine.apply(3, decode(vcjob_bytes(f"{NAME}-29453760", seconds=6)))
    kinds = {type(x) for x in out}
    assert {o.CreateCronJobRun, o.UpdateCronJobStatus, o.CronJobRunChanged} <= kinds
    for x in out:
        assert o.output_decoder.decode(o.encoder.encode(x)) == x
        assert o.is_command(x) == (type(x) in o.COMMANDS)
    assert {o.CreateCronJobRun, o.DeleteCronJobRun, o.UpdateCronJobStatus} <= set(o.COMMANDS)
    assert {o.CronJobStateChanged, o.CronJobRunChanged} <= set(o.DOMAIN_EVENTS)


def test_a_replay_by_the_logs_time_is_the_same_twice_byte_for_byte():
    records = [cronjob_bytes(successfulJobsHistoryLimit=0), vcjob_bytes(f"{NAME}-29453760", seconds=6),
               vcjob_bytes(f"{NAME}-29453760", seconds=9, rv="11", phase="Completed", rtype="MODIFIED"),
               vcjob_bytes("unrelated", seconds=70, uid="u", owned=False)]

    def play() -> bytes:
        engine = Engine()
        out = []
        for seq, data in enumerate(records, 1):
            out.extend(engine.apply(seq, decode(data)))
        return o.encoder.encode(out)

    first = play()
    assert first == play()
    out = msgspec.json.decode(first)
    tags = [x["type"] for x in out if x["job"] == f"{NS}/cronjob:{NAME}"]
    assert "cmd.cronjob.job.create.v1" in tags and "cmd.cronjob.job.delete.v1" in tags  # history limit 0: pruned


def test_without_the_cronjob_controller_the_record_is_ignored():
    engine = Engine(cronjobs=False, timers="recorded")
    assert engine.apply(1, decode(cronjob_bytes())) == [] and engine.ignored == 1
    assert not of(engine.apply(2, decode(vcjob_bytes(f"{NAME}-29453760", seconds=6))), o.UpdateCronJobStatus)
