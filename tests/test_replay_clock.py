"""The replay clock of a kubectl log: a record's time is when its object was written, never a future time.

A kubectl watch log carries no time of its own; replay derives it from the
object (`statemachines.model.record_time.object_time`). A pod being deleted carries a
`deletionTimestamp` of the deletion time *plus* its grace period (30 s), a time
in the future: taken as the record's time it would push the clock ahead,
stretch `runningDuration` by the grace period and fire delayed actions early.
The logs here are what `kubectl get -w -o json` prints (no `time` field), the
deleting pod written as the API server writes it.
"""

from __future__ import annotations

import copy
import io

import msgspec

from statemachines import outputs as o
from statemachines.model.record_time import deletion_requested, object_time
from statemachines.model.records import decode
from tests.builders import job, pod, podgroup, policy, task
from vcbus.replaying import replay_stream

START = "2026-11-30T08:00:00Z"


def at(second: int) -> str:
    return f"2026-11-30T08:{second // 60:02d}:{second % 60:02d}Z"


class KubectlLog:
    """Watch records as kubectl prints them: no `time`, one resourceVersion counter."""

    def __init__(self) -> None:
        self.rv = 1000
        self.lines: list[bytes] = []

    def put(self, rtype: str, obj: dict) -> dict:
        obj = copy.deepcopy(obj)
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.lines.append(msgspec.json.encode({"type": rtype, "object": obj}) + b"\n")
        return obj

    def replay(self) -> list[o.Output]:
        outs: list[o.Output] = []
        replay_stream(io.BytesIO(b"".join(self.lines)), "log", on_record=lambda seq, got: outs.extend(got))
        return outs


def running(p: dict, second: int) -> dict:
    """The kubelet reports the pod Running at `second` (a condition and a container start time)."""
    p = copy.deepcopy(p)
    p["status"]["phase"] = "Running"
    p["status"]["conditions"] = [{"type": "Ready", "status": "True", "lastTransitionTime": at(second)}]
    p["status"]["containerStatuses"][0].update(ready=True, state={"running": {"startedAt": at(second)}})
    return p


def deleting(p: dict, second: int, grace: int = 30) -> dict:
    """`kubectl delete pod` at `second`: the API server sets deletionTimestamp to that time plus the grace period."""
    p = copy.deepcopy(p)
    p["metadata"]["deletionTimestamp"] = at(second + grace)
    p["metadata"]["deletionGracePeriodSeconds"] = grace
    return p


def started(log: KubectlLog, job_obj: dict) -> list[dict]:
    """The job, its PodGroup scheduled at 1 s, its two pods created Pending at 1 s."""
    log.put("ADDED", job_obj)
    pg = podgroup("j", "")
    pg["metadata"]["creationTimestamp"] = at(1)
    pg = log.put("ADDED", pg)
    pg["status"] = {"phase": "Running"}
    log.put("MODIFIED", pg)
    return [log.put("ADDED", pod("j", "t", i, created=at(1))) for i in range(2)]


def test_a_deleting_pods_record_is_timed_when_the_deletion_was_asked_for():
    p = deleting(running(pod("j", "t", 0, created=at(1)), 2), 5)
    rec = decode(msgspec.json.encode({"type": "MODIFIED", "object": p}))
    assert rec.object.metadata.deletion_timestamp == at(35)  # type: ignore[union-attr]
    assert deletion_requested(rec.object.metadata) == at(5)  # type: ignore[union-attr]
    assert object_time(rec.object) == at(5)  # type: ignore[union-attr]
    # without a grace period (a forced deletion, a custom resource) deletionTimestamp is the moment itself
    p["metadata"].pop("deletionGracePeriodSeconds")
    p["metadata"]["deletionTimestamp"] = at(6)
    assert object_time(decode(msgspec.json.encode({"type": "MODIFIED", "object": p})).object) == at(6)


def test_managed_fields_times_say_when_the_object_was_written():
    p = running(pod("j", "t", 0, created=at(1)), 2)
    p["metadata"]["managedFields"] = [
        {"manager": "kubelet", "operation": "Update", "time": at(7), "fieldsType": "FieldsV1",
         "fieldsV1": {"f:status": {"f:phase": {}}}, "subresource": "status"},
        {"manager": "vcbus", "operation": "Update", "time": at(1), "fieldsType": "FieldsV1", "fieldsV1": {}},
    ]
    assert object_time(decode(msgspec.json.encode({"type": "MODIFIED", "object": p})).object) == at(7)


def test_running_duration_does_not_grow_by_the_grace_period_of_an_evicted_pod():
    log = KubectlLog()
    pods = started(log, job(tasks=[task("t", 2)], policies=[policy("RestartJob", "PodEvicted")], created=START))
    pods = [log.put("MODIFIED", running(p, 2)) for p in pods]
    gone = log.put("MODIFIED", deleting(pods[0], 5))  # someone deletes a running pod at 08:00:05
    log.put("DELETED", gone)  # the kubelet confirms at once: the record still says deletionTimestamp 08:00:35
    outs = log.replay()
    (restart,) = [c for c in outs if isinstance(c, o.PhaseChanged) and c.to_phase == "Restarting"]
    assert restart.time == at(5)
    (written,) = [c.status for c in outs if isinstance(c, o.StatusChanged) and c.status.state.phase == "Restarting"]
    assert written.running_duration == "5s"  # 08:00:05 - creation 08:00:00, not 35s
    assert written.state.last_transition_time == at(5)


def test_a_delayed_action_due_inside_the_grace_period_does_not_fire_early():
    log = KubectlLog()
    pending = policy("RestartJob", "PodPending", timeout="20s")  # due at 08:00:21 for each pod created at 1 s
    pods = started(log, job(tasks=[task("t", 2)], policies=[pending], created=START))
    first = log.put("MODIFIED", running(pods[0], 2))
    log.put("MODIFIED", deleting(first, 5))  # deletionTimestamp 08:00:35: past the timers' due time
    log.put("MODIFIED", running(pods[1], 10))  # the second pod runs at 08:00:10: its timer is cancelled
    outs = log.replay()
    timers = {t.pod: t for t in outs if isinstance(t, o.TimerScheduled)}
    assert {p: t.due for p, t in timers.items()} == {"j-t-0": at(21), "j-t-1": at(21)}
    assert not [f for f in outs if isinstance(f, o.TimerFired)]
    cancelled = {c.timer for c in outs if isinstance(c, o.TimerCancelled)}
    assert cancelled == {timers["j-t-0"].timer, timers["j-t-1"].timer}
    assert max(x.time for x in outs) == at(10)  # the clock never went to 08:00:35
