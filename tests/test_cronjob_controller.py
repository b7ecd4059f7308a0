"""The CronJob machines (through `transitions` and the compiled graph) and the controller.

Scenarios after Volcano's `pkg/controllers/cronjob/cronjob_controller_test.go` TestSyncCronJob
(the case names are cited), played as logs through the engine without the job controller
(`Engine(job_controller=False)`: the controllers beside it, timers fired by the log's time as the
engine fires them): CronJob records, the vcjob records the actuator's creations would bring, and the
timers the schedule sets.
"""

from __future__ import annotations

import itertools

import msgspec
import pytest

from statemachines import outputs as o
from statemachines.cronjobs import machine as m
from statemachines.engine import Engine
from statemachines.model.cronjob import CronJobRecord
from statemachines.model.records import decode
from statemachines.model.timefmt import parse
from statemachines.outputs import (
    CreateCronJobRun,
    CronJobRunChanged,
    CronJobStateChanged,
    DeleteCronJobRun,
    UpdateCronJobStatus,
)
from vcbus.cronjobs.zonedata import zones_for

TEN = "2025-03-11T10:00:00Z"  # Volcano's justTen()
MIN = 60


def t(minutes: float) -> str:
    from statemachines.model.timefmt import add
    return add(TEN, minutes * MIN)


# ------------------------------------------------------------------ the machines


@pytest.mark.parametrize(("state", "trigger", "check"), list(itertools.product(
    m.CRONJOB_STATES, m.CRONJOB_TRIGGERS,
    [m.Check(*bits) for bits in itertools.product((False, True), repeat=3)],
)))
def test_cronjob_machine_compiled_graph_agrees_with_transitions(state, trigger, check):
    if state == m.DELETED and trigger == m.SYNC:
        with pytest.raises(KeyError):
            m.fire_cronjob(state, trigger, check)
        with pytest.raises(m.IllegalRunTransition):
            m.fire_with_transitions("cronjob", state, trigger, check)
        return
    assert m.fire_cronjob(state, trigger, check) == m.fire_with_transitions("cronjob", state, trigger, check)


def test_cronjob_machine_guards_in_volcanos_order():
    # syncCronJob: a deletionTimestamp skips all; suspend is checked before the schedule is validated
    assert m.fire_cronjob(m.NEW, m.SYNC, m.Check(terminating=True, suspended=True, invalid=True)) == m.TERMINATING
    assert m.fire_cronjob(m.SCHEDULED, m.SYNC, m.Check(suspended=True, invalid=True)) == m.SUSPENDED
    assert m.fire_cronjob(m.SUSPENDED, m.SYNC, m.Check(invalid=True)) == m.INVALID
    assert m.fire_cronjob(m.INVALID, m.SYNC, m.Check()) == m.SCHEDULED


@pytest.mark.parametrize(("state", "trigger"), list(itertools.product(m.RUN_STATES, m.RUN_TRIGGERS)))
def test_run_machine_compiled_graph_agrees_with_transitions(state, trigger):
    try:
        want = m.fire_with_transitions("run", state, trigger)
    except m.IllegalRunTransition:
        with pytest.raises(m.IllegalRunTransition):
            m.fire_run(state, trigger)
        return
    assert m.fire_run(state, trigger) == want


# ------------------------------------------------------------------ the controller


def cronjob(rtype="ADDED", *, rv="1", schedule="*/5 * * * *", policy="Allow", time=TEN, status=None, **spec):
    obj = {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "CronJob",
        "metadata": {"name": "vccronjob", "namespace": "volcano", "uid": "cj-uid", "resourceVersion": rv,
                     "creationTimestamp": TEN},
        "spec": {"schedule": schedule, "concurrencyPolicy": policy,
                 "jobTemplate": {"metadata": {"labels": {"volcano": "yes"}, "annotations": {"cronjob": "yes"}},
                                 "spec": {"minAvailable": 1, "tasks": [{"name": "t", "replicas": 1}]}},
                 **spec},
        "status": status or {},
    }
    zones = zones_for(spec.get("timeZone"))
    record = {"type": rtype, "object": obj, "time": time, "zones": msgspec.to_builtins(zones)}
    return msgspec.json.decode(msgspec.json.encode(record), type=CronJobRecord)


def vcjob(name, *, uid, rv, phase="", time, ltt=None, rtype="MODIFIED", owner_uid="cj-uid"):
    obj = {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name, "namespace": "volcano", "uid": uid, "resourceVersion": rv,
                     "creationTimestamp": time,
                     "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "CronJob",
                                          "name": "vccronjob", "uid": owner_uid, "controller": True}]},
        "spec": {"minAvailable": 1, "tasks": [{"name": "t", "replicas": 1}]},
        "status": {"state": {"phase": phase, "lastTransitionTime": ltt or time}},
    }
    return decode(msgspec.json.encode({"type": rtype, "object": obj, "time": time}))


def play(records, until=None):
    fold = Engine(job_controller=False, jobflows=False, queue_controller=False)
    out = []
    for seq, rec in enumerate(records, 1):
        out.extend(fold.apply(seq, rec))
    if until:
        out.extend(fold.finish(until))
    return fold, out


def of(out, cls):
    return [x for x in out if isinstance(x, cls)]


def reasons(out):
    return [x.reason for x in of(out, o.RecordEvent)]


def run_name(minutes_after_ten):
    from statemachines.model.timefmt import parse
    return f"vccronjob-{(parse(TEN) + minutes_after_ten * MIN) // 60}"


def test_first_run_is_not_time_sets_the_timer_for_the_next():
    # "First run, is not time, Allow": requeue after 2m (the */5 time at 10:05)
    _, out = play([cronjob(time=t(3))])
    assert [x.due for x in of(out, o.TimerScheduled)] == [t(5)]
    assert not of(out, CreateCronJobRun)
    assert of(out, CronJobStateChanged)[0].to_state == m.SCHEDULED


def test_first_run_is_time_creates_the_job_as_volcano_names_and_annotates_it():
    # "First run, is time, Allow": one job, SuccessfulCreate, lastScheduleTime 10:05, requeue after 5m
    _, out = play([cronjob(time=t(3))], until=t(5))
    (create,) = of(out, CreateCronJobRun)
    assert create.name == run_name(5)
    assert create.annotations == {"cronjob": "yes", "volcano.sh/cronjob-scheduled-timestamp": "2025-03-11T10:05:00Z"}
    assert create.labels == {"volcano": "yes"} and create.cronjob_uid == "cj-uid"
    assert reasons(out) == ["SuccessfulCreate"]
    assert [x.due for x in of(out, o.TimerScheduled)] == [t(5), t(10)]
    assert not of(out, UpdateCronJobStatus)  # written when the vcjob's record shows its uid


def test_the_created_jobs_record_writes_active_and_last_schedule_time():
    name = run_name(5)
    _, out = play([cronjob(time=t(3)), vcjob(name, uid="j1", rv="7", time=t(5), rtype="ADDED")])
    (write,) = of(out, UpdateCronJobStatus)
    assert write.status.last_schedule_time == t(5)
    assert [(r.name, r.uid, r.resource_version, r.kind) for r in write.status.active] == [(name, "j1", "7", "Job")]
    runs = [(r.run, r.to_state) for r in of(out, CronJobRunChanged)]
    assert runs == [(name, m.CREATED), (name, m.ACTIVE)]


def test_a_finished_job_leaves_active_and_sets_last_successful_time():
    name = run_name(5)
    _, out = play([cronjob(time=t(3)), vcjob(name, uid="j1", rv="7", time=t(5), rtype="ADDED"),
                   vcjob(name, uid="j1", rv="8", phase="Completed", time=t(6))])
    last = of(out, UpdateCronJobStatus)[-1]
    assert last.status.active is None and last.status.last_successful_time == t(6)
    assert "SawCompletedJob" in reasons(out)
    assert of(out, CronJobRunChanged)[-1].to_state == m.SUCCEEDED


def test_forbid_skips_while_a_job_is_active_and_allow_creates_beside_it():
    name = run_name(5)
    for policy, creates in (("Forbid", 1), ("Allow", 2)):
        _, out = play([cronjob(time=t(3), policy=policy), vcjob(name, uid="j1", rv="7", time=t(5), rtype="ADDED")],
                      until=t(10))
        assert len(of(out, CreateCronJobRun)) == creates
        if policy == "Forbid":
            assert "ForbidConcurrent" in reasons(out)
            skipped = [r for r in of(out, CronJobRunChanged) if r.to_state == m.SKIPPED]
            assert [r.run for r in skipped] == [run_name(10)]


def test_replace_deletes_the_active_job_then_creates_the_next():
    name = run_name(5)
    _, out = play([cronjob(time=t(3), policy="Replace"), vcjob(name, uid="j1", rv="7", time=t(5), rtype="ADDED")],
                  until=t(10))
    assert [(d.name, d.uid) for d in of(out, DeleteCronJobRun)] == [(name, "j1")]
    assert [c.name for c in of(out, CreateCronJobRun)] == [name, run_name(10)]
    assert reasons(out)[-3:] == ["ReplaceConcurrent", "SuccessfulDelete", "SuccessfulCreate"]
    assert (name, m.REPLACED) in [(r.run, r.to_state) for r in of(out, CronJobRunChanged)]


def test_missed_deadline_creates_nothing_and_says_so():
    # "First run, miss deadline, Allow": now 10:07, deadline 60 s: no job, requeue at 10:10
    _, out = play([cronjob(time=t(7), startingDeadlineSeconds=60)])
    assert not of(out, CreateCronJobRun)
    assert [x.due for x in of(out, o.TimerScheduled)] == [t(10)]
    (missed,) = of(out, CronJobRunChanged)
    assert (missed.run, missed.to_state, missed.scheduled) == (run_name(5), m.MISSED, t(5))


def test_missed_time_within_deadline_still_runs():
    # "First run, miss Time, no miss deadline, Allow": deadline 180 s, now 10:07: the 10:05 run is created
    _, out = play([cronjob(time=t(7), startingDeadlineSeconds=180)])
    assert [c.name for c in of(out, CreateCronJobRun)] == [run_name(5)]


def test_many_missed_warns_and_creates_the_latest():
    # "First run, manymiss, no startingDeadlineSeconds, Allow": 10 hours late
    _, out = play([cronjob(time=t(600))])
    assert reasons(out) == ["TooManyMissedTimes", "SuccessfulCreate"]
    assert [c.name for c in of(out, CreateCronJobRun)] == [run_name(600)]


def test_suspend_and_invalid_zone_and_schedule():
    # "Abnormal situation, suspend" / "error TimeZone" / "error schedule"
    _, out = play([cronjob(time=t(5), suspend=True)])
    assert of(out, CronJobStateChanged)[0].to_state == m.SUSPENDED and not of(out, o.TimerScheduled)
    _, out = play([cronjob(time=t(5), timeZone="error TZ")])
    assert reasons(out) == ["InvalidTimeZone"]
    assert of(out, o.RecordEvent)[0].message == 'Invalid time zone "error TZ": unknown time zone error TZ'
    _, out = play([cronjob(time=t(5), schedule="wrong shcedlue")])
    assert of(out, CronJobStateChanged)[0].to_state == m.INVALID and not reasons(out)


def test_a_failing_sync_is_requeued_with_the_rate_limiters_backoff_without_end():
    # Volcano's processNextReq: an error is AddRateLimited (5 ms doubled per failure, at most 1000 s), with no
    # requeue limit; the status is not written. In the log's whole seconds the first delays are 1 s each.
    fold, out = play([cronjob(time=t(0), schedule="wrong shcedlue")], until=t(60))
    timers = of(out, o.TimerScheduled)
    assert {x.policy for x in timers} == {"backoff"} and not of(out, UpdateCronJobStatus)
    due = [x.due for x in timers]
    assert due[:10] == [t(s / MIN) for s in (1, 2, 3, 4, 5, 6, 7, 8, 10, 13)]
    gaps = [parse(b) - parse(a) for a, b in itertools.pairwise(due)]
    assert gaps[-1] == 1000 and max(gaps) == 1000  # capped: a try every 1000 s from then on
    assert fold.pending_timers()  # never dropped
    # fixed: the next retry syncs, and the count starts again (Forget)
    fold2, out = play([cronjob(time=t(0), schedule="wrong shcedlue"),
                       cronjob("MODIFIED", rv="2", time=t(0), schedule="*/5 * * * *")], until=t(6))
    assert [x.policy for x in of(out, o.TimerScheduled)][-1] == "schedule"
    assert [x.name for x in of(out, CreateCronJobRun)] == [run_name(5)]
    assert fold2.cronjob_controller.cronjobs["volcano/cronjob:vccronjob"].failures == 0


def test_time_zone_field_and_a_tz_prefix_in_the_schedule():
    # "First run, is not time in TZ": 0 10 * * * in Pacific/Honolulu is 20:00 UTC
    _, out = play([cronjob(time=TEN, schedule="0 10 * * *", timeZone="Pacific/Honolulu")])
    assert [x.due for x in of(out, o.TimerScheduled)] == [t(600)]
    # "...uses schedule's TZ despite conflict with TimeZone setting": a warning, then the run
    _, out = play([cronjob(time=t(600), schedule="TZ=UTC 0 20 * * *", timeZone="Pacific/Honolulu")])
    assert reasons(out) == ["UnsupportedSchedule", "SuccessfulCreate"]
    assert of(out, CreateCronJobRun)[0].annotations["volcano.sh/cronjob-scheduled-timestamp"] == \
        "2025-03-11T10:00:00-10:00"


def test_successful_history_limit_zero_deletes_the_finished_job():
    # "noy first run, successfulJobHistoryLimit is 0"
    name = run_name(5)
    _, out = play([cronjob(time=t(3), successfulJobsHistoryLimit=0),
                   vcjob(name, uid="j1", rv="7", time=t(5), rtype="ADDED"),
                   vcjob(name, uid="j1", rv="8", phase="Completed", time=t(6))])
    assert [(d.name, d.uid) for d in of(out, DeleteCronJobRun)] == [(name, "j1")]
    assert of(out, CronJobRunChanged)[-1].to_state == m.PRUNED


def test_a_schedule_change_waits_for_its_next_time():
    # TestUpdateCronJob "spec.schedule changed": requeued after the next time, no sync now
    _, out = play([cronjob(time=t(1)), cronjob("MODIFIED", rv="2", schedule="*/2 * * * *", time=t(1))])
    assert [x.due for x in of(out, o.TimerScheduled)] == [t(5), t(2)]
    assert [x.reason for x in of(out, o.TimerCancelled)] == ["an earlier time"]


def test_a_history_replays_byte_for_byte():
    name = run_name(5)
    records = [cronjob(time=t(3), policy="Replace", startingDeadlineSeconds=600),
               vcjob(name, uid="j1", rv="7", time=t(5), rtype="ADDED")]
    first = msgspec.json.encode(play(records, until=t(30))[1])
    assert first == msgspec.json.encode(play(records, until=t(30))[1])


def test_cronjob_diagram_doc_is_current():
    import pathlib

    from statemachines.cronjobs.diagram import document

    checked_in = (pathlib.Path(__file__).parent.parent / "docs" / "statemachines" / "cronjob.md").read_text()
    assert checked_in == document(), "run: make docs"


def test_a_history_with_a_forbid_skip_a_missed_deadline_and_a_replace():
    """Issue 28's replayed history: Forbid skips 10:10 while 10:05 runs; 10:05 finishes at 10:12, too late
    for 10:10's 60 s deadline (Missed); then Replace: the 10:20 run replaces the still-running 10:15 one."""
    r5, r15 = run_name(5), run_name(15)
    records = [
        cronjob(time=t(3), policy="Forbid", startingDeadlineSeconds=60),
        vcjob(r5, uid="j5", rv="7", time=t(5), rtype="ADDED"),
        vcjob(r5, uid="j5", rv="8", phase="Completed", time=t(12)),
        cronjob("MODIFIED", rv="2", time=t(13), policy="Replace", startingDeadlineSeconds=60),
        vcjob(r15, uid="j15", rv="9", time=t(15), rtype="ADDED"),
    ]
    fold, out = play(records, until=t(20))
    runs = [(r.run, r.to_state) for r in of(out, CronJobRunChanged)]
    assert runs == [
        (r5, m.CREATED), (r5, m.ACTIVE), (run_name(10), m.SKIPPED), (r5, m.SUCCEEDED), (run_name(10), m.MISSED),
        (r15, m.CREATED), (r15, m.ACTIVE), (r15, m.REPLACED), (run_name(20), m.CREATED),
    ]
    assert [c.name for c in of(out, CreateCronJobRun)] == [r5, r15, run_name(20)]
    assert [d.name for d in of(out, DeleteCronJobRun)] == [r15]
    assert msgspec.json.encode(out) == msgspec.json.encode(play(records, until=t(20))[1])
