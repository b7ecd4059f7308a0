"""Reference §11: the surprising behaviours, one test per numbered quirk.

Where a quirk cannot apply to vcbus (it comes from Volcano's runtime: work
queues, goroutines, API round-trips, the queue controller), the test says why
and checks the documented vcbus behaviour instead (docs/fidelity.md).
"""

from __future__ import annotations

from statemachines import outputs as o
from statemachines.engine import Engine
from tests.builders import (
    Harness,
    command,
    job,
    pod,
    podgroup,
    policy,
    queue,
    running_job,
    scenario,
    task,
)

# 1 -------------------------------------------------------------------------------------------


def test_q01_pods_wait_for_the_podgroup_to_leave_pending():
    h = Harness()
    outs = h.create(job())
    assert outs.of(o.CreatePodGroup) and not outs.created()
    outs = h.pg("Pending")
    assert outs.actions() == ["SyncJob"] and not outs.created()
    outs = h.pg("Inqueue")
    assert outs.actions() == ["SyncJob"] and outs.created() == ["j-t-0", "j-t-1"]
    assert h.pg("Running").actions() == ["SyncJob"]  # every phase change is a request


# 2 -------------------------------------------------------------------------------------------


def test_q02_ltt_moves_on_any_status_change_in_syncjob_and_condition_is_reappended():
    h = running_job(job(tasks=[task(replicas=3, min_available=2)]))
    assert [c.status for c in h.status.conditions] == ["Pending", "Running"]
    h.tick(60)
    outs = h.set_pod("j-t-0", phase="Failed", exit_code=1)
    [write] = outs.writes()
    assert write.state.phase == "Running" and not outs.phases()
    assert write.state.last_transition_time == "2026-01-01T00:01:00Z"
    assert [(c.status, c.last_transition_time) for c in write.conditions] == [
        ("Pending", "2026-01-01T00:00:00Z"), ("Running", "2026-01-01T00:01:00Z")]


# 3 -------------------------------------------------------------------------------------------


def test_q03_kill_paths_overwrite_the_counts_with_what_the_kill_saw():
    j = job(tasks=[task(replicas=3, min_available=2, policies=[policy("RestartPod", "PodFailed")])])
    h = running_job(j)
    h.set_pod("j-t-0", phase="Succeeded")
    assert (h.status.succeeded, h.status.running) == (1, 2)
    outs = h.set_pod("j-t-2", phase="Failed", exit_code=1)
    kill = outs.writes()[0]  # the KillTarget's write
    assert (kill.state.phase, kill.terminating) == ("Restarting", 1)
    assert (kill.succeeded, kill.running, kill.failed, kill.pending, kill.task_status_count) == (0, 0, 0, 0, None)


# 4 -------------------------------------------------------------------------------------------


def test_q04_running_duration_set_by_kills_cleared_by_the_next_pod_reconciling_sync():
    h = running_job(job(tasks=[task(policies=[policy("RestartPod", "PodFailed")])]))
    h.tick(600)
    outs = h.set_pod("j-t-0", phase="Failed", exit_code=1)
    kill, sync = outs.writes()[0], outs.writes()[-1]
    assert kill.running_duration == "10m0s"  # LTT (now) - creationTimestamp
    assert sync.state.phase == "Restarting" and sync.running_duration is None


# 5 -------------------------------------------------------------------------------------------


def test_q05_version_bumps_on_every_killjob_and_old_pod_events_skip_policies():
    h = running_job(job(policies=[policy("RestartJob", "PodEvicted")]))
    h.set_pod("j-t-0", phase="Succeeded")
    outs = h.set_pod("j-t-1", phase="Succeeded")
    assert outs.phases() == [("Running", "Completed")]
    assert h.status.version == 1  # the finished handler's KillJob (Succeeded pods retained)
    outs = h.delete_pod("j-t-0")  # a version-0 pod: PodEvicted, but outdated
    [res] = outs.resolved()
    assert (res.event, res.action, res.phase) == ("PodEvicted", "SyncJob", "Completed")
    assert h.status.version == 2 and h.phase == "Completed"


# 6 -------------------------------------------------------------------------------------------


def test_q06_podgroup_unknown_requests_carry_version_0():
    h = running_job(job(policies=[policy("AbortJob", "Unknown")]))
    h.pg("Unknown")
    assert h.phase == "Aborting"  # version 0: the policy fires
    h = running_job(job(policies=[policy("AbortJob", "Unknown")]))
    h.command("RestartJob")  # version 1
    h.delete_pod("j-t-0")
    h.delete_pod("j-t-1")
    h.pg("Inqueue", new=True)
    h.add_pods()
    h.set_pod("j-t-0", phase="Running")
    h.set_pod("j-t-1", phase="Running")
    assert (h.phase, h.status.version) == ("Running", 1)
    outs = h.pg("Unknown")
    [res] = outs.resolved()
    assert (res.event, res.action) == ("Unknown", "SyncJob") and "version 0 < current 1" in res.reason
    assert h.phase == "Running"


# 7 -------------------------------------------------------------------------------------------


def test_q07_podpending_policies_need_a_timeout():
    h = Harness(job(policies=[policy("AbortJob", "PodPending"), policy("TerminateJob", "*")]))
    h.pg("Inqueue")
    outs = h.add_pod("t", 0)
    assert outs.actions() == ["SyncJob"] and h.phase == "Pending"
    h = Harness(job(policies=[policy("AbortJob", "*", timeout="1m")]))
    h.pg("Inqueue")
    assert [t.action for t in h.add_pod("t", 0).timers()] == ["AbortJob"]


# 8 -------------------------------------------------------------------------------------------


@scenario
def controller_restart_log() -> list[bytes]:
    """A controller restart: the job and its Running pods are listed again (ADDED)."""
    h = Harness(job(tasks=[task(policies=[policy("RestartPod", "PodPending", timeout="1m")])],
                    status={"state": {"phase": "Running"}, "running": 2, "minAvailable": 2}))
    h.feed("ADDED", podgroup(phase="Running"))
    h.add_pod("t", 0, phase="Running")
    h.add_pod("t", 1, phase="Running")
    h.tick(60)
    h.feed("ADDED", queue("other"))
    return h.log


def test_q08_pod_add_always_yields_podpending_even_for_running_pods():
    h = Harness(job(tasks=[task(policies=[policy("RestartPod", "PodPending", timeout="1m")])],
                    status={"state": {"phase": "Running"}, "running": 2, "minAvailable": 2}))
    assert h.phase == "Running"  # adopted
    h.feed("ADDED", podgroup(phase="Running"))
    outs = h.add_pod("t", 0, phase="Running")
    assert outs.events() == ["PodPending"]
    assert [t.pod for t in outs.timers()] == ["j-t-0"]  # a Running pod's PodPending timer...
    h.tick(60)
    outs = h.feed("ADDED", queue("other"))
    assert outs.fired() == ["RestartPod"]  # ...fires: no PodRunning will ever come for it
    assert outs.deleted() == ["j-t-0"]


# 9 -------------------------------------------------------------------------------------------


@scenario
def scale_down_log() -> list[bytes]:
    h = running_job(job(tasks=[task(replicas=3, min_available=2)], policies=[policy("RestartJob", "PodEvicted")]))
    h.update_job(lambda j: j["spec"]["tasks"][0].update(replicas=2))
    h.tick(30)
    h.delete_pod("j-t-2")
    return h.log


def test_q09_scale_down_deletes_are_not_marked_so_they_raise_podevicted():
    h = running_job(job(tasks=[task(replicas=3, min_available=2)], policies=[policy("RestartJob", "PodEvicted")]))
    outs = h.update_job(lambda j: j["spec"]["tasks"][0].update(replicas=2))
    [d] = outs.of(o.DeletePod)
    assert (d.name, d.mark_out_of_sync, d.reason) == ("j-t-2", False, "scale-down")
    assert h.status.terminating == 1
    outs = h.delete_pod("j-t-2")
    assert outs.events()[0] == "PodEvicted" and outs.actions()[0] == "RestartJob"
    assert h.phase == "Restarting"


# 10 ------------------------------------------------------------------------------------------


def test_q10_taskfailed_only_on_same_phase_updates():
    h = Harness(job(tasks=[task(policies=[policy("RestartJob", "TaskFailed")])]))
    h.pg("Inqueue")
    h.add_pods()
    outs = h.set_pod("j-t-0", phase="Running", restarts=5)
    assert outs.events()[0] == "PodRunning" and h.status.retry_count == 0
    outs = h.set_pod("j-t-0", restarts=6)
    assert outs.events()[0] == "TaskFailed" and outs.actions()[0] == "RestartJob"
    assert h.status.retry_count == 1


# 11 ------------------------------------------------------------------------------------------


def restart_round(h: Harness) -> None:
    """After a RestartJob: old pods go, the new PodGroup is scheduled, new pods run."""
    for name in ("j-t-0", "j-t-1"):
        if ("Pod", name) in h.objects:
            h.delete_pod(name)
    h.pg("Inqueue", new=True)
    h.add_pods()
    h.set_pod("j-t-0", phase="Running")
    h.set_pod("j-t-1", phase="Running")


@scenario
def max_retry_log() -> list[bytes]:
    h = running_job(job(max_retry=2, policies=[policy("RestartJob", "PodFailed")]))
    h.set_pod("j-t-0", phase="Failed", exit_code=1)
    restart_round(h)
    h.set_pod("j-t-1", phase="Failed", exit_code=1)
    return h.log


def test_q11_max_retry_counts_attempts_and_the_last_attempt_keeps_failed_pods():
    h = running_job(job(max_retry=2, policies=[policy("RestartJob", "PodFailed")]))
    outs = h.set_pod("j-t-0", phase="Failed", exit_code=1)
    assert outs.deleted() == ["j-t-0", "j-t-1"]  # first restart: retain None, the Failed pod goes too
    assert (h.phase, h.status.retry_count) == ("Restarting", 1)
    restart_round(h)
    assert h.phase == "Running"
    outs = h.set_pod("j-t-1", phase="Failed", exit_code=1)  # retryCount 1 >= maxRetry - 1: last retry
    assert outs.deleted() == ["j-t-0"]  # Soft: the Failed pod is kept for its logs
    assert outs.phases() == [("Running", "Restarting"), ("Restarting", "Failed")]
    assert h.status.retry_count == 2  # maxRetry 2 = 2 attempts; only 1 rerun


# 12 ------------------------------------------------------------------------------------------


def test_q12_abort_terminate_complete_are_ignored_in_restarting():
    h = running_job()
    h.command("RestartJob")
    assert h.phase == "Restarting"
    for action in ("AbortJob", "TerminateJob", "CompleteJob"):
        version = h.status.version
        outs = h.command(action)
        assert h.phase == "Restarting" and not outs.phases()
        assert h.status.version == version + 1  # a plain KillJob


def test_q12_resume_in_pending_or_running_is_a_sync():
    h = running_job()
    outs = h.command("ResumeJob")
    assert not outs.of(o.DeletePod) and h.status.retry_count == 0 and h.phase == "Running"
    h = Harness(job())
    outs = h.command("ResumeJob")
    assert not outs.of(o.DeletePod) and h.status.retry_count == 0 and h.phase == "Pending"


# 13 ------------------------------------------------------------------------------------------


def test_q13_a_command_is_executed_at_most_once():
    """Not applicable as such: vcbus never sees its DeleteBusCommand fail (no API round-trip in the
    fold), so "already gone" cannot be observed. The documented behaviour that stands for it: a
    Command (by uid) is consumed once, even if its ADDED is seen again (a relist)."""
    h = running_job()
    h.command("AbortJob")
    assert h.phase == "Aborting"
    h.command("ResumeJob", uid="uid-resume")
    retry = h.status.retry_count
    again = h.command("ResumeJob", uid="uid-resume")
    assert again == [] and h.status.retry_count == retry == 1


# 14 ------------------------------------------------------------------------------------------


def test_q14_failing_sync_is_terminated_at_once():
    """Volcano retries 15 times, then forces TerminateJob; vcbus takes that path at once (docs/fidelity.md)."""
    h = Harness()
    h.feed("ADDED", queue("default"))
    outs = h.create(job(queue="missing"))
    assert [f.message for f in outs.of(o.SyncFailed)][:1] == ['queues.scheduling.volcano.sh "missing" not found']
    assert "Job failed on action SyncJob for retry limit reached" in outs.messages()
    assert outs.phases() == [("", "Terminating"), ("Terminating", "Terminated")]


def test_q14_forced_termination_in_restarting_is_a_plain_kill():
    h = Harness()
    h.feed("ADDED", queue("default"))
    h.create(job())
    h.pg("Inqueue")
    h.add_pods()
    h.command("RestartJob")
    assert h.phase == "Restarting"
    h.feed("DELETED", queue("default"))
    version = h.status.version
    outs = h.delete_pod("j-t-0")  # SyncJob in Restarting fails -> TerminateJob -> Restarting's KillJob
    assert outs.of(o.SyncFailed)
    assert h.phase == "Restarting" and h.status.version == version + 1
    assert "Terminating" not in [p[1] for p in outs.phases()]


# 15 ------------------------------------------------------------------------------------------


def test_q15_restart_task_or_pod_on_a_job_level_event_kills_nothing_but_restarts():
    for action in ("RestartTask", "RestartPod"):
        h = running_job(job(policies=[policy(action, "Unknown")]))
        outs = h.pg("Unknown")
        assert outs.actions()[0] == action
        assert not outs.of(o.DeletePod)
        # Restarting, and (nothing terminating, pods still running) straight back through Pending to Running
        assert outs.phases() == [("Running", "Restarting"), ("Restarting", "Pending"), ("Pending", "Running")]
        assert h.status.retry_count == 1


def test_q15_restart_partition_without_a_matching_partition_does_nothing_at_all():
    j = job(tasks=[task(replicas=2, partition=(1, 2))], policies=[policy("RestartPartition", "Unknown")])
    h = running_job(j)
    outs = h.pg("Unknown")  # job-level event: no task, no partition
    assert outs.actions()[0] == "RestartPartition"
    assert not outs.of(o.DeletePod) and not outs.writes()
    assert (h.phase, h.status.retry_count) == ("Running", 0)


def test_q15_restart_partition_of_a_task_without_partition_policy_does_nothing():
    """killPods: `jobInfo.Partitions[task]` exists only for tasks with a partitionPolicy."""
    j = job(tasks=[task(policies=[policy("RestartPartition", "PodFailed")])])
    h = Harness(j)
    h.pg("Inqueue")
    for i in range(2):
        h.feed("ADDED", pod(index=i, phase="Running", partition="0"))  # the label from the user's template
    outs = h.feed("MODIFIED", pod(index=0, phase="Failed", exit_code=1, partition="0"))
    assert outs.actions()[0] == "RestartPartition"
    assert not outs.of(o.DeletePod) and h.status.retry_count == 0


def test_q15_restart_partition_kills_the_requesting_pods_partition():
    j = job(tasks=[task(replicas=4, partition=(2, 2), policies=[policy("RestartPartition", "PodFailed")])])
    h = Harness(j)
    h.pg("Inqueue")
    for i in range(4):
        h.feed("ADDED", pod(index=i, phase="Running", partition=str(i // 2)))
    outs = h.feed("MODIFIED", pod(index=3, phase="Failed", exit_code=1, partition="1"))
    assert outs.deleted() == ["j-t-2", "j-t-3"]
    assert (h.phase, h.status.retry_count) == ("Restarting", 1)


# 16 ------------------------------------------------------------------------------------------


def test_q16_registry_is_keyed_per_pod_name_and_job_level_events_use_empty_key():
    j = job(tasks=[task(policies=[policy("RestartPod", "PodPending", timeout="5m")])],
            policies=[policy("AbortJob", "Unknown", timeout="5m")])
    h = Harness(j)
    h.pg("Inqueue")
    h.add_pods()
    h.pg("Unknown")
    assert sorted(h.entry.timers) == ["", "j-t-0", "j-t-1"]


@scenario
def replaced_timer_log() -> list[bytes]:
    h = Harness(job(tasks=[task(replicas=1, policies=[policy("RestartPod", "PodPending", timeout="5m"),
                                                      policy("AbortJob", "TaskFailed", timeout="10m")])]))
    h.pg("Inqueue")
    h.add_pod("t", 0)
    h.tick(60)
    h.set_pod("j-t-0", restarts=3)
    h.tick(300)
    h.feed("ADDED", queue("other"))
    h.tick(600)
    h.feed("ADDED", queue("other2"))
    return h.log


def test_q16_a_different_action_replaces_the_entry_but_the_old_timer_still_fires():
    h = Harness(job(tasks=[task(replicas=1, policies=[policy("RestartPod", "PodPending", timeout="5m"),
                                                      policy("AbortJob", "TaskFailed", timeout="10m")])]))
    h.pg("Inqueue")
    [first] = h.add_pod("t", 0).timers()
    h.tick(60)
    outs = h.set_pod("j-t-0", restarts=3)  # Pending -> Pending, restarts >= 3: TaskFailed
    [second] = outs.timers()
    assert not outs.cancelled()
    assert h.entry.timers["j-t-0"].action == "AbortJob"  # replaced...
    assert [t.action for t in h.engine.pending_timers()] == ["RestartPod", "AbortJob"]  # ...not cancelled
    h.tick(240)
    outs = h.feed("ADDED", queue("other"))
    assert outs.fired() == ["RestartPod"]  # the replaced timer fires
    assert (h.phase, h.status.retry_count) == ("Restarting", 1)
    assert [t.id for t in h.engine.pending_timers()] == [second.timer]  # pod scope: the AbortJob survives
    assert first.timer != second.timer


def test_q16_a_fired_action_runs_before_the_record_that_passed_its_due_time():
    """Volcano runs delayed actions on their own goroutine, outside the job's worker. vcbus has no
    goroutines: a timer fires when the log's time passes it, before that record is handled."""
    h = running_job(job(policies=[policy("AbortJob", "PodFailed", timeout="1m")]))
    h.set_pod("j-t-0", phase="Failed", exit_code=1)
    h.tick(61)
    outs = h.set_pod("j-t-1", phase="Succeeded")
    kinds = [type(x).__name__ for x in outs]
    assert kinds.index("TimerFired") < kinds.index("ActionResolved", kinds.index("TimerFired") + 1)
    assert outs.resolved()[-1].phase != "Running"


# 17 ------------------------------------------------------------------------------------------


def test_q17_queue_state_is_the_queue_controllers_business():
    """Not applicable: vcbus has no queue controller (Closing -> Closed is out of its scope). The job
    controller only needs the queue to exist (syncJob's lister Get): a Closed queue still syncs,
    and queues are checked only once the log has shown one (docs/fidelity.md)."""
    h = Harness(job(queue="nowhere"))
    assert h.phase == "Pending" and not h.outputs.of(o.SyncFailed)  # no Queue in the log yet
    closed = queue("q")
    closed["status"]["state"] = "Closed"
    h = Harness()
    h.feed("ADDED", closed)
    h.create(job(queue="q"))
    assert h.phase == "Pending" and not h.outputs.of(o.SyncFailed)
    strict = Harness(engine=Engine(strict_queues=True))
    strict.create(job(queue="q"))
    assert strict.outputs.of(o.SyncFailed)


# 18 ------------------------------------------------------------------------------------------


def test_q18_reason_message_never_set_and_jobupdated_never_raised():
    j = job(tasks=[task(replicas=2)], policies=[policy("AbortJob", "JobUpdated"), policy("AbortJob", "*")])
    j["spec"]["runningEstimate"] = "1h"
    h = running_job(j)
    outs = h.update_job(lambda x: x["spec"]["tasks"][0].update(replicas=3))  # a scale-up
    assert outs.events() == ["OutOfSync"] and h.phase == "Running"
    h.set_pod("j-t-0", phase="Succeeded")
    assert all(w.state.reason == "" and w.state.message == "" for w in h.outputs.writes())
    assert "JobUpdated" not in h.outputs.events()


# 19 ------------------------------------------------------------------------------------------


def test_q19_finished_states_process_every_request_with_killjob_and_a_status_write():
    h = running_job()
    h.set_pod("j-t-0", phase="Succeeded")
    h.set_pod("j-t-1", phase="Succeeded")
    assert h.phase == "Completed"
    ltt = h.status.state.last_transition_time
    steps = (lambda: h.update_job(lambda j: j["spec"].update(priorityClassName="high")),
             lambda: h.command("ResumeJob"), lambda: h.delete_pod("j-t-0"))
    for step in steps:
        version = h.status.version
        h.tick(5)
        outs = step()
        assert len(outs.writes()) == 1 and h.status.version == version + 1
        assert h.phase == "Completed" and h.status.state.last_transition_time == ltt


# 20 ------------------------------------------------------------------------------------------


def test_q20_each_record_is_handled_in_log_order_identical_records_are_ignored():
    """Not applicable as such: vcbus has no work queue to de-duplicate in (one record is folded at a
    time, to completion, so one job's requests are serialised by construction). An identical record
    (same resourceVersion, as an informer resync) is ignored; distinct records are each handled."""
    h = running_job()
    obj = h.get("Pod", "j-t-0")
    obj["status"]["phase"] = "Failed"
    first = h.feed("MODIFIED", obj)
    assert first.events() == ["PodFailed"]
    obj = h.get("Pod", "j-t-0")
    assert h.feed("MODIFIED", obj, bump=False) == []
    assert [len(h.feed("MODIFIED", obj).resolved()) for _ in range(2)] == [1, 1]


def test_q20_commands_for_one_job_are_serialised_with_its_pod_events():
    h = running_job()
    h.feed("ADDED", command("j", "AbortJob", name="c1"))
    outs = h.feed("ADDED", command("j", "ResumeJob", name="c2"))
    assert outs.phases()[0] == ("Aborting", "Restarting")
