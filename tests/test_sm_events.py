"""Reference §4 (and §3.3): how pod, job, PodGroup and Command changes become requests.

Volcano: `pkg/controllers/job/job_controller_handler.go` (addPod, updatePod,
deletePod, addJob, updateJob, deleteJob, updatePodGroup, processNextCommand),
`pkg/controllers/cache/cache.go` (TaskCompleted, TaskFailed, HasPod) and
`pkg/controllers/job/helpers/helpers.go` (IsOutOfSyncPod).
"""

from __future__ import annotations

import pytest

from statemachines import outputs as o
from tests.builders import (
    JOB_API,
    Harness,
    command,
    job,
    owner_ref,
    pod,
    podgroup,
    policy,
    running_job,
    task,
)


def scheduled(job_obj: dict | None = None) -> Harness:
    """A job whose PodGroup is Inqueue and whose two pods exist (Pending)."""
    h = Harness(job_obj if job_obj is not None else job())
    h.pg("Inqueue")
    h.add_pods()
    return h


# ---------------------------------------------------------------- §4.1 the pod filter


@pytest.mark.parametrize(
    "kw",
    [
        dict(owner=None),
        dict(owner=owner_ref(controller=False)),
        dict(owner=owner_ref(api_version="batch/v1")),
        dict(owner=owner_ref(kind="CronJob")),
        dict(drop=["volcano.sh/job-name"]),
        dict(drop=["volcano.sh/job-version"]),
        dict(drop=["volcano.sh/task-spec"]),
        dict(extra_annotations={"volcano.sh/job-version": "1.0"}),
        dict(extra_annotations={"volcano.sh/job-version": "2147483648"}),
    ],
    ids=[
        "pod_without_owner_reference_ignored",
        "owner_reference_not_controller_ignored",
        "controller_of_another_api_version_ignored",
        "controller_of_another_kind_ignored",
        "pod_without_job_name_annotation_ignored",
        "pod_without_job_version_annotation_ignored",
        "pod_without_task_spec_annotation_ignored",
        "job_version_not_a_base10_integer_ignored",
        "job_version_outside_int32_ignored",
    ],
)
@pytest.mark.parametrize("rtype", ["ADDED", "MODIFIED", "DELETED"])
def test_pod_filter(kw, rtype):
    h = scheduled()
    before = h.engine.ignored
    outs = h.feed(rtype, pod(index=5, phase="Failed", exit_code=1, **kw))
    assert not outs.resolved()
    assert h.engine.ignored == before + 1


def test_job_uid_comes_from_the_controller_reference():
    """A pod of a deleted job with the same name (other uid) never matches policies."""
    h = scheduled(job(policies=[policy("AbortJob", "PodFailed")]))
    outs = h.feed("ADDED", pod(index=7, owner=owner_ref(uid="uid-previous-j")))
    outs = h.feed("MODIFIED", pod(index=7, phase="Failed", exit_code=1, owner=owner_ref(uid="uid-previous-j")))
    [res] = outs.resolved()
    assert (res.event, res.action) == ("PodFailed", "SyncJob")
    assert "another job uid" in res.reason


def test_update_with_unchanged_resource_version_is_ignored():
    h = scheduled()
    outs = h.set_pod("j-t-0", phase="Running", same_rv=True)
    assert outs == []


@pytest.mark.parametrize("value", ["true", "false", ""])
def test_out_of_sync_is_the_annotation_key_whatever_its_value(value):
    h = scheduled()
    outs = h.set_pod("j-t-0", phase="Failed", exit_code=1, out_of_sync=value)
    assert outs.events() == ["OutOfSync"]


# ---------------------------------------------------------------- §4.2 pod add


@pytest.mark.parametrize("phase", ["Pending", "Running", "Succeeded", "Failed", ""])
def test_pod_add_is_podpending_whatever_the_phase(phase):
    h = Harness(job())
    h.pg("Inqueue")
    outs = h.add_pod("t", 0, phase=phase)
    assert outs.events() == ["PodPending"]


def test_pod_add_of_out_of_sync_pod_is_outofsync():
    h = Harness(job())
    assert h.add_pod("t", 0, out_of_sync="true").events() == ["OutOfSync"]


def test_pod_add_caches_the_pod_before_handling():
    h = Harness(job())
    h.pg("Inqueue")
    h.add_pod("t", 0, phase="Running")
    h.add_pod("t", 1, phase="Running")
    assert h.phase == "Running" and h.status.running == 2


# ---------------------------------------------------------------- §4.2 pod update


def updated(old: str, new: str, *, other: str = "Pending", job_obj: dict | None = None, **change) -> o.ActionResolved:
    h = scheduled(job_obj)
    if other != "Pending":
        h.set_pod("j-t-1", phase=other)
    if old != "Pending":
        h.set_pod("j-t-0", phase=old)
    outs = h.set_pod("j-t-0", phase=new, **change)
    [res] = [r for r in outs.resolved() if r.pod == "j-t-0"]
    return res


@pytest.mark.parametrize(
    "old,new,other,change,event",
    [
        ("Running", "Failed", "Pending", dict(exit_code=137), "PodFailed"),
        ("Pending", "Failed", "Pending", {}, "PodFailed"),
        ("Failed", "Failed", "Pending", dict(exit_code=2), "OutOfSync"),
        ("Running", "Succeeded", "Succeeded", {}, "TaskCompleted"),
        ("Running", "Succeeded", "Running", {}, "OutOfSync"),
        ("Succeeded", "Succeeded", "Succeeded", dict(restarts=1), "OutOfSync"),
        ("Pending", "Running", "Pending", dict(restarts=5), "PodRunning"),
        ("Running", "Running", "Pending", dict(restarts=3), "TaskFailed"),
        ("Running", "Running", "Pending", dict(restarts=2), "OutOfSync"),
        ("Pending", "Pending", "Pending", dict(restarts=3), "TaskFailed"),
        ("Running", "Pending", "Pending", dict(restarts=3), "PodPending"),
        ("Running", "Unknown", "Pending", {}, "OutOfSync"),
        ("Running", "Failed", "Pending", dict(exit_code=1, out_of_sync="true"), "OutOfSync"),
        ("Running", "Running", "Pending", dict(restarts=3, out_of_sync="true"), "OutOfSync"),
        ("Running", "Succeeded", "Succeeded", dict(out_of_sync="true"), "OutOfSync"),
    ],
    ids=[
        "phase_to_failed_is_podfailed",
        "pending_to_failed_is_podfailed",
        "failed_to_failed_is_outofsync",
        "succeeded_completing_the_task_is_taskcompleted",
        "succeeded_with_task_incomplete_is_outofsync",
        "succeeded_to_succeeded_is_outofsync",
        "phase_change_to_running_is_podrunning_even_if_task_failed",
        "running_to_running_with_task_failed_is_taskfailed",
        "running_to_running_below_task_maxRetry_is_outofsync",
        "pending_to_pending_with_task_failed_is_taskfailed",
        "phase_change_to_pending_is_podpending_even_if_task_failed",
        "other_phase_is_outofsync",
        "out_of_sync_overrides_podfailed",
        "out_of_sync_overrides_taskfailed",
        "out_of_sync_overrides_taskcompleted",
    ],
)
def test_pod_update_event_table(old, new, other, change, event):
    assert updated(old, new, other=other, **change).event == event


@pytest.mark.parametrize(
    "codes,expected",
    [([137], 137), ([None], 0), ([None, 5], 0), ([7, 5], 7)],
    ids=["exit_code_of_first_container", "no_terminated_state_gives_0", "only_index_0_is_read",
         "second_container_ignored"],
)
def test_pod_failed_exit_code_from_container_statuses_0(codes, expected):
    h = Harness(job())
    h.pg("Inqueue")
    h.feed("ADDED", pod(phase="Running"))
    outs = h.feed("MODIFIED", pod(phase="Failed", exit_codes=codes))
    [res] = outs.resolved()
    assert (res.event, res.exit_code) == ("PodFailed", expected)


@pytest.mark.parametrize(
    "max_retry,restarts,init,event",
    [(0, 2, None, "OutOfSync"), (0, 3, None, "TaskFailed"), (1, 1, None, "TaskFailed"),
     (3, 1, 2, "TaskFailed"), (3, 1, 1, "OutOfSync")],
    ids=["task_maxRetry_0_means_3_below", "task_maxRetry_0_means_3_reached", "task_maxRetry_1_reached",
         "init_container_restarts_count", "init_plus_regular_below_maxRetry"],
)
def test_task_failed_threshold(max_retry, restarts, init, event):
    h = scheduled(job(tasks=[task(max_retry=max_retry)]))
    h.set_pod("j-t-0", phase="Running")
    outs = h.set_pod("j-t-0", restarts=restarts, init_restarts=init)
    assert outs.events() == [event]


def test_task_failed_sums_restarts_over_the_tasks_running_and_pending_pods():
    h = scheduled(job(tasks=[task(replicas=3, max_retry=3)]))
    h.add_pod("t", 2)
    h.set_pod("j-t-2", phase="Failed", restarts=9)  # a Failed pod's restarts do not count
    h.set_pod("j-t-1", restarts=1)  # Pending
    h.set_pod("j-t-0", phase="Running")
    assert h.set_pod("j-t-0", restarts=1).events() == ["OutOfSync"]  # 1 + 1 < 3
    assert h.set_pod("j-t-0", restarts=2).events() == ["TaskFailed"]  # 2 + 1 >= 3


def test_task_completed_carries_the_task_name_so_task_policies_apply():
    j = job(tasks=[task("master", 1, policies=[policy("CompleteJob", "TaskCompleted")]), task("worker", 2)])
    h = running_job(j)
    outs = h.set_pod("j-master-0", phase="Succeeded", exit_code=0)
    [res] = outs.resolved()[:1]
    assert (res.event, res.task, res.action, res.policy) == ("TaskCompleted", "master", "CompleteJob",
                                                            "task[master][0]")
    assert h.phase == "Completing"


def test_task_completed_counts_succeeded_cached_pods_against_replicas():
    h = running_job(job(tasks=[task(replicas=3)]))
    assert h.set_pod("j-t-0", phase="Succeeded").events() == ["OutOfSync"]
    assert h.set_pod("j-t-1", phase="Succeeded").events() == ["OutOfSync"]
    assert h.set_pod("j-t-2", phase="Succeeded").events()[0] == "TaskCompleted"


def test_pod_update_request_carries_task_pod_and_version():
    h = scheduled(job(policies=[policy("AbortJob", "PodFailed")]))
    h.feed("ADDED", pod(index=0, version=0))
    h.engine.jobs[h.key].status.version = 1  # the job moved on: version-0 pods are outdated
    outs = h.feed("MODIFIED", pod(index=0, version=0, phase="Failed", exit_code=3))
    [res] = outs.resolved()
    assert (res.task, res.pod, res.exit_code, res.action) == ("t", "j-t-0", 3, "SyncJob")
    assert "job version 0 < current 1" in res.reason


# ---------------------------------------------------------------- §4.2 pod delete


@pytest.mark.parametrize("phase", ["Pending", "Running", "Succeeded", "Failed"])
def test_delete_of_cached_pod_not_out_of_sync_is_podevicted_whatever_the_phase(phase):
    h = scheduled()
    if phase != "Pending":
        h.set_pod("j-t-0", phase=phase)
    assert h.delete_pod("j-t-0").events()[0] == "PodEvicted"


def test_delete_of_annotated_pod_is_outofsync():
    h = scheduled()
    h.set_pod("j-t-0", out_of_sync="true")
    assert h.delete_pod("j-t-0").events() == ["OutOfSync"]


def test_delete_of_a_pod_we_killed_is_outofsync():
    """The kill annotates the pod first (read-your-writes cache: the mark is ours before the record shows it)."""
    h = running_job()
    h.command("AbortJob")
    assert h.delete_pod("j-t-0").events() == ["OutOfSync"]


def test_delete_of_uncached_pod_is_outofsync():
    h = scheduled()
    assert h.feed("DELETED", pod(index=9)).events() == ["OutOfSync"]


def test_delete_removes_the_pod_from_the_cache():
    h = running_job()
    outs = h.delete_pod("j-t-1")
    assert outs.created() == ["j-t-1"]  # the sync after the eviction recreates it


# ---------------------------------------------------------------- §4.3 job events


def test_job_add_is_outofsync_and_initialises():
    h = Harness()
    outs = h.create(job())
    assert outs.events()[0] == "OutOfSync"
    assert h.phase == "Pending"
    assert [c.name for c in outs.of(o.CreatePodGroup)] == ["j-uid-j"]
    assert not outs.created()  # the PodGroup is not past Pending yet
    first = outs.writes()[0]
    assert (first.state.phase, first.min_available, [c.status for c in first.conditions]) == (
        "Pending", 2, ["Pending"])


def test_job_update_with_unchanged_resource_version_is_ignored():
    h = Harness(job())
    assert h.feed("MODIFIED", h.get("Job", "j"), bump=False) == []


def test_job_spec_change_is_outofsync():
    h = running_job()
    outs = h.update_job(lambda j: j["spec"]["tasks"][0].update(replicas=3))
    assert outs.events() == ["OutOfSync"]
    assert outs.created() == ["j-t-2"]


def test_job_status_only_change_with_same_phase_is_ignored():
    h = running_job()
    outs = h.update_job(lambda j: j.update(status={"state": {"phase": "Running"}, "running": 7}))
    assert not outs.resolved()


def test_own_phase_change_gets_exactly_one_more_pass():
    """Volcano's phase write comes back as a job update (OutOfSync); vcbus runs that pass itself."""
    h = scheduled()
    h.set_pod("j-t-0", phase="Running")
    outs = h.set_pod("j-t-1", phase="Running")
    assert outs.phases() == [("Pending", "Running")]
    assert [(r.event, r.phase) for r in outs.resolved()] == [("PodRunning", "Pending"), ("OutOfSync", "Running")]
    # the recorded write of that phase, when it shows up in the log, is not a second request
    outs = h.update_job(lambda j: j.update(status={"state": {"phase": "Running"}}))
    assert not outs.resolved() and not outs.of(o.Divergence)


def test_job_delete_enqueues_nothing_and_deletes_no_pod():
    h = running_job(job(policies=[policy("RestartJob", "PodEvicted", timeout="1m")]))
    h.delete_pod("j-t-0")
    outs = h.delete_job()
    assert outs.of(o.JobDeleted) and not outs.resolved() and not outs.of(o.DeletePod)
    assert outs.cancelled()  # its delayed actions can no longer find the job
    assert not h.delete_pod("j-t-1").resolved()  # ownerReference GC's deletions: no job, dropped


def test_pods_seen_before_their_job_are_dropped_then_counted():
    h = Harness()
    h.feed("ADDED", pod(index=0, phase="Running"))
    assert not h.outputs.resolved()
    h.create(job(tasks=[task(replicas=1)]))
    h.pg("Inqueue")
    assert h.phase == "Running"


# ---------------------------------------------------------------- §4.4 PodGroup events


def test_podgroup_add_is_no_request():
    h = Harness(job())
    assert not h.feed("ADDED", podgroup(phase="Inqueue")).resolved()


def test_podgroup_phase_change_is_an_empty_event_syncjob():
    h = Harness(job())
    outs = h.pg("Pending")
    [res] = outs.resolved()
    assert (res.event, res.action) == ("", "SyncJob")
    assert not outs.created()  # Pending: no pod work yet
    outs = h.pg("Inqueue")
    assert outs.created() == ["j-t-0", "j-t-1"]


def test_podgroup_update_without_phase_change_is_no_request():
    h = Harness(job())
    h.pg("Inqueue")
    pg = h.get("PodGroup", "j-uid-j")
    pg["status"]["conditions"] = [{"type": "Scheduled", "status": "True"}]
    assert not h.feed("MODIFIED", pg).resolved()


def test_podgroup_unknown_is_the_unknown_event():
    h = running_job(job(policies=[policy("AbortJob", "Unknown")]))
    outs = h.pg("Unknown")
    [res] = outs.resolved()[:1]
    assert (res.event, res.action) == ("Unknown", "AbortJob")


@pytest.mark.parametrize(
    "owners,job_name",
    [
        ([owner_ref("j")], "j"),
        ([owner_ref("other"), {"apiVersion": "example.com/v9", "kind": "Job", "name": "j", "uid": "x"}], "j"),
        (None, "j"),
    ],
    ids=["job_from_owner_reference", "last_owner_of_kind_job_wins_any_api_version", "no_owner_uses_podgroup_name"],
)
def test_podgroup_job_name(owners, job_name):
    h = Harness(job())
    h.feed("ADDED", podgroup(name="j" if owners is None else "pg-x", owners=owners))
    pg = h.get("PodGroup", "j" if owners is None else "pg-x")
    pg["status"] = {"phase": "Inqueue"}
    outs = h.feed("MODIFIED", pg)
    assert [r.job for r in outs.resolved()] == [f"default/{job_name}"]


# ---------------------------------------------------------------- §3.3 / §4.6 commands


def test_command_is_deleted_recorded_and_its_action_requested():
    h = running_job()
    outs = h.command("AbortJob")
    assert [(c.name, c.namespace) for c in outs.of(o.DeleteBusCommand)] == [("j-abortjob-x", "default")]
    assert outs.messages()[:2] == [
        "Start to execute command AbortJob, and clean it up to make sure executed not more than once.",
        "Start to execute action AbortJob ",
    ]
    [res] = outs.resolved()[:1]
    assert (res.event, res.action, res.policy) == ("CommandIssued", "AbortJob", "command")
    assert h.phase == "Aborting"


@pytest.mark.parametrize("rtype", ["MODIFIED", "DELETED"])
def test_only_command_adds_are_consumed(rtype):
    h = running_job()
    outs = h.feed(rtype, command("j", "AbortJob"))
    assert outs == [] and h.phase == "Running"


@pytest.mark.parametrize(
    "target",
    [
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "name": "j"},
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j"},
        {"apiVersion": JOB_API, "kind": "JobFlow", "name": "j"},
    ],
    ids=["queue_command_ignored", "other_api_version_ignored", "other_kind_ignored"],
)
def test_command_target_must_be_a_vcjob(target):
    h = running_job()
    outs = h.feed("ADDED", command("j", "AbortJob", target=target))
    assert [x for x in outs if x.job == h.key] == [] and h.phase == "Running"
    # a Queue target is the queue controller's: consumed on `_/<queue>` (tests/test_sm_queues.py)
    consumed = [(type(x).__name__, x.job) for x in outs]
    assert consumed == ([("DeleteBusCommand", "_/j")] if target["kind"] == "Queue" else [])


def test_command_for_a_job_not_in_the_cache_is_consumed_and_dropped():
    """processNextCommand deletes it; the request finds no job; recordJobEvent finds no job to put the event on."""
    h = running_job()
    outs = h.feed("ADDED", command("ghost", "AbortJob"))
    assert outs.of(o.DeleteBusCommand)
    assert not outs.resolved() and not outs.of(o.RecordEvent)
