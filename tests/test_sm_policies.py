"""Reference §5: applyPolicies, immediate vs delayed actions, and cancellation rules A and B.

Volcano: `pkg/controllers/job/job_controller_util.go` (applyPolicies,
GetStateAction, GetActionType), `job_controller.go` (processNextReq,
CleanPodDelayActionsIfNeed, AddDelayActionForJob, cleanupDelayActions) and
`job_controller_util_test.go` (TestApplyPolicies).
"""

from __future__ import annotations

import pytest

from statemachines import outputs as o
from statemachines.policies import Request, resolve
from statemachines.timers.rules import Timer, rule_a_cancels, rule_b_cancels, scope
from tests.builders import Harness, decode_job, job, policy, queue, running_job, task

# ---------------------------------------------------------------- §5.1 the algorithm, rule by rule


def resolved(job_obj: dict, *, version: int = 0, **req) -> tuple[str, float, str]:
    r = resolve(decode_job(job_obj), Request(**req), version=version)
    return r.action, r.delay, r.policy


WILDCARD = job(policies=[policy("AbortJob", "*")])


def test_command_action_passes_through_unvalidated():
    """Step 2: request.Action wins (even a string no handler knows), delay 0, before any other check."""
    assert resolved(WILDCARD, action="NotAnAction", event="CommandIssued", source="command") == (
        "NotAnAction", 0, "command")
    assert resolved(WILDCARD, action="ResumeJob", job_uid="other", job_version=-1)[0] == "ResumeJob"


@pytest.mark.parametrize("event", ["OutOfSync", "CommandIssued", "PodRunning"])
def test_internal_event_resolves_to_syncjob_even_with_wildcard_policy(event):
    assert resolved(WILDCARD, event=event, task="t", pod="j-t-0")[0] == "SyncJob"


def test_event_from_another_job_uid_resolves_to_syncjob():
    assert resolved(WILDCARD, event="PodFailed", job_uid="uid-old-j")[0] == "SyncJob"
    assert resolved(WILDCARD, event="PodFailed", job_uid="uid-j")[0] == "AbortJob"
    assert resolved(WILDCARD, event="PodFailed", job_uid="")[0] == "AbortJob"  # only compared when set


@pytest.mark.parametrize(
    "req_version,job_version,action",
    [(0, 1, "SyncJob"), (1, 1, "AbortJob"), (2, 1, "AbortJob")],
    ids=["older_version_outdated_resolves_to_syncjob", "same_version_matches", "newer_version_matches"],
)
def test_request_version_against_status_version(req_version, job_version, action):
    assert resolved(WILDCARD, event="PodFailed", job_version=req_version, version=job_version)[0] == action


TASK_AND_JOB = job(
    tasks=[task("a", policies=[policy("RestartTask", "PodFailed")]), task("b")],
    policies=[policy("RestartJob", "PodFailed")],
)


@pytest.mark.parametrize(
    "task_name,expected",
    [("a", ("RestartTask", 0, "task[a][0]")), ("b", ("RestartJob", 0, "job[0]")),
     ("gone", ("RestartJob", 0, "job[0]")), ("", ("RestartJob", 0, "job[0]"))],
    ids=["task_policy_overrides_job_policy", "other_tasks_event_uses_job_policies",
         "unknown_task_name_skips_to_job_policies", "job_level_event_uses_job_policies"],
)
def test_task_policies_before_job_policies(task_name, expected):
    assert resolved(TASK_AND_JOB, event="PodFailed", task=task_name) == expected


def test_first_matching_policy_in_list_order_wins():
    j = job(policies=[policy("TerminateJob", "PodEvicted"), policy("AbortJob", ["PodFailed", "PodEvicted"]),
                      policy("RestartJob", "PodFailed")])
    assert resolved(j, event="PodFailed") == ("AbortJob", 0, "job[1]")
    assert resolved(j, event="PodEvicted") == ("TerminateJob", 0, "job[0]")


def test_events_list_and_event_field_are_merged():
    j = job(policies=[{"action": "AbortJob", "events": ["PodEvicted"], "event": "TaskFailed"}])
    assert resolved(j, event="TaskFailed")[0] == "AbortJob"
    assert resolved(j, event="PodEvicted")[0] == "AbortJob"
    assert resolved(j, event="PodFailed")[0] == "SyncJob"


@pytest.mark.parametrize("event", ["PodFailed", "PodEvicted", "Unknown", "TaskCompleted", "TaskFailed", "JobUpdated"])
def test_wildcard_matches_every_non_internal_event(event):
    assert resolved(WILDCARD, event=event)[0] == "AbortJob"


def test_wildcard_does_not_match_the_empty_event_of_a_podgroup_change():
    assert resolved(WILDCARD, event="")[0] == "SyncJob"


@pytest.mark.parametrize("level", ["task", "job"])
def test_podpending_needs_a_timeout(level):
    """shouldConfigureTimeout: a PodPending match without timeout falls through to the next policies."""
    policies = [policy("AbortJob", "PodPending"), policy("AbortJob", "*"),
                policy("RestartPod", "PodPending", timeout="5m")]
    j = job(tasks=[task(policies=policies)]) if level == "task" else job(policies=policies)
    label = "task[t][2]" if level == "task" else "job[2]"
    assert resolved(j, event="PodPending", task="t", pod="j-t-0") == ("RestartPod", 300, label)


def test_podpending_without_timeout_falls_through_to_exit_code_check():
    """Validation forbids exitCode 0 and event+exitCode together; the resolver still checks in that order."""
    j = job(policies=[{"action": "AbortJob", "event": "PodPending", "exitCode": 0}])
    assert resolved(j, event="PodPending")[0] == "AbortJob"


def test_podpending_with_zero_timeout_matches_and_runs_at_once():
    j = job(policies=[policy("RestartPod", "PodPending", timeout="0s")])
    assert resolved(j, event="PodPending", task="t", pod="j-t-0")[:2] == ("RestartPod", 0)


@pytest.mark.parametrize(
    "event,exit_code,action",
    [("PodFailed", 3, "RestartTask"), ("PodFailed", 4, "SyncJob"), ("PodFailed", 0, "SyncJob"),
     ("PodEvicted", 0, "SyncJob")],
    ids=["exit_code_policy_matches_pod_failed_exit_code", "other_exit_code_does_not_match",
         "pod_failed_without_terminated_state_carries_0_and_matches_nothing", "exit_code_only_on_pod_failed"],
)
def test_exit_code_policies(event, exit_code, action):
    j = job(tasks=[task(policies=[policy("RestartTask", exit_code=3)])])
    assert resolved(j, event=event, exit_code=exit_code, task="t")[0] == action


def test_event_check_comes_before_exit_code_check_in_one_policy():
    j = job(policies=[{"action": "AbortJob", "event": "PodFailed", "exitCode": 5}])
    assert resolved(j, event="PodFailed", exit_code=1)[0] == "AbortJob"
    assert resolved(j, event="PodEvicted", exit_code=5)[0] == "AbortJob"


def test_timeout_delays_any_matched_policy_not_only_podpending():
    j = job(policies=[policy("RestartJob", "PodFailed", timeout="1m30s"), policy("AbortJob", exit_code=7,
                                                                                 timeout="10s")])
    assert resolved(j, event="PodFailed")[:2] == ("RestartJob", 90)
    assert resolved(j, event="PodEvicted", exit_code=7)[:2] == ("AbortJob", 10)


def test_nothing_matches_syncjob():
    assert resolved(job(policies=[policy("AbortJob", "PodEvicted")]), event="PodFailed")[0] == "SyncJob"


# ---------------------------------------------------------------- §5.2 immediate vs delayed


def test_immediate_action_records_start_event_with_trailing_space():
    h = running_job(job(policies=[policy("RestartJob", "PodFailed")]))
    outs = h.set_pod("j-t-0", phase="Failed", exit_code=1)
    assert "Start to execute action RestartJob " in outs.messages()
    assert h.phase == "Restarting"


def test_syncjob_records_no_execute_action_event():
    h = running_job()
    outs = h.set_pod("j-t-0", phase="Failed", exit_code=1)
    assert outs.actions() == ["SyncJob"]
    assert not [e for e in outs.of(o.RecordEvent) if e.reason == "ExecuteAction"]


def delayed(timeout="1m30s", action="RestartJob", event="PodFailed", level="job"):
    p = [policy(action, event, timeout=timeout)]
    return running_job(job(policies=p) if level == "job" else job(tasks=[task(policies=p)]))


def test_delayed_action_records_execute_after_event_schedules_and_executes_nothing():
    h = delayed()
    outs = h.set_pod("j-t-0", phase="Failed", exit_code=1)
    assert outs.messages() == ["Execute action RestartJob after 1m30s"]
    [t] = outs.timers()
    assert (t.action, t.due, t.pod, t.event) == ("RestartJob", "2026-01-01T00:01:30Z", "j-t-0", "PodFailed")
    assert not outs.of(o.DeletePod) and not outs.writes()
    assert h.phase == "Running"


def test_timer_fires_when_the_log_time_passes_due():
    h = delayed()
    h.set_pod("j-t-0", phase="Failed", exit_code=1)
    h.tick(89)
    assert not h.set_pod("j-t-1", restarts=0).fired()
    h.tick(1)
    outs = h.set_pod("j-t-1", restarts=0)
    assert outs.fired() == ["RestartJob"]
    assert h.phase == "Restarting" and h.status.retry_count == 1


def test_timer_due_at_end_of_log_fires_with_finish_until():
    h = delayed()
    h.set_pod("j-t-0", phase="Failed", exit_code=1)
    assert not h.engine.finish("2026-01-01T00:01:29Z")
    outs = h.engine.finish("2026-01-01T00:01:30Z")
    assert [type(x).__name__ for x in outs][:1] == ["TimerFired"]
    assert h.phase == "Restarting"


def test_recorded_mode_fires_only_on_timer_records():
    h = Harness(job(policies=[policy("RestartJob", "PodFailed", timeout="10s")]), timers="recorded")
    h.pg("Inqueue")
    h.add_pods()
    [t] = h.set_pod("j-t-0", phase="Failed", exit_code=1).timers()
    h.tick(3600)
    assert not h.set_pod("j-t-1", phase="Running").fired()
    assert h.timer(t.timer).fired() == ["RestartJob"]
    assert not h.timer(t.timer).fired()  # fired once


def test_same_action_registered_again_is_ignored_and_not_restarted():
    h = delayed(timeout="5m", action="RestartPod", event="PodPending", level="task")
    [first] = h.set_pod("j-t-0", phase="Pending").timers()  # Running -> Pending: PodPending
    assert first.due == "2026-01-01T00:05:00Z"
    h.tick(120)
    again = h.add_pod("t", 0, phase="Pending")  # a re-delivered ADDED: PodPending again, same action
    assert again.messages() == ["Execute action RestartPod after 5m0s"]  # the event is recorded...
    assert not again.timers()  # ...but the registration is ignored
    [pending] = h.engine.pending_timers()
    assert pending.due == first.due  # not restarted
    h.tick(180)
    assert h.feed("ADDED", queue("other")).fired() == ["RestartPod"]


def test_fired_action_runs_in_current_phase_without_rechecking_policies():
    """A RestartJob timer registered in Running fires after the job went back to Pending and lost the policy."""
    h = delayed(timeout="1m", action="RestartJob", event="PodEvicted")
    assert h.delete_pod("j-t-0").timers()  # PodEvicted -> a timer, and nothing else
    assert h.phase == "Running"
    h.update_job(lambda j: j["spec"].pop("policies"))  # OutOfSync: j-t-0 recreated, pending 1 > 2 - 2
    assert h.phase == "Pending"
    h.tick(60)
    outs = h.feed("ADDED", queue("other"))
    assert outs.fired() == ["RestartJob"]
    [res] = [a for a in outs.resolved() if a.policy.startswith("timer:")]
    assert (res.action, res.phase, res.event) == ("RestartJob", "Pending", "PodEvicted")
    assert h.phase == "Restarting" and h.status.retry_count == 1


def test_fired_action_in_aborted_phase_is_a_plain_kill():
    """A pod-scoped timer survives AbortJob (rule B cancels job scope only) and fires in Aborted."""
    h = delayed(timeout="1m", action="RestartPod", event="PodEvicted", level="task")
    h.delete_pod("j-t-0")
    h.add_pod("t", 0)  # the API server creates the replacement
    h.command("AbortJob")
    h.delete_pod("j-t-0")
    h.delete_pod("j-t-1")
    assert h.phase == "Aborted" and len(h.engine.pending_timers()) == 1
    version = h.status.version
    h.tick(60)
    outs = h.feed("ADDED", queue("other"))
    assert outs.fired() == ["RestartPod"]
    assert h.phase == "Aborted" and h.status.retry_count == 0
    assert h.status.version == version + 1  # Aborted runs every action as KillJob


@pytest.mark.parametrize(
    "action,killed",
    [("RestartTask", ["j-t-0", "j-t-1"]), ("RestartPod", ["j-t-1"])],
    ids=["restart_task_target_is_the_stored_task", "restart_pod_target_is_the_stored_pod"],
)
def test_fired_action_target_is_built_from_the_stored_request(action, killed):
    h = delayed(timeout="30s", action=action, event="PodFailed", level="task")
    h.set_pod("j-t-1", phase="Failed", exit_code=2)
    h.tick(30)
    outs = h.feed("ADDED", queue("other"))
    assert outs.deleted() == killed
    assert h.phase == "Restarting" and h.status.version == 0  # KillTarget: no version bump


# ---------------------------------------------------------------- §5.3 rule A


def pending_timer_job() -> Harness:
    h = Harness(job(tasks=[task(policies=[policy("RestartPod", "PodPending", timeout="5m")])]))
    h.pg("Inqueue")
    outs = h.add_pods()
    assert [t.pod for t in outs.timers()] == ["j-t-0", "j-t-1"]
    return h


@pytest.mark.parametrize(
    "change",
    [dict(phase="Running"), dict(phase="Failed", exit_code=1)],
    ids=["pod_running_same_uid_cancels_pending_timer", "pod_failed_same_uid_cancels_pending_timer"],
)
def test_rule_a_pod_left_pending(change):
    h = pending_timer_job()
    outs = h.set_pod("j-t-0", **change)
    assert len(outs.cancelled()) == 1
    assert [t.pod for t in h.engine.pending_timers()] == ["j-t-1"]


def test_rule_a_pod_evicted_same_uid_cancels_pending_timer():
    h = pending_timer_job()
    outs = h.delete_pod("j-t-0")
    assert len(outs.cancelled()) == 1
    assert [t.pod for t in h.engine.pending_timers()] == ["j-t-1"]


def test_rule_a_pod_pending_again_does_not_cancel():
    h = pending_timer_job()
    h.set_pod("j-t-0", phase="Unknown")
    outs = h.set_pod("j-t-0", phase="Pending")
    assert not outs.cancelled()
    assert len(h.engine.pending_timers()) == 2


def test_rule_a_running_of_a_recreated_pod_with_another_uid_does_not_cancel():
    """The UID check: the new pod's events must not cancel the old pod's timer (nor the reverse)."""
    h = pending_timer_job()
    h.add_pod("t", 0, uid="uid-j-t-0-new")  # the old pod's DELETED has not arrived yet
    outs = h.set_pod("j-t-0", phase="Running")
    assert not outs.cancelled()
    h.tick(300)
    outs = h.feed("ADDED", queue("other"))
    assert outs.fired() == ["RestartPod", "RestartPod"]


@pytest.mark.parametrize("timer_event", ["PodFailed", "PodEvicted"])
def test_rule_a_failed_or_evicted_timer_cancelled_when_the_pod_runs_uid_not_checked(timer_event):
    h = running_job(job(tasks=[task(policies=[policy("RestartJob", timer_event, timeout="5m")])]))
    if timer_event == "PodFailed":
        h.set_pod("j-t-0", phase="Failed", exit_code=1)
        h.set_pod("j-t-0", phase="Pending")
    else:
        h.delete_pod("j-t-0")
        h.add_pod("t", 0, uid="uid-recreated")
    assert len(h.engine.pending_timers()) == 1
    outs = h.set_pod("j-t-0", phase="Running")
    assert len(outs.cancelled()) == 1 and not h.engine.pending_timers()


def test_rule_a_failed_timer_not_cancelled_by_eviction():
    h = running_job(job(tasks=[task(policies=[policy("AbortJob", "PodFailed", timeout="5m")])]))
    h.set_pod("j-t-0", phase="Failed", exit_code=1)
    outs = h.delete_pod("j-t-0")
    assert not outs.cancelled() and len(h.engine.pending_timers()) == 1


def test_rule_a_is_keyed_by_pod_name():
    h = pending_timer_job()
    outs = h.set_pod("j-t-1", phase="Running")
    assert [t.pod for t in h.engine.pending_timers()] == ["j-t-0"]
    assert len(outs.cancelled()) == 1


@pytest.mark.parametrize(
    "timer_event,event,same_uid,cancels",
    [
        ("PodPending", "PodRunning", True, True),
        ("PodPending", "PodFailed", True, True),
        ("PodPending", "PodEvicted", True, True),
        ("PodPending", "PodRunning", False, False),
        ("PodFailed", "PodRunning", False, True),
        ("PodEvicted", "PodRunning", False, True),
        ("PodFailed", "PodEvicted", True, False),
        ("PodEvicted", "PodFailed", True, False),
        ("TaskFailed", "PodRunning", True, False),
    ],
)
def test_rule_a_matrix(timer_event, event, same_uid, cancels):
    t = Timer(id="1", job="default/j", key="p", action="RestartPod", due="", event=timer_event, pod_uid="u1")
    assert rule_a_cancels(t, event, "u1" if same_uid else "u2") is cancels


# ---------------------------------------------------------------- §5.3 rule B


@pytest.mark.parametrize(
    "action,expected",
    [("AbortJob", "job"), ("RestartJob", "job"), ("TerminateJob", "job"), ("CompleteJob", "job"),
     ("ResumeJob", "job"), ("NotAnAction", "job"), ("RestartTask", "task"), ("RestartPod", "pod"),
     ("RestartPartition", "partition")],
)
def test_get_action_type(action, expected):
    assert scope(action) == expected


def _timer(action, *, task="", pod="", partition=""):
    return Timer(id="x", job="default/j", key=pod, action=action, due="", task=task, pod=pod, partition=partition)


@pytest.mark.parametrize(
    "executed,kw,timer,cancels",
    [
        ("AbortJob", {}, _timer("RestartJob", pod="p1"), True),
        ("NotAnAction", {}, _timer("TerminateJob"), True),
        ("AbortJob", {}, _timer("RestartPod", task="t", pod="p1"), False),
        ("RestartTask", dict(task="a"), _timer("RestartTask", task="a", pod="p9"), True),
        ("RestartTask", dict(task="a"), _timer("RestartTask", task="b", pod="p9"), False),
        ("RestartTask", dict(task="a"), _timer("RestartJob", task="a"), False),
        ("RestartPod", dict(task="a", pod="p1"), _timer("RestartPod", task="b", pod="p1"), True),
        ("RestartPod", dict(task="a", pod="p1"), _timer("RestartPod", task="a", pod="p2"), False),
        ("RestartPartition", dict(task="a", partition="1"), _timer("RestartPartition", task="b", partition="1"), True),
        ("RestartPartition", dict(task="a", partition="1"), _timer("RestartPartition", task="a", partition="0"),
         False),
    ],
    ids=[
        "job_scope_cancels_job_scoped_entry_under_a_pod_key",
        "unknown_action_counts_as_job_scope",
        "job_scope_keeps_pod_scoped_entries",
        "task_scope_same_task_cancelled",
        "task_scope_other_task_kept",
        "task_scope_keeps_job_scoped",
        "pod_scope_same_pod_name_cancelled",
        "pod_scope_other_pod_kept",
        "partition_scope_same_partition_id_task_not_compared",
        "partition_scope_other_partition_kept",
    ],
)
def test_rule_b_matrix(executed, kw, timer, cancels):
    args = dict(task="", pod="", partition="") | kw
    assert rule_b_cancels(timer, executed, **args) is cancels


def timers_for_rule_b() -> Harness:
    """Three pending timers: RestartJob (pod j-a-0), RestartTask (pod j-b-0), RestartPod (pod j-b-1)."""
    j = job(tasks=[
        task("a", 1, policies=[policy("RestartJob", "PodFailed", timeout="10m")]),
        task("b", 2, policies=[policy("RestartTask", "PodFailed", timeout="10m"),
                               policy("RestartPod", "PodEvicted", timeout="10m")]),
    ])
    h = running_job(j)
    h.set_pod("j-a-0", phase="Failed", exit_code=1)
    h.set_pod("j-b-0", phase="Failed", exit_code=1)
    h.delete_pod("j-b-1")
    assert sorted(t.action for t in h.engine.pending_timers()) == ["RestartJob", "RestartPod", "RestartTask"]
    return h


@pytest.mark.parametrize("action", ["AbortJob", "NotAnAction"])
def test_rule_b_immediate_job_scoped_action_cancels_job_scoped_timers(action):
    h = timers_for_rule_b()
    outs = h.command(action)
    assert len(outs.cancelled()) == 1
    assert sorted(t.action for t in h.engine.pending_timers()) == ["RestartPod", "RestartTask"]


@pytest.mark.parametrize("action", ["SyncJob", "EnqueueJob"])
def test_rule_b_internal_action_cancels_nothing(action):
    h = timers_for_rule_b()
    outs = h.command(action)
    assert not outs.cancelled()
    assert len(h.engine.pending_timers()) == 3


def test_rule_b_fired_timer_cancels_its_scope_and_is_removed():
    h = timers_for_rule_b()
    h.tick(600)
    outs = h.feed("ADDED", queue("other"))
    assert outs.fired() == ["RestartJob", "RestartTask", "RestartPod"]
    assert not h.engine.pending_timers() and not h.entry.timers


def test_rule_b_fired_job_timer_cancels_other_job_timers():
    j = job(tasks=[task(policies=[policy("AbortJob", "PodFailed", timeout="1m"),
                                  policy("TerminateJob", "PodEvicted", timeout="2m")])])
    h = running_job(j)
    h.set_pod("j-t-0", phase="Failed", exit_code=1)
    h.delete_pod("j-t-1")
    h.tick(60)
    outs = h.feed("ADDED", queue("other"))
    assert outs.fired() == ["AbortJob"] and len(outs.cancelled()) == 1
    assert h.phase in ("Aborting", "Aborted")


def test_rule_b_not_applied_when_the_action_fails():
    """processNextReq calls cleanupDelayActions only after a successful Execute (handleJobError returns first)."""
    h = Harness()
    h.feed("ADDED", queue("default"))
    h.create(job(policies=[policy("RestartJob", "PodFailed", timeout="10m")]))
    h.pg("Inqueue")
    h.add_pods()
    h.set_pod("j-t-0", phase="Running")
    h.set_pod("j-t-1", phase="Running")
    h.set_pod("j-t-0", phase="Failed", exit_code=1)
    assert len(h.engine.pending_timers()) == 1
    h.feed("DELETED", queue("default"))
    outs = h.command("ResumeJob")  # SyncJob in Running: the queue is gone -> the sync fails
    assert outs.of(o.SyncFailed)
    assert not outs.cancelled()
    assert len(h.engine.pending_timers()) == 1


def test_rule_b_applied_after_a_fired_timer_even_when_its_action_fails():
    """AddDelayActionForJob's goroutine: Execute, handleJobError on failure, then cleanupDelayActions anyway."""
    h = Harness()
    h.feed("ADDED", queue("default"))
    h.create(job(policies=[policy("ResumeJob", "PodFailed", timeout="1m"),
                           policy("AbortJob", "PodEvicted", timeout="5m")]))
    h.pg("Inqueue")
    h.add_pods()
    h.set_pod("j-t-0", phase="Running")
    h.set_pod("j-t-1", phase="Running")
    h.set_pod("j-t-0", phase="Failed", exit_code=1)
    h.delete_pod("j-t-1")
    assert sorted(t.action for t in h.engine.pending_timers()) == ["AbortJob", "ResumeJob"]
    h.feed("DELETED", queue("default"))
    h.tick(60)
    outs = h.feed("ADDED", queue("other"))
    assert outs.fired() == ["ResumeJob"]
    assert outs.of(o.SyncFailed)  # ResumeJob in Running is a SyncJob: no queue -> TerminateJob
    assert "Job failed on action ResumeJob for retry limit reached" in outs.messages()
    assert len(outs.cancelled()) == 1 and not h.engine.pending_timers()
    assert h.phase in ("Terminating", "Terminated")
