"""Version following: a job version the log shows, that vcbus did not write, becomes vcbus's.

Volcano bumps `status.version` once per request it handles in Aborting, Aborted,
Completing and Terminating, so its count depends on timing and vcbus's own count
drifts from it. A real abort/resume run ended with Volcano creating the resumed
pods at version 10 while vcbus stood at 12, and vcbus then ignored their
PodFailed ("event from job version 10 < current 12"). These tests rebuild that
shape: vcbus follows a recorded status version that is news, and a pod version
above its own; its own writes coming back change nothing.
"""

from __future__ import annotations

from statemachines import outputs as o
from tests.builders import job, policy, running_job


def recorded(phase: str, version: int, retry: int = 0):
    """A status write by another controller, as the next record of the vcjob shows it."""

    def change(obj: dict) -> None:
        obj["status"] = {"state": {"phase": phase}, "version": version, "retryCount": retry, "minAvailable": 2}

    return change


def aborted_then_resumed_by_volcano():
    h = running_job(job(max_retry=5, policies=[policy("RestartJob", "PodFailed")]))
    h.command("AbortJob")
    h.delete_pod("j-t-0")
    h.delete_pod("j-t-1")
    assert h.phase == "Aborted" and h.status.version == 5  # one bump per request handled while aborting
    return h


def test_a_recorded_version_below_vcbus_own_is_followed_and_the_resumed_pods_count():
    h = aborted_then_resumed_by_volcano()
    h.update_job(recorded("Aborted", 2))  # Volcano handled fewer requests: its version is 2
    assert h.status.version == 2
    h.command("ResumeJob")
    assert (h.phase, h.status.version, h.status.retry_count) == ("Pending", 3, 1)
    h.update_job(recorded("Restarting", 3, 1))
    h.update_job(recorded("Pending", 3, 1))
    h.pg("Inqueue", new=True)
    h.add_pods("t", 2, version=3)  # the pods Volcano created for the resumed job
    h.set_pod("j-t-0", phase="Running")
    h.set_pod("j-t-1", phase="Running")
    outs = h.set_pod("j-t-0", phase="Failed", exit_code=1)
    [first, *_] = outs.resolved()
    assert (first.event, first.action, first.policy) == ("PodFailed", "RestartJob", "job[0]")
    assert h.phase == "Restarting" and h.status.retry_count == 2


def test_without_the_recorded_version_the_same_pods_would_be_outdated():
    h = aborted_then_resumed_by_volcano()
    h.command("ResumeJob")
    assert h.status.version == 6
    h.pg("Inqueue", new=True)
    h.add_pods("t", 2, version=3)
    h.set_pod("j-t-0", phase="Running")
    h.set_pod("j-t-1", phase="Running")
    outs = h.set_pod("j-t-0", phase="Failed", exit_code=1)
    [first, *_] = outs.resolved()
    assert first.action == "SyncJob" and first.reason == "event from job version 3 < current 6"


def test_vcbus_own_writes_coming_back_late_are_not_followed():
    h = running_job(job(max_retry=5, policies=[policy("RestartJob", "PodFailed")]))
    h.set_pod("j-t-0", phase="Failed", exit_code=1)
    writes = h.outputs.of(o.UpdateJobStatus)
    version = h.status.version
    assert version >= 1 and len({w.status.version for w in writes}) > 1
    for w in writes:  # the actuator's writes reach the log after vcbus moved on
        h.update_job(recorded(w.status.state.phase, w.status.version, w.status.retry_count))
        assert h.status.version == version


def test_a_repeated_adopted_status_is_no_news():
    h = running_job(job(max_retry=5))
    h.update_job(recorded("Running", 7))
    assert h.status.version == 7
    h.command("RestartJob")
    assert h.status.version == 8
    h.update_job(recorded("Running", 7))  # the same write again (another record of the vcjob)
    assert h.status.version == 8


def test_a_pod_above_vcbus_version_is_followed_one_below_is_outdated():
    h = running_job(job(max_retry=5, policies=[policy("AbortJob", "PodFailed")]))
    h.add_pod("t", 2, version=4)  # created by another controller at its version 4
    assert h.status.version == 4
    h.add_pod("t", 3, version=1)
    assert h.status.version == 4
    outs = h.set_pod("j-t-3", phase="Failed", exit_code=2)
    assert outs.resolved()[0].reason == "event from job version 1 < current 4"
