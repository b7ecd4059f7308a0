"""gang (reference §3) and the PodGroup status at session close (§2.9)."""

from __future__ import annotations

import pytest

from statemachines import outputs as o
from statemachines.scheduler.config import DEFAULT_CONFIG
from statemachines.scheduler.fiterrors import UNSCHEDULABLE, FitError, FitErrors, histogram
from statemachines.scheduler.plugins.gang import job_valid
from statemachines.scheduler.reasons import job_fit_error
from statemachines.scheduler.session import open_session
from tests.sched_builders import Cluster, node, outs_of, pod, podgroup, queue


def job_of(*objects: dict, key: str = "default/pg"):
    cluster = Cluster(queue(), node("n1", cpu="1"), *objects)
    ssn = open_session(cluster.cache.snapshot(), DEFAULT_CONFIG, uid="u", number=1, seq=1, time="t")
    return ssn, ssn.jobs[key]


@pytest.mark.parametrize(
    ("min_member", "min_task", "pods", "expected"),
    [
        (3, None, [("w", "Pending")] * 3, None),
        (3, None, [("w", "Pending")] * 2, ("NotEnoughTasks", "Not enough valid tasks for gang-scheduling, valid: 2, min: 3")),
        (2, None, [("w", "Pending"), ("w", "Failed"), ("w", "Running")], None),
        (3, None, [("w", "Pending"), ("w", "Failed"), ("w", "Running")],
         ("NotEnoughTasks", "Not enough valid tasks for gang-scheduling, valid: 2, min: 3")),
        (3, {"m": 1, "w": 2}, [("m", "Pending"), ("w", "Pending"), ("w", "Pending")], None),
        (3, {"m": 1, "w": 2}, [("w", "Pending")] * 3,
         ("NotEnoughPodsOfTask", "Not enough valid pods of each task for gang-scheduling")),
        (2, {"m": 1, "w": 2}, [("w", "Pending")] * 3, None),  # minAvailable < Σ minTaskMember: roles skipped
        (0, None, [], None),
    ],
)
def test_job_valid(min_member, min_task, pods, expected):
    objects = [podgroup("pg", min_member, phase="Inqueue", min_task_member=min_task)]
    for i, (role, phase) in enumerate(pods):
        objects.append(pod(f"pg-{role}-{i}", "pg", role=role, phase=phase, node="n1" if phase != "Pending" else "",
                           cpu="100m"))
    _, job = job_of(*objects)
    assert job_valid(job) == expected


def test_ready_pipelined_starving_counters():
    objects = [podgroup("pg", 3, phase="Inqueue")]
    objects += [pod("pg-w-0", "pg", node="n1", phase="Running", cpu="100m"), pod("pg-w-1", "pg", cpu=None, memory=None),
                pod("pg-w-2", "pg")]
    _, job = job_of(*objects)
    assert (job.ready_num(), job.pending_best_effort(), job.waiting_num()) == (1, 1, 0)
    assert not job.is_ready() and not job.is_pipelined() and job.is_starving()
    job.set_status(job.tasks["uid-pg-w-2"], "Pipelined")
    assert not job.is_ready() and job.is_pipelined() and job.is_starving()  # 1 ready + 1 waiting < 3


def test_fit_error_of_the_upstream_six_pod_example():
    objects = [podgroup("pg", 6, phase="Inqueue")] + [pod(f"task-{i}", "pg") for i in range(1, 7)]
    _, job = job_of(*objects)
    for i in (1, 2, 3):
        job.tasks[f"uid-task-{i}"].last_tx = ("Allocated", "n1", False)
    fe = FitErrors()
    fe.set_node("n1", FitError(((UNSCHEDULABLE, "node(s) pod number exceeded"),)))
    fe.set_node("n2", FitError(((UNSCHEDULABLE, "node(s) resource fit failed"),)))
    fe.set_node("n3", FitError(((UNSCHEDULABLE, "node(s) resource fit failed"),)))
    job.fit_errors["uid-task-6"] = fe
    assert job_fit_error(job) == (
        "pod group is not ready, 6 Pending, 6 minAvailable; Pending: 3 Schedulable, 3 Unschedulable. "
        "Origin reason is task-6: 0/3 nodes are unavailable: 1 node(s) pod number exceeded, "
        "2 node(s) resource fit failed."
    )


def test_histograms_sort_as_plain_strings():
    assert histogram({"Pending": 10, "Running": 2, "minAvailable": 3}) == ["10 Pending", "2 Running", "3 minAvailable"]
    assert histogram({"Schedulable": 2, "Unschedulable": 1}) == ["1 Unschedulable", "2 Schedulable"]
    fe = FitErrors()
    assert fe.message() == "0/0 nodes are unavailable"
    fe.err = "Task t with role spec w has already predicated failed, skip"
    assert fe.message() == "Task t with role spec w has already predicated failed, skip"


def test_two_reasons_on_one_node_are_both_counted():
    fe = FitErrors()
    fe.set_node("n1", FitError(((UNSCHEDULABLE, "node(s) pod number exceeded"), (3, "node(s) were unschedulable"))))
    fe.set_node("n2", FitError(((UNSCHEDULABLE, "Insufficient cpu"),)))
    assert fe.message() == ("0/2 nodes are unavailable: 1 Insufficient cpu, 1 node(s) pod number exceeded, "
                            "1 node(s) were unschedulable.")


def session_status(cluster: Cluster):
    result = cluster.session()
    return result, {s.name: s.status for s in outs_of(result.outputs, o.UpdatePodGroupStatus)}


def test_unknown_phase_when_running_tasks_and_unschedulable_now():
    cluster = Cluster(queue(), node("n1", cpu="2"), podgroup("pg", 3, phase="Running"),
                      pod("pg-w-0", "pg", node="n1", phase="Running"), pod("pg-w-1", "pg", cpu="4"),
                      pod("pg-w-2", "pg", cpu="4"))
    result, statuses = session_status(cluster)
    assert statuses["pg"]["phase"] == "Unknown"
    assert statuses["pg"]["running"] == 1
    message = statuses["pg"]["conditions"][0]["message"]
    # plain string sort: "1 Running" before "2 Pending"
    assert message.startswith("2/3 tasks in gang unschedulable: pod group is not ready, 1 Running, 2 Pending, 3 minAvailable")


def test_running_group_that_loses_pods_drops_to_pending_and_completed_when_all_done():
    cluster = Cluster(queue(), node("n1"), podgroup("pg", 2, phase="Running"),
                      pod("pg-w-0", "pg", node="n1", phase="Pending"))  # Bound, the other pod gone
    _, statuses = session_status(cluster)
    assert statuses["pg"]["phase"] == "Pending"
    cluster = Cluster(queue(), node("n1"), podgroup("pg", 2, phase="Running"),
                      pod("pg-w-0", "pg", node="n1", phase="Succeeded"), pod("pg-w-1", "pg", node="n1", phase="Failed"))
    _, statuses = session_status(cluster)
    assert statuses["pg"] == {"phase": "Completed", "conditions": statuses["pg"]["conditions"], "succeeded": 1,
                              "failed": 1}


def test_conditions_are_upserted_by_type_and_never_set_false():
    old = [{"type": "Unschedulable", "status": "True", "transitionID": "old", "reason": "NotEnoughResources",
            "message": "1/2 tasks in gang unschedulable: ..."}]
    cluster = Cluster(queue(), node("n1"), podgroup("pg", 1, phase="Inqueue", conditions=old), pod("pg-w-0", "pg"))
    result, statuses = session_status(cluster)
    conditions = statuses["pg"]["conditions"]
    assert [(c["type"], c["status"]) for c in conditions] == [("Unschedulable", "True"), ("Scheduled", "True")]
    assert conditions[0]["transitionID"] == "old" and conditions[1]["transitionID"] == result.uid


def test_releasing_scheduled_tasks_keep_their_group_without_an_unschedulable_condition():
    cluster = Cluster(queue(), node("n1"), podgroup("pg", 2, phase="Running"),
                      pod("pg-w-0", "pg", node="n1", phase="Running"),
                      pod("pg-w-1", "pg", node="n1", phase="Running", deleting=True))
    _, statuses = session_status(cluster)
    assert statuses["pg"] == {"phase": "Running", "running": 1}  # releasing counts as scheduled; no condition


def test_schedulable_count_uses_the_last_transaction():
    # 3 pods, min 3, only 2 fit (fragmentation): the two tentatively placed count as schedulable (U = 1)
    cluster = Cluster(queue(), node("n1", cpu="5"), node("n2", cpu="5"), podgroup("pg", 3, phase="Inqueue"),
                      *[pod(f"pg-w-{i}", "pg", cpu="3") for i in range(3)])
    _, statuses = session_status(cluster)
    message = statuses["pg"]["conditions"][0]["message"]
    assert message == (
        "1/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable; Pending: "
        "1 Unschedulable, 2 Schedulable. Origin reason is pg-w-2: 0/2 nodes are unavailable: 2 Insufficient cpu."
    )


def test_tasks_beyond_the_queue_share_are_dropped_without_a_fit_error():
    # proportion's Allocatable runs before the predicates: 3 x 1 CPU asked, 2 CPU deserved
    cluster = Cluster(queue(), node("n1", cpu="2"), podgroup("pg", 3, phase="Inqueue"),
                      *[pod(f"pg-w-{i}", "pg") for i in range(3)])
    _, statuses = session_status(cluster)
    assert statuses["pg"]["conditions"][0]["message"] == (
        "1/3 tasks in gang unschedulable: pod group is not ready, 3 Pending, 3 minAvailable; Pending: "
        "1 Unschedulable, 2 Schedulable"
    )


def test_role_short_cut_after_a_fit_failure():
    # nodes of 2 CPU, tasks of 3: each fits the queue's share (4 CPU) but no node
    cluster = Cluster(queue(), node("n1", cpu="2"), node("n2", cpu="2"), podgroup("pg", 2, phase="Inqueue"),
                      *[pod(f"pg-w-{i}", "pg", role="w", cpu="3") for i in range(3)])
    result = cluster.session()
    tasks = {t.name: t for t in result.reports["default/pg"].tasks}
    assert tasks["pg-w-0"].fit_error == "0/2 nodes are unavailable: 2 Insufficient cpu."
    assert tasks["pg-w-1"].fit_error == "Task pg-w-1 with role spec w has already predicated failed, skip"
    assert tasks["pg-w-2"].fit_error == "Task pg-w-2 with role spec w has already predicated failed, skip"
    conditions = {c.name: c.message for c in outs_of(result.outputs, o.UpdatePodCondition)}
    assert conditions["pg-w-1"] == "Task pg-w-1 with role spec w has already predicated failed, skip"
