"""Reference §2: every row of the per-phase tables, run as `state.Execute(action)`.

Each test builds an engine holding one job in a phase (pods cached, PodGroup
known) and runs one action, as Volcano's `pkg/controllers/job/state/*.go`
handlers do, then checks the pod work (kill / kill target / sync), the version,
the PodGroup, and the status function's effect.
"""

from __future__ import annotations

import pytest

from statemachines import outputs as o
from statemachines.job.handling import PodOp, Retain
from statemachines.job.kill import Target
from statemachines.job.machine import handling
from tests.builders import T0, T1, Harness, entry_in, execute, job, pod, pods_of, policy, running_job, task

KILL_ROWS = [
    # (action, retain, destination phase, retry increment)
    ("AbortJob", "Soft", "Aborting", 0),
    ("CompleteJob", "Soft", "Completing", 0),
    ("TerminateJob", "Soft", "Terminating", 0),
]
THREE = job(tasks=[task(replicas=3)])
MIXED = pods_of(phases=["Running", "Succeeded", "Failed"])


def deleted_marked(outs) -> list[str]:
    return sorted(d.name for d in outs.of(o.DeletePod) if d.mark_out_of_sync)


# ---------------------------------------------------------------- §2.1 phase -> handler


@pytest.mark.parametrize(
    "phase,table",
    [
        ("", "Pending"),
        ("Pending", "Pending"),
        ("NotAPhase", "Pending"),
        ("Running", "Running"),
        ("Restarting", "Restarting"),
        ("Aborting", "Aborting"),
        ("Aborted", "Aborted"),
        ("Completing", "Completing"),
        ("Terminating", "Terminating"),
        ("Completed", "Completed"),
        ("Terminated", "Completed"),
        ("Failed", "Completed"),
    ],
    ids=lambda v: v or "empty",
)
def test_newstate_picks_handler_by_phase(phase, table):
    """factory.go NewState: "", Pending and unknown phases are pending; the three finished phases share one."""
    for action in ("SyncJob", "AbortJob", "RestartJob", "ResumeJob", "RestartPod", "Whatever"):
        assert handling(phase, action) == handling(table, action)


@pytest.mark.parametrize("phase", ["", "NotAPhase"], ids=["empty_phase", "unrecognised_phase"])
def test_unrecognised_or_empty_phase_runs_pending_handler_and_reaches_running(phase):
    """NewState's default is pendingState: its status function moves the job to Running."""
    engine, entry = entry_in(phase, pods=pods_of(phases=["Running", "Running"]))
    outs = execute(engine, entry, "SyncJob")
    assert entry.status.state.phase == "Running"
    assert outs.phases()[-1] == ("Pending" if phase == "" else phase, "Running")


def test_unrecognised_phase_abort_uses_pending_table():
    engine, entry = entry_in("NotAPhase", pods=pods_of(phases=["Running"]))
    execute(engine, entry, "AbortJob")
    assert entry.status.state.phase == "Aborting"


# ---------------------------------------------------------------- Pending and Running: kill rows


@pytest.mark.parametrize("phase", ["Pending", "Running"])
def test_restart_job_kills_every_pod_retain_none_retry_plus_one_to_restarting(phase):
    engine, entry = entry_in(phase, THREE, pods=MIXED, retry=0, version=4)
    outs = execute(engine, entry, "RestartJob")
    s = entry.status
    assert deleted_marked(outs) == ["j-t-0", "j-t-1", "j-t-2"]  # Succeeded and Failed too
    assert (s.state.phase, s.retry_count, s.version) == ("Restarting", 1, 5)
    assert (s.terminating, s.running, s.succeeded, s.failed, s.task_status_count) == (3, 0, 0, 0, None)
    assert [d.name for d in outs.of(o.DeletePodGroup)] == ["j-uid-j"]
    assert entry.pg is None
    assert s.state.last_transition_time == T1
    assert s.conditions[-1].status == "Restarting" and s.conditions[-1].last_transition_time == T1
    assert s.running_duration == "10m0s"  # LTT - creationTimestamp


@pytest.mark.parametrize("phase", ["Pending", "Running"])
def test_restart_job_on_last_retry_keeps_succeeded_and_failed_pods(phase):
    """killPods: retryCount >= maxRetry-1 turns the retain set into Soft."""
    engine, entry = entry_in(phase, THREE, pods=MIXED, retry=2)
    outs = execute(engine, entry, "RestartJob")
    assert deleted_marked(outs) == ["j-t-0"]
    assert (entry.status.state.phase, entry.status.retry_count) == ("Restarting", 3)
    assert (entry.status.terminating, entry.status.succeeded, entry.status.failed) == (1, 0, 0)


@pytest.mark.parametrize("phase", ["Pending", "Running"])
def test_restart_job_counts_already_deleting_pods_as_terminating_without_deleting_them_again(phase):
    pods = [pod(index=0, phase="Running", deleting=T0), pod(index=1, phase="Running")]
    engine, entry = entry_in(phase, pods=pods)
    outs = execute(engine, entry, "RestartJob")
    assert deleted_marked(outs) == ["j-t-1"]
    assert entry.status.terminating == 2


TWO_TASKS = job(tasks=[task("a", 2), task("b", 1)])
TWO_TASK_PODS = pods_of(task_name="a", phases=["Running", "Succeeded"]) + pods_of(task_name="b", phases=["Running"])
PARTITIONED = job(tasks=[task("t", 4, partition=(2, 2))])
PARTITION_PODS = [pod(index=i, phase="Running", partition=str(i // 2)) for i in range(4)]


@pytest.mark.parametrize("phase", ["Pending", "Running"])
@pytest.mark.parametrize(
    "action,job_obj,pods,target,killed",
    [
        ("RestartTask", TWO_TASKS, TWO_TASK_PODS, Target("task", task="a"), ["j-a-0", "j-a-1"]),
        ("RestartPod", TWO_TASKS, TWO_TASK_PODS, Target("pod", task="a", pod="j-a-1"), ["j-a-1"]),
        ("RestartPartition", PARTITIONED, PARTITION_PODS, Target("partition", "t", "j-t-3", "1"), ["j-t-2", "j-t-3"]),
    ],
    ids=["restart_task_kills_the_tasks_pods_of_any_phase", "restart_pod_kills_only_that_pod",
         "restart_partition_kills_the_partitions_pods"],
)
def test_kill_target_retry_plus_one_to_restarting_no_version_bump_podgroup_kept(phase, action, job_obj, pods, target,
                                                                                killed):
    engine, entry = entry_in(phase, job_obj, pods=pods, version=2)
    outs = execute(engine, entry, action, target)
    s = entry.status
    assert deleted_marked(outs) == killed
    assert (s.state.phase, s.retry_count, s.version) == ("Restarting", 1, 2)
    # §7.1 step 6: after a KillTarget every count but terminating is 0
    assert (s.terminating, s.running, s.pending, s.succeeded, s.task_status_count) == (len(killed), 0, 0, 0, None)
    assert not outs.of(o.DeletePodGroup) and entry.pg is not None
    assert s.state.last_transition_time == T1


@pytest.mark.parametrize("phase", ["Pending", "Running"])
@pytest.mark.parametrize("action,retain,dest,retry", KILL_ROWS, ids=[r[0] for r in KILL_ROWS])
def test_kill_job_soft_rows(phase, action, retain, dest, retry):
    """AbortJob / CompleteJob / TerminateJob: KillJob Soft, then Aborting / Completing / Terminating."""
    pods = pods_of(phases=["Running", "Succeeded", "Failed", "Pending", "Unknown"])
    engine, entry = entry_in(phase, job(tasks=[task(replicas=5)]), pods=pods, version=1)
    outs = execute(engine, entry, action)
    s = entry.status
    assert deleted_marked(outs) == ["j-t-0", "j-t-3", "j-t-4"]  # Succeeded and Failed are retained
    assert (s.state.phase, s.retry_count, s.version) == (dest, retry, 2)
    assert (s.terminating, s.succeeded, s.failed, s.task_status_count) == (3, 0, 0, None)  # retained: not counted
    assert outs.of(o.DeletePodGroup) and entry.pg is None
    assert s.state.last_transition_time == T1


@pytest.mark.parametrize("action", ["SyncJob", "EnqueueJob", "ResumeJob", "NotAnAction"])
def test_pending_other_actions_sync_and_reach_running_when_minAvailable_run(action):
    """pending.go default: SyncJob; minAvailable <= running + succeeded + failed -> Running."""
    pods = pods_of(phases=["Running", "Succeeded", "Failed"])
    engine, entry = entry_in("Pending", job(tasks=[task(replicas=3)]), pods=pods)
    outs = execute(engine, entry, action)
    assert not outs.of(o.DeletePod) and not outs.of(o.DeletePodGroup)
    assert entry.status.state.phase == "Running"
    assert entry.status.version == 0
    assert (entry.status.running, entry.status.succeeded, entry.status.failed) == (1, 1, 1)


def test_pending_sync_below_minAvailable_stays_pending_but_writes_counts():
    engine, entry = entry_in("Pending", pods=pods_of(phases=["Running", "Pending"]))
    outs = execute(engine, entry, "SyncJob")
    assert entry.status.state.phase == "Pending"
    assert (entry.status.running, entry.status.pending) == (1, 1)
    assert len(outs.writes()) == 1


# ---------------------------------------------------------------- Running: the running check


def two_task_job(min_available, a=(2, 1), b=(2, 1), **kw):
    return job(tasks=[task("a", a[0], min_available=a[1]), task("b", b[0], min_available=b[1])],
               min_available=min_available, **kw)


RUNNING_CHECK = [
    pytest.param(
        job(tasks=[task(replicas=0)], min_available=0), pods_of(phases=["Running", "Running"]), "Running",
        id="running_scaled_to_zero_keeps_phase",
    ),
    pytest.param(
        job(tasks=[task(replicas=3)], min_success=1), pods_of(phases=["Succeeded", "Running", "Running"]),
        "Completed", id="running_minSuccess_reached_completes_while_pods_still_run",
    ),
    pytest.param(
        job(tasks=[task(replicas=2, min_available=1)], min_available=1, min_success=1),
        pods_of(phases=["Succeeded", "Failed"]), "Completed",
        id="running_minSuccess_check_comes_before_all_pods_finished",
    ),
    pytest.param(
        two_task_job(2), pods_of(task_name="a", phases=["Succeeded", "Succeeded"])
        + pods_of(task_name="b", phases=["Failed", "Failed"]), "Failed",
        id="running_all_pods_finished_task_below_its_minAvailable_fails",
    ),
    pytest.param(
        two_task_job(1), pods_of(task_name="a", phases=["Succeeded", "Succeeded"])
        + pods_of(task_name="b", phases=["Failed", "Failed"]), "Completed",
        id="running_all_pods_finished_job_minAvailable_below_task_sum_skips_task_check",
    ),
    pytest.param(
        two_task_job(2, a=(1, None), b=(3, 1)), pods_of(task_name="a", phases=["Failed"])
        + pods_of(task_name="b", phases=["Succeeded"] * 3), "Completed",
        id="running_all_pods_finished_task_without_minAvailable_is_not_checked",
    ),
    pytest.param(
        job(tasks=[task(replicas=2, min_available=1)], min_available=1, min_success=2),
        pods_of(phases=["Succeeded", "Failed"]), "Failed",
        id="running_all_pods_finished_below_minSuccess_fails",
    ),
    pytest.param(
        job(tasks=[task(replicas=2)]), pods_of(phases=["Succeeded", "Succeeded"]), "Completed",
        id="running_all_pods_finished_succeeded_reach_minAvailable_completes",
    ),
    pytest.param(
        job(tasks=[task(replicas=2, min_available=None)]), pods_of(phases=["Succeeded", "Failed"]), "Failed",
        id="running_all_pods_finished_succeeded_below_minAvailable_fails",
    ),
    pytest.param(
        job(tasks=[task(replicas=3, min_available=2)]), pods_of(phases=["Pending", "Pending", "Running"]), "Pending",
        id="running_pending_above_replicas_minus_minAvailable_back_to_pending",
    ),
    pytest.param(
        job(tasks=[task(replicas=3, min_available=2)]), pods_of(phases=["Pending", "Running", "Running"]), "Running",
        id="running_pending_within_slack_keeps_running",
    ),
    pytest.param(
        job(tasks=[task(replicas=3, min_available=2)]), pods_of(phases=["Succeeded", "Failed", "Running"]),
        "Running", id="running_not_all_finished_keeps_running",
    ),
]


@pytest.mark.parametrize("job_obj,pods,dest", RUNNING_CHECK)
def test_running_check(job_obj, pods, dest):
    engine, entry = entry_in("Running", job_obj, pods=pods)
    outs = execute(engine, entry, "SyncJob")
    assert entry.status.state.phase == dest
    if dest != "Running":
        assert outs.phases() == [("Running", dest)]
        assert entry.status.state.last_transition_time == T1


def test_running_never_reaches_completing_by_itself():
    engine, entry = entry_in("Running", pods=pods_of(phases=["Succeeded", "Succeeded"]))
    execute(engine, entry, "SyncJob")
    assert entry.status.state.phase == "Completed"
    engine, entry = entry_in("Running", pods=pods_of(phases=["Running", "Running"]))
    execute(engine, entry, "CompleteJob")
    assert entry.status.state.phase == "Completing"


# ---------------------------------------------------------------- Restarting


def test_restarting_sync_retries_exhausted_fails():
    engine, entry = entry_in("Restarting", retry=3, pg=None)
    execute(engine, entry, "SyncJob")
    assert entry.status.state.phase == "Failed"


def test_restarting_sync_enough_pods_left_goes_pending_and_creates_pods():
    """Pods are created while still Restarting (§6.1: creation is not phase-gated), then -> Pending."""
    engine, entry = entry_in("Restarting", retry=1, version=1)
    outs = execute(engine, entry, "SyncJob")
    assert outs.created() == ["j-t-0", "j-t-1"]
    assert [c.job_version for c in outs.of(o.CreatePod)] == [1, 1]
    assert [c.retry_count for c in outs.of(o.CreatePod)] == [1, 1]
    assert entry.status.state.phase == "Pending"


def test_restarting_sync_with_terminating_pods_stays_restarting():
    engine, entry = entry_in("Restarting", retry=1, pods=pods_of(phases=["Running", "Running"], deleting=T0))
    outs = execute(engine, entry, "SyncJob")
    assert entry.status.state.phase == "Restarting"
    assert entry.status.terminating == 2
    assert not outs.created()


def test_restarting_sync_without_pod_work_uses_stale_counts():
    """PodGroup still Pending: the check runs on the existing status (terminating=2 from the kill)."""
    engine, entry = entry_in("Restarting", retry=1, pg="Pending", terminating=2)
    execute(engine, entry, "SyncJob")
    assert entry.status.state.phase == "Restarting"
    engine, entry = entry_in("Restarting", retry=1, pg="Pending", terminating=0)
    execute(engine, entry, "SyncJob")
    assert entry.status.state.phase == "Pending"


def test_restarting_check_compares_with_status_minAvailable():
    """restartingUpdateStatus reads status.minAvailable, not spec.minAvailable (kill path keeps the old one)."""
    pods = pods_of(phases=["Running", "Running"])
    engine, entry = entry_in("Restarting", pods=pods, retry=1, min_available=1)
    execute(engine, entry, "RestartPod", Target("pod", task="t", pod="j-t-0"))
    assert entry.status.state.phase == "Pending"  # 2 - 1 >= status.minAvailable 1 (spec says 2)


@pytest.mark.parametrize(
    "action,target",
    [
        ("RestartTask", Target("task", task="t")),
        ("RestartPod", Target("pod", task="t", pod="j-t-0")),
        ("RestartPartition", Target("partition", "t", "j-t-0", "0")),
    ],
    ids=["restarting_restart_task", "restarting_restart_pod", "restarting_restart_partition"],
)
def test_restarting_kill_target_without_retry_increment(action, target):
    pods = [pod(index=i, phase="Running", partition="0") for i in range(2)]
    engine, entry = entry_in("Restarting", job(tasks=[task(replicas=2, partition=(1, 2))]), pods=pods, retry=1,
                             version=1)
    outs = execute(engine, entry, action, target)
    assert deleted_marked(outs)
    assert (entry.status.retry_count, entry.status.version) == (1, 1)
    assert not outs.of(o.DeletePodGroup)
    assert entry.status.state.phase == "Restarting"  # terminating > 0: 2 - t < 2


@pytest.mark.parametrize(
    "action", ["RestartJob", "AbortJob", "TerminateJob", "CompleteJob", "ResumeJob", "EnqueueJob", "NotAnAction"]
)
def test_restarting_other_actions_kill_job_and_keep_phase(action):
    """restarting.go default: KillJob(None) with the restarting check; Abort/Terminate/Complete change nothing."""
    engine, entry = entry_in("Restarting", pods=pods_of(phases=["Running", "Succeeded"]), retry=1, version=1)
    outs = execute(engine, entry, action)
    assert deleted_marked(outs) == ["j-t-0", "j-t-1"]  # retain None: the Succeeded pod too
    assert (entry.status.state.phase, entry.status.retry_count, entry.status.version) == ("Restarting", 1, 2)
    assert outs.of(o.DeletePodGroup)


def test_restarting_kill_job_with_retries_exhausted_fails():
    engine, entry = entry_in("Restarting", pods=pods_of(phases=["Running", "Failed"]), retry=3)
    outs = execute(engine, entry, "AbortJob")
    assert entry.status.state.phase == "Failed"
    assert deleted_marked(outs) == ["j-t-0"]  # last retry: Soft


def test_restarting_kill_job_without_pods_goes_pending():
    engine, entry = entry_in("Restarting", retry=1)
    execute(engine, entry, "TerminateJob")
    assert entry.status.state.phase == "Pending"


# ---------------------------------------------------------------- Aborting, Aborted


@pytest.mark.parametrize("phase", ["Aborting", "Aborted"])
def test_resume_kills_soft_retry_plus_one_to_restarting(phase):
    engine, entry = entry_in(phase, THREE, pods=MIXED, retry=0, version=3)
    outs = execute(engine, entry, "ResumeJob")
    assert deleted_marked(outs) == ["j-t-0"]
    assert (entry.status.state.phase, entry.status.retry_count, entry.status.version) == ("Restarting", 1, 4)
    assert entry.status.state.last_transition_time == T1


@pytest.mark.parametrize("action", ["SyncJob", "AbortJob", "RestartJob", "TerminateJob", "NotAnAction"])
def test_aborting_with_live_pods_stays_aborting(action):
    engine, entry = entry_in("Aborting", THREE, pods=MIXED)
    outs = execute(engine, entry, action)
    assert deleted_marked(outs) == ["j-t-0"]
    assert entry.status.state.phase == "Aborting"
    assert entry.status.state.last_transition_time == T0  # no transition: LTT kept
    assert entry.status.retry_count == 0


@pytest.mark.parametrize("action", ["SyncJob", "AbortJob", "RestartJob"])
def test_aborting_without_live_pods_becomes_aborted(action):
    engine, entry = entry_in("Aborting", pods=pods_of(phases=["Succeeded", "Failed"]))
    outs = execute(engine, entry, action)
    assert not outs.of(o.DeletePod)
    assert entry.status.state.phase == "Aborted"
    assert entry.status.state.last_transition_time == T1


@pytest.mark.parametrize("action", ["SyncJob", "AbortJob", "RestartJob", "TerminateJob", "CompleteJob"])
def test_aborted_other_actions_kill_soft_without_status_function(action):
    pods = pods_of(phases=["Running", "Succeeded"])
    engine, entry = entry_in("Aborted", pods=pods, version=2, running=5, controlled_resources={"x": "y"})
    outs = execute(engine, entry, action)
    s = entry.status
    assert deleted_marked(outs) == ["j-t-0"]
    assert (s.state.phase, s.version, s.state.last_transition_time) == ("Aborted", 3, T0)
    assert (s.running, s.terminating) == (0, 1)  # counts rewritten
    assert s.running_duration == "0s"  # LTT (unchanged, T0) - creation (T0)
    assert s.controlled_resources == {"x": "y"}
    assert len(outs.writes()) == 1


# ---------------------------------------------------------------- Completing, Terminating


@pytest.mark.parametrize("phase,dest", [("Completing", "Completed"), ("Terminating", "Terminated")])
@pytest.mark.parametrize("action", ["SyncJob", "ResumeJob", "RestartJob"])
def test_completing_terminating_reach_end_when_no_live_pods(phase, dest, action):
    engine, entry = entry_in(phase, pods=pods_of(phases=["Running", "Succeeded"]))
    outs = execute(engine, entry, action)
    assert deleted_marked(outs) == ["j-t-0"]
    assert entry.status.state.phase == phase  # the kill itself counts the pod as terminating
    engine, entry = entry_in(phase, pods=pods_of(phases=["Succeeded", "Failed"]))
    execute(engine, entry, action)
    assert entry.status.state.phase == dest


# ---------------------------------------------------------------- Completed / Terminated / Failed


@pytest.mark.parametrize("phase", ["Completed", "Terminated", "Failed"])
@pytest.mark.parametrize("action", ["SyncJob", "ResumeJob", "RestartJob", "AbortJob", "RestartPod"])
def test_finished_states_kill_soft_bump_version_keep_phase_and_ltt(phase, action):
    engine, entry = entry_in(phase, pods=pods_of(phases=["Running", "Succeeded"]), version=5)
    outs = execute(engine, entry, action, Target("pod", task="t", pod="j-t-1"))
    s = entry.status
    assert deleted_marked(outs) == ["j-t-0"]
    assert (s.state.phase, s.version, s.state.last_transition_time) == (phase, 6, T0)
    assert outs.of(o.DeletePodGroup)
    assert len(outs.writes()) == 1
    assert not outs.phases()


def test_finished_state_without_pods_or_podgroup_still_bumps_version_and_writes():
    engine, entry = entry_in("Completed", pg=None, version=1)
    outs = execute(engine, entry, "SyncJob")
    assert entry.status.version == 2
    assert len(outs.writes()) == 1
    assert not outs.of(o.DeletePodGroup)


# ---------------------------------------------------------------- the tables as data


@pytest.mark.parametrize(
    "phase,action,op,retain,retry",
    [
        ("Pending", "RestartJob", PodOp.KILL_JOB, Retain.NONE, True),
        ("Pending", "RestartTask", PodOp.KILL_TARGET, Retain.NONE, True),
        ("Pending", "AbortJob", PodOp.KILL_JOB, Retain.SOFT, False),
        ("Pending", "ResumeJob", PodOp.SYNC, Retain.NONE, False),
        ("Running", "RestartPartition", PodOp.KILL_TARGET, Retain.NONE, True),
        ("Running", "EnqueueJob", PodOp.SYNC, Retain.NONE, False),
        ("Restarting", "SyncJob", PodOp.SYNC, Retain.NONE, False),
        ("Restarting", "RestartPod", PodOp.KILL_TARGET, Retain.NONE, False),
        ("Restarting", "ResumeJob", PodOp.KILL_JOB, Retain.NONE, False),
        ("Aborting", "ResumeJob", PodOp.KILL_JOB, Retain.SOFT, True),
        ("Aborting", "SyncJob", PodOp.KILL_JOB, Retain.SOFT, False),
        ("Aborted", "ResumeJob", PodOp.KILL_JOB, Retain.SOFT, True),
        ("Aborted", "SyncJob", PodOp.KILL_JOB, Retain.SOFT, False),
        ("Completing", "SyncJob", PodOp.KILL_JOB, Retain.SOFT, False),
        ("Terminating", "SyncJob", PodOp.KILL_JOB, Retain.SOFT, False),
        ("Failed", "SyncJob", PodOp.KILL_JOB, Retain.SOFT, False),
    ],
)
def test_handling_table(phase, action, op, retain, retry):
    h = handling(phase, action)
    assert (h.op, h.retain, h.retry) == (op, retain, retry)


@pytest.mark.parametrize("phase", ["Aborted", "Completed", "Terminated", "Failed"])
def test_phases_without_status_function_for_plain_actions(phase):
    assert handling(phase, "SyncJob").trigger is None


# ---------------------------------------------------------------- §2.2 primitives


def test_kill_job_writes_only_what_the_kill_counted():
    """Retained Succeeded/Failed pods vanish from the counts; taskStatusCount is empty."""
    engine, entry = entry_in("Running", THREE, pods=MIXED, succeeded=1, failed=1, running=1,
                             task_status_count={"t": {"phase": {"Running": 1}}})
    execute(engine, entry, "AbortJob")
    s = entry.status
    assert (s.running, s.succeeded, s.failed, s.terminating, s.task_status_count) == (0, 0, 0, 1, None)


def test_kill_job_deletes_are_marked_out_of_sync_sync_deletes_are_not():
    engine, entry = entry_in("Running", pods=pods_of(phases=["Running", "Running"]))
    outs = execute(engine, entry, "AbortJob")
    assert all(d.mark_out_of_sync for d in outs.of(o.DeletePod))
    engine, entry = entry_in("Running", job(tasks=[task(replicas=1)]), pods=pods_of(phases=["Running", "Running"]))
    outs = execute(engine, entry, "SyncJob")
    assert [(d.name, d.mark_out_of_sync, d.reason) for d in outs.of(o.DeletePod)] == [("j-t-1", False, "scale-down")]


def test_kill_skips_job_with_deletion_timestamp():
    engine, entry = entry_in("Running", job(deleting=T1), pods=pods_of(phases=["Running"]))
    for action in ("AbortJob", "RestartPod", "SyncJob"):
        outs = execute(engine, entry, action, Target("pod", task="t", pod="j-t-0"))
        assert not outs.of(o.DeletePod) and not outs.writes()


def test_sync_ignores_status_function_return_and_compares_whole_status():
    """A count change without a phase change is still written (LTT refreshed)."""
    engine, entry = entry_in("Running", pods=pods_of(phases=["Running", "Running"]), running=1, pending=1)
    outs = execute(engine, entry, "SyncJob")
    assert len(outs.writes()) == 1 and not outs.phases()
    assert entry.status.state.last_transition_time == T1
    assert [c.status for c in entry.status.conditions] == ["Running"]


# ---------------------------------------------------------------- §2.4: no live pods needs one more request


def test_abort_from_running_needs_pod_deletions_to_reach_aborted():
    h = running_job()
    outs = h.command("AbortJob")
    assert outs.phases() == [("Running", "Aborting")]
    assert h.phase == "Aborting"  # the follow-up pass counted the pods being deleted
    h.tick()
    h.delete_pod("j-t-0")
    assert h.phase == "Aborting"
    outs = h.delete_pod("j-t-1")
    assert outs.phases() == [("Aborting", "Aborted")]


def test_policy_restart_from_pending_counts_a_retry():
    """RestartJob from Pending (a PodEvicted policy on a pending pod) spends a retry."""
    h = Harness(job(policies=[policy("RestartJob", "PodEvicted")]))
    h.pg("Inqueue")
    h.add_pods()
    outs = h.delete_pod("j-t-0")
    assert outs.actions()[0] == "RestartJob"
    assert (h.status.retry_count, outs.phases()[0]) == (1, ("Pending", "Restarting"))


def test_kill_target_marks_already_deleting_victims_out_of_sync():
    """killPods patches the out-of-sync annotation on every victim before looking at deletionTimestamp,
    so an evicted pod caught by a RestartTask is not reported as PodEvicted when it finally goes."""
    j = job(tasks=[task(policies=[policy("RestartTask", "PodFailed")])], policies=[policy("RestartJob", "PodEvicted")])
    h = running_job(j)
    h.set_pod("j-t-1", deleting=True)  # evicted: deletionTimestamp, no annotation
    outs = h.set_pod("j-t-0", phase="Failed", exit_code=1)
    assert outs.actions()[0] == "RestartTask"
    assert outs.writes()[0].terminating == 2
    outs = h.delete_pod("j-t-1")
    assert outs.events() == ["OutOfSync"]
    assert h.status.retry_count == 1


def test_sync_counting_no_pod_writes_nothing_new_empty_task_status_count_is_absent():
    """Deliberate difference (docs/fidelity.md): an empty taskStatusCount is absent (nil), so a second
    pod-reconciling sync that counts no pod finds nothing changed. Volcano compares its fresh empty map
    with the nil it read back and rewrites the status (LTT refreshed) every time."""
    pods = pods_of(phases=["Running", "Running"], deleting=T0)
    engine, entry = entry_in("Restarting", pods=pods, retry=1)
    first = execute(engine, entry, "SyncJob")
    assert len(first.writes()) == 1 and entry.status.task_status_count is None
    engine.now = "2026-01-01T00:20:00Z"
    again = execute(engine, entry, "SyncJob")
    assert again.writes() == []
    assert entry.status.state.last_transition_time == T1
