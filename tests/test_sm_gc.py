"""The garbage collector (statemachines/garbagecollector.py): ttlSecondsAfterFinished as a timer.

Volcano: `pkg/controllers/garbagecollector/garbagecollector.go`. A vcjob is deleted
when its recorded status is finished (Completed, Failed, Terminated) and
`status.state.lastTransitionTime` + ttl has passed, by the log's time: the timer is
due exactly then, fires in replay when the log's time reaches it and on the bus on
its TIMER record. No test here uses fixtures, so tests/test_determinism.py replays
every log built here twice.
"""

from __future__ import annotations

import io

import pytest

from statemachines import outputs as o
from statemachines.engine import Engine
from statemachines.timers.scheduling import rule_b
from tests.builders import Harness, job, scenario
from vcbus.replaying import replay_stream

FINISHED = "2026-01-01T00:05:00Z"


def ttl_job(ttl: int | None = 100, *, phase: str = "Completed", ltt: str | None = FINISHED, name: str = "j",
            uid: str | None = None, deleting: str | None = None) -> dict:
    obj = job(name, uid=uid, deleting=deleting)
    if ttl is not None:
        obj["spec"]["ttlSecondsAfterFinished"] = ttl
    state: dict = {"phase": phase}
    if ltt is not None:
        state["lastTransitionTime"] = ltt
    obj["status"] = {"state": state, "minAvailable": 2}
    return obj


def gc_outs(outs) -> list[tuple]:
    rows = []
    for x in outs:
        if isinstance(x, (o.TimerScheduled, o.TimerFired)) and x.action != "DeleteJob":
            continue  # the job machine's own timers
        if isinstance(x, o.TimerScheduled):
            assert x.policy == "ttlSecondsAfterFinished"
            rows.append(("scheduled", x.due))
        elif isinstance(x, o.TimerCancelled):
            rows.append(("cancelled", x.reason))
        elif isinstance(x, o.TimerFired):
            rows.append(("fired",))
        elif isinstance(x, o.JobExpired):
            rows.append(("expired", x.uid, x.finished, x.ttl_seconds))
        elif isinstance(x, o.DeleteJob):
            rows.append(("delete", x.job, x.uid))
    return rows


def at(h: Harness, when: str) -> None:
    from statemachines.model.timefmt import parse

    h.clock = parse(when)


def other_record(h: Harness):
    """Any later record moves the log's time (a queue nobody uses)."""
    return h.feed("ADDED", {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                            "metadata": {"name": f"q{h.seq}", "uid": f"uid-q{h.seq}"}, "status": {"state": "Open"}})


# ---------------------------------------------------------------- timing


@pytest.mark.parametrize("phase", ["Completed", "Failed", "Terminated"])
def test_a_finished_job_is_deleted_exactly_at_finish_plus_ttl(phase):
    h = Harness()
    at(h, "2026-01-01T00:05:10Z")
    outs = h.create(ttl_job(100, phase=phase))
    assert gc_outs(outs) == [("scheduled", "2026-01-01T00:06:40Z")]
    at(h, "2026-01-01T00:06:39Z")
    assert gc_outs(other_record(h)) == []
    at(h, "2026-01-01T00:06:40Z")
    assert gc_outs(other_record(h)) == [
        ("fired",), ("expired", "uid-j", FINISHED, 100), ("delete", "default/j", "uid-j")]
    assert h.engine.pending_timers() == []


@pytest.mark.parametrize("phase", ["Pending", "Running", "Aborted", "Aborting", "Completing", "Restarting", ""])
def test_a_job_that_is_not_finished_is_never_collected(phase):
    h = Harness()
    at(h, "2026-01-01T01:00:00Z")
    assert gc_outs(h.create(ttl_job(0, phase=phase))) == []
    assert [t for t in h.engine.pending_timers() if t.action == "DeleteJob"] == []


def test_no_ttl_no_collection():
    h = Harness()
    at(h, "2026-01-01T01:00:00Z")
    assert gc_outs(h.create(ttl_job(None))) == []


def test_ttl_zero_deletes_at_once():
    h = Harness()
    at(h, FINISHED)
    assert gc_outs(h.create(ttl_job(0))) == [("expired", "uid-j", FINISHED, 0), ("delete", "default/j", "uid-j")]


def test_a_job_finished_long_ago_is_deleted_when_first_seen():
    h = Harness()
    at(h, "2026-02-01T00:00:00Z")
    assert gc_outs(h.create(ttl_job(100)))[-1] == ("delete", "default/j", "uid-j")


def test_the_status_in_the_log_decides_not_the_job_machine():
    """Volcano's gc reads the API object: a job becomes collectable when its written status says finished."""
    h = Harness()
    at(h, FINISHED)
    assert gc_outs(h.create(ttl_job(30, phase="Running"))) == []
    at(h, "2026-01-01T00:05:20Z")
    assert gc_outs(h.update_job(lambda j: j["status"]["state"].update(phase="Completed"))) == [
        ("scheduled", "2026-01-01T00:05:30Z")]


def test_without_a_last_transition_time_nothing_is_decided():
    h = Harness()
    at(h, "2026-01-01T01:00:00Z")
    assert gc_outs(h.create(ttl_job(0, ltt=None))) == []


# ---------------------------------------------------------------- cancellation, changes, once


def test_deleting_the_job_first_cancels_the_timer():
    h = Harness()
    at(h, FINISHED)
    h.create(ttl_job(100))
    [timer] = h.engine.pending_timers()
    at(h, "2026-01-01T00:06:00Z")
    outs = h.delete_job()
    assert gc_outs(outs) == [("cancelled", "job deleted")] and outs.cancelled() == [timer.id]
    at(h, "2026-01-01T01:00:00Z")
    assert gc_outs(other_record(h)) == [] and h.engine.pending_timers() == []


def test_a_deletion_timestamp_cancels_the_timer():
    h = Harness()
    at(h, FINISHED)
    h.create(ttl_job(100))
    at(h, "2026-01-01T00:06:00Z")
    outs = h.update_job(lambda j: j["metadata"].update(deletionTimestamp="2026-01-01T00:06:00Z"))
    assert gc_outs(outs) == [("cancelled", "job being deleted")]


def test_a_changed_ttl_moves_the_timer():
    h = Harness()
    at(h, FINISHED)
    h.create(ttl_job(100))
    at(h, "2026-01-01T00:05:30Z")
    outs = h.update_job(lambda j: j["spec"].update(ttlSecondsAfterFinished=300))
    assert gc_outs(outs) == [("cancelled", "expiry changed"), ("scheduled", "2026-01-01T00:10:00Z")]
    at(h, "2026-01-01T00:06:40Z")
    assert gc_outs(other_record(h)) == []
    at(h, "2026-01-01T00:10:00Z")
    assert gc_outs(other_record(h))[-1] == ("delete", "default/j", "uid-j")


def test_the_same_record_again_keeps_the_timer():
    h = Harness()
    at(h, FINISHED)
    h.create(ttl_job(100))
    h.tick(10)
    assert gc_outs(h.update_job(lambda j: j["metadata"].update(labels={"x": "y"}))) == []


def test_delete_is_sent_once_per_job_uid():
    h = Harness()
    at(h, FINISHED)
    h.create(ttl_job(0))
    h.tick(1)
    assert gc_outs(h.update_job(lambda j: j["metadata"].update(labels={"x": "y"}))) == []  # not deleted yet
    h.delete_job()
    h.tick(1)
    outs = h.create(ttl_job(0, uid="uid-j2"))  # a new job of the same name
    assert gc_outs(outs)[-1] == ("delete", "default/j", "uid-j2")


# ---------------------------------------------------------------- the bus: TIMER records


def test_on_the_bus_the_timer_fires_on_its_timer_record():
    h = Harness(timers="recorded")
    at(h, FINISHED)
    h.create(ttl_job(100))
    [timer] = h.engine.pending_timers()
    assert (timer.job, timer.due, timer.action) == ("default/j", "2026-01-01T00:06:40Z", "DeleteJob")
    at(h, "2026-01-01T02:00:00Z")
    assert gc_outs(other_record(h)) == []  # recorded mode: the log's time alone fires nothing
    at(h, timer.due)
    assert gc_outs(h.timer(timer.id)) == [
        ("fired",), ("expired", "uid-j", FINISHED, 100), ("delete", "default/j", "uid-j")]
    assert gc_outs(h.timer(timer.id)) == []  # a second TIMER record for it does nothing


def test_gc_timers_do_not_disturb_the_job_timers():
    """A job-scope action cancels the job's own timers (rule B) but never the gc timer."""
    h = Harness()
    at(h, FINISHED)
    h.create(ttl_job(100))
    engine = h.engine
    entry = h.entry
    engine.out = []
    rule_b(engine, entry, "AbortJob", task="", pod="", partition="")
    assert engine.out == [] and [t.action for t in engine.pending_timers()] == ["DeleteJob"]


# ---------------------------------------------------------------- replay


@scenario
def ttl_after_finished() -> list[bytes]:
    h = Harness()
    at(h, FINISHED)
    h.create(ttl_job(60))
    h.feed("ADDED", ttl_job(0, name="k", uid="uid-k"))
    h.feed("ADDED", ttl_job(120, name="gone", uid="uid-gone"))
    h.tick(30)
    h.feed("DELETED", ttl_job(120, name="gone", uid="uid-gone"))
    h.tick(60)
    other_record(h)
    return h.log


def test_replay_deletes_from_the_logs_time_and_reports_it():
    data = b"".join(r + b"\n" for r in ttl_after_finished())
    result = replay_stream(io.BytesIO(data), "log")
    report = {j["name"]: j for j in result.report()["jobs"]}
    assert [c["command"] for c in report["j"]["commands"] if c["command"] == "DeleteJob"] == ["DeleteJob"]
    assert [c["command"] for c in report["k"]["commands"] if c["command"] == "DeleteJob"] == ["DeleteJob"]
    assert [c["command"] for c in report["gone"]["commands"] if c["command"] == "DeleteJob"] == []
    assert result.engine.pending_timers() == []


def test_replay_until_before_the_expiry_leaves_the_timer_pending():
    from vcbus.replaying import Until

    data = b"".join(r + b"\n" for r in ttl_after_finished())
    result = replay_stream(io.BytesIO(data), "log", until=Until("2026-01-01T00:05:59Z"))
    pending = result.report()["jobs"]
    [j] = [x for x in pending if x["name"] == "j"]
    assert j["pendingTimers"] == [
        {"timer": j["pendingTimers"][0]["timer"], "action": "DeleteJob", "due": "2026-01-01T00:06:00Z", "pod": "",
         "policy": "ttlSecondsAfterFinished"}]


def test_gc_decisions_are_the_same_live_and_replayed():
    from tests.test_determinism import replay_outputs

    log = ttl_after_finished()
    engine = Engine()
    h = Harness(engine=engine)
    for data in log:
        h.feed_raw(data)
    live = b"\n".join(o.encoder.encode(x) for x in h.outputs)
    assert live == replay_outputs(b"".join(r + b"\n" for r in log))
    assert sum(isinstance(x, o.DeleteJob) for x in h.outputs) == 2
