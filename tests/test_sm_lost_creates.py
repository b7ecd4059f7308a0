"""A pod whose CreatePod never landed: does the next sync decide it again, as Volcano's does?

Volcano's syncJob (`pkg/controllers/job/job_controller_actions.go`) walks every index of every
task and creates each pod its informer cache does not hold; a create that failed returns an error
and the job is synced again. It never remembers its own creates: a pod is in its cache only once
the watch brings it, so every later sync of the job (any pod or PodGroup change, the requeue after
an error) creates a pod that is still missing, whatever became of the first create.

vcbus caches a decided pod at once as Pending (docs/fidelity.md "The cache reflects our own writes
at once"; `statemachines/job/sync.py` `_create` puts a placeholder). These tests feed the engine
the records a cluster would show after its CreatePods went out and one of them never landed, and
look for a second CreatePod of that name (issue 31):

- refused for good by the API server: the actuator appends a REFUSED record to the log
  (statemachines/intake/refusals.py), the placeholder goes, and the job's next sync, or its
  requeue with Volcano's backoff (a timer of policy `backoff`), creates the pod again; 15 requeues
  refused in a row, and the next refusal terminates the job, as Volcano's handleJobError;
- lost (no pod, no refusal, ever): after `LOST_CREATE_AFTER` seconds of the log's time the next
  sync counts it missing and creates it again (docs/fidelity.md).
"""

from __future__ import annotations

import msgspec
import pytest

from statemachines import outputs as o
from statemachines.engine import Engine
from statemachines.intake.refusals import MAX_REQUEUE
from statemachines.job.sync import LOST_CREATE_AFTER
from statemachines.model.records import RecordError, decode
from tests.builders import Harness, job, task

LOST = "j-t-2"


def refuse(h: Harness, name: str = LOST, *, seq: int | None = None, uid: str | None = None, code: int = 403,
           message: str = 'pods "j-t-2" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=2, '
                          'limited: pods=2') -> o.Output | list:
    """The REFUSED record the actuator appends when the API server refuses the CreatePod of `name`."""
    create = [c for c in h.outputs.of(o.CreatePod) if c.name == name][-1]
    body = {"type": "REFUSED", "time": h.now, "refusal": {
        "job": h.key, "command": "CreatePod", "name": name, "task": create.task, "seq": create.seq if seq is None else seq,
        "jobUid": create.job_uid if uid is None else uid, "jobVersion": create.job_version, "code": code,
        "reason": "Forbidden", "message": message}}
    return h.feed_raw(msgspec.json.encode(body))


def three_created() -> Harness:
    """A job of 3 pods (minAvailable 2), its PodGroup Inqueue: the three CreatePods decided."""
    h = Harness(job(tasks=[task(replicas=3, min_available=2)]))
    outs = h.pg("Inqueue")
    assert sorted(outs.created()) == ["j-t-0", "j-t-1", LOST]
    return h


def test_the_pods_that_landed_are_not_created_again() -> None:
    """Control: the two pods the log shows are never decided twice (nothing is re-created blindly)."""
    h = three_created()
    later = h.add_pod("t", 0)
    later += h.add_pod("t", 1)
    later += h.set_pod("j-t-0", phase="Running")
    later += h.set_pod("j-t-1", phase="Running")
    assert "j-t-0" not in later.created() and "j-t-1" not in later.created()


def test_a_deleted_pod_is_created_again() -> None:
    """Control: a pod the log shows gone is missing again, and the next sync creates it (Volcano's too)."""
    h = three_created()
    h.add_pod("t", 0), h.add_pod("t", 1), h.add_pod("t", 2)
    again = h.delete_pod(LOST)
    assert LOST in again.created()


def test_a_pod_that_never_landed_is_created_on_the_next_sync() -> None:
    """Two of three pods come and run; the third's create never landed (no pod, no refusal). Each of
    these records is one more syncJob of the job in Volcano, which creates the third pod again; vcbus
    counts its own create lost once the log's time is LOST_CREATE_AFTER past it."""
    h = three_created()
    later = h.add_pod("t", 0)
    later += h.add_pod("t", 1)
    later += h.set_pod("j-t-0", phase="Running")
    later += h.set_pod("j-t-1", phase="Running")
    assert LOST not in later.created()  # not yet lost: it may still land
    h.tick(LOST_CREATE_AFTER)
    later += h.pg("Running")
    assert LOST in later.created(), f"no CreatePod for {LOST} after {len(later)} outputs of later syncs"


def test_a_create_that_lands_late_is_not_lost() -> None:
    """Control: a pod the log shows before LOST_CREATE_AFTER is never created again, even much later."""
    h = three_created()
    later = h.add_pods("t", 3)
    h.tick(LOST_CREATE_AFTER * 3)
    later += h.pg("Running")
    later += h.set_pod(LOST, phase="Running")
    assert later.created() == []


def landed_two() -> Harness:
    h = three_created()
    h.add_pod("t", 0), h.add_pod("t", 1)
    h.set_pod("j-t-0", phase="Running"), h.set_pod("j-t-1", phase="Running")
    return h


def test_a_refused_create_is_recorded_and_requeued() -> None:
    """The REFUSED record: the FailedCreate Event in Volcano's words, SyncFailed, a requeue after the rate
    limiter's first backoff (5 ms, a second in the log's whole seconds), and no CreatePod yet."""
    h = landed_two()
    outs = refuse(h)
    assert outs.created() == []
    assert h.entry.find_pod("t", LOST) is None  # out of the cache: the log will never show it
    events = [(e.event_type, e.reason, e.message) for e in outs.of(o.RecordEvent)]
    assert events == [("Warning", "FailedCreate", "Error creating pods: [failed to create pod j-t-2, err: 403 Forbidden: "
                       'pods "j-t-2" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=2, limited: pods=2]')]
    assert [f.message for f in outs.of(o.SyncFailed)] == [events[0][2][len("Error creating pods: ["):-1]]
    (timer,) = outs.timers()
    assert (timer.action, timer.policy) == ("SyncJob", "backoff")
    assert timer.due > h.now
    h.tick(1)
    again = h.timer(timer.timer)
    assert again.fired() == ["SyncJob"] and again.created() == [LOST]


def test_two_pods_refused_by_one_sync_are_one_failure() -> None:
    """Volcano's failed sync records one FailedCreate Event (listing its pods) and is requeued once."""
    h = three_created()
    h.add_pod("t", 0)
    outs = refuse(h, "j-t-1")
    outs += refuse(h, LOST)
    assert [e.reason for e in outs.of(o.RecordEvent)] == ["FailedCreate"]
    assert len(outs.of(o.SyncFailed)) == 2 and len(outs.timers()) == 1
    assert h.entry.find_pod("t", "j-t-1") is None and h.entry.find_pod("t", LOST) is None
    again = h.set_pod("j-t-0", phase="Running")
    assert sorted(again.created()) == ["j-t-1", LOST]


def test_the_next_record_creates_a_refused_pod_before_its_requeue() -> None:
    """Any sync of the job creates the refused pod again (Volcano's syncJob creates what its cache lacks)."""
    h = landed_two()
    refuse(h)
    again = h.set_pod("j-t-0", restarts=1)
    assert again.created() == [LOST]


def test_a_refusal_of_a_pod_that_is_there_changes_nothing_in_the_cache() -> None:
    """AlreadyExists is no refusal; and a REFUSED record for a pod the log shows (a second create of
    the same name refused) leaves the pod in the cache: it is never created twice."""
    h = landed_two()
    h.add_pod("t", 2)
    outs = refuse(h, "j-t-0")
    outs += h.set_pod("j-t-1", restarts=1)
    assert outs.created() == []
    assert h.entry.find_pod("t", "j-t-0") is not None


def test_a_refusal_for_an_earlier_incarnation_is_ignored() -> None:
    h = landed_two()
    outs = refuse(h, uid="uid-of-an-earlier-j")
    assert list(outs) == [] and h.entry.find_pod("t", LOST) is not None


def test_a_pod_refused_sixteen_times_in_a_row_terminates_the_job() -> None:
    """handleJobError: 15 requeues with backoff (5 ms doubled: in whole seconds 1, 1, ... 41, 82), each
    refused again, and the next failure terminates the job (`--max-requeue-num` 15)."""
    h = landed_two()
    dues = []
    for _ in range(MAX_REQUEUE):  # the first failure and its 14 requeues, refused again
        refuse(h)
        timer = h.outputs.timers()[-1]
        dues.append((timer.due, h.now))
        h.clock = max(h.clock, _parse(timer.due))
        fired = h.timer(timer.timer)  # the 15th requeue's sync
        assert fired.created() == [LOST] and h.phase == "Running"
    waits = [_parse(due) - _parse(at) for due, at in dues]
    assert waits == [1] * 8 + [2, 3, 6, 11, 21, 41, 82]
    assert "Job failed on action SyncJob for retry limit reached" not in h.outputs.messages()
    refuse(h)  # the sixteenth failure
    assert "Job failed on action SyncJob for retry limit reached" in h.outputs.messages()
    assert h.phase in ("Terminating", "Terminated")


def test_the_same_log_gives_the_same_decisions() -> None:
    """A log with REFUSED records and the requeue's TIMER record, folded again from scratch: the same outputs."""
    h = landed_two()
    refuse(h)
    timer = h.outputs.timers()[-1]
    h.tick(1)
    h.timer(timer.timer)
    h.add_pod("t", 2)
    again = Engine()
    outputs = [out for seq, data in enumerate(h.log, 1) for out in again.apply(seq, decode(data), raw=data)]
    assert outputs == list(h.outputs)


def _parse(ts: str) -> int:
    from statemachines.model.timefmt import parse

    return parse(ts)


@pytest.mark.parametrize("body, says", [
    ({"type": "REFUSED", "refusal": {"job": "nojob", "command": "CreatePod"}}, "refusal.job 'nojob' is not NAMESPACE/NAME"),
    ({"type": "REFUSED", "refusal": {"job": "a/b", "command": ""}}, "refusal.command is empty"),
    ({"type": "REFUSED", "time": "soon", "refusal": {"job": "a/b", "command": "CreatePod"}}, "time 'soon' is not an RFC 3339"),
    ({"type": "REFUSED"}, 'invalid REFUSED record: Object missing required field `refusal`'),
    ({"type": "REFUSED", "refusal": {"job": "a/b", "command": "CreatePod", "seq": "7"}}, "Expected `int`, got `str`"),
])
def test_a_bad_refused_record_says_what_is_wrong(body, says) -> None:
    with pytest.raises(RecordError) as bad:
        decode(msgspec.json.encode(body))
    assert says in str(bad.value)
