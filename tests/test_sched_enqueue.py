"""enqueue (reference §4): overcommit and proportion votes, nil minResources, no head-of-line blocking."""

from __future__ import annotations

from statemachines import outputs as o
from statemachines.scheduler.config import config_from_dict
from tests.sched_builders import Cluster, node, outs_of, pod, podgroup, queue


def enqueued(result) -> list[str]:
    return [e.podgroup for e in outs_of(result.outputs, o.JobEnqueued)]


def pg_events(result, name: str) -> list[tuple[str, str, str]]:
    return [(e.event_type, e.reason, e.message) for e in outs_of(result.outputs, o.RecordEvent)
            if e.kind == "PodGroup" and e.name == name]


def test_nil_min_resources_enqueues_unconditionally():
    cluster = Cluster(node("n1", cpu="1"), queue(), podgroup("huge", 1))  # no minResources
    assert enqueued(cluster.session()) == ["huge"]


def test_overcommit_rejects_beyond_total_times_factor_and_says_why():
    # 2 nodes x 1 GPU: idle = 2 x 1.2 = 2.4 GPUs; a job asking 3 GPUs is overused on gpu only
    gpu = {"nvidia.com/gpu": "1"}
    cluster = Cluster(node("n1", extra=gpu), node("n2", extra=gpu), queue(),
                      podgroup("gpus", 3, phase="Pending", min_resources={"cpu": "3", "nvidia.com/gpu": "3", "pods": "3"}))
    result = cluster.session()
    assert enqueued(result) == []
    assert ("Normal", "Unschedulable", "resource in cluster is overused: overused nvidia.com/gpu") in pg_events(result, "gpus")
    assert not outs_of(result.outputs, o.UpdatePodGroupStatus)  # stays Pending: nothing written
    gang = [e for e in pg_events(result, "gpus") if e[0] == "Warning"]
    assert gang == [("Warning", "Unschedulable", "0/0 tasks in gang unschedulable: pod group is not ready, 3 minAvailable")]
    again = cluster.session()
    assert pg_events(again, "gpus") == []  # said once
    cluster.add(node("n3", extra=gpu))
    assert enqueued(cluster.session()) == ["gpus"]  # 3.6 GPUs idle, 3 capability


def test_inqueue_jobs_reserve_their_min_resources():
    cluster = Cluster(node("n1", cpu="10"), queue(),
                      podgroup("first", 1, phase="Inqueue", min_resources={"cpu": "8"}),
                      podgroup("second", 1, min_resources={"cpu": "5"}), podgroup("third", 1, min_resources={"cpu": "2"}))
    result = cluster.session()
    # overcommit idle 12: 8 + 5 > 12 rejected, 8 + 2 fits; proportion: realCapability 10: 8 + 2 <= 10
    assert enqueued(result) == ["third"]
    assert pg_events(result, "second")[0][2] == "resource in cluster is overused: overused cpu"


def test_proportion_rejects_a_closed_queue_and_beyond_real_capability():
    cluster = Cluster(node("n1", cpu="10"), queue("closed", state="Closed"), queue("capped", capability={"cpu": "2"}),
                      podgroup("a", 1, queue="closed", min_resources={"cpu": "1"}),
                      podgroup("b", 1, queue="capped", min_resources={"cpu": "3", "memory": "1Gi"}),
                      podgroup("c", 1, queue="capped", min_resources={"cpu": "2"}))
    result = cluster.session()
    assert enqueued(result) == ["c"]  # b rejected, c behind it still admitted
    assert pg_events(result, "a") == [("Warning", "Unschedulable",
                                       "0/0 tasks in gang unschedulable: pod group is not ready, 1 minAvailable")]
    assert ("Normal", "Unschedulable", "queue resource quota insufficient: insufficient cpu") in pg_events(result, "b")
    assert result.reports["default/b"].enqueue_message == "queue resource quota insufficient: insufficient cpu"


def test_a_job_bigger_than_the_cluster_never_enqueues_without_a_capability():
    cluster = Cluster(node("n1", cpu="10"), queue(), podgroup("big", 1, min_resources={"cpu": "11"}),
                      config={"actions": "enqueue, allocate", "tiers": [{"plugins": [{"name": "proportion"}]}]})
    result = cluster.session()
    assert enqueued(result) == []
    assert pg_events(result, "big")[0][2] == "queue resource quota insufficient: insufficient cpu"


def test_without_enqueue_allocate_moves_pending_groups_inqueue():
    config = config_from_dict({"actions": "allocate", "tiers": [{"plugins": [{"name": "gang"}, {"name": "predicates"}]}]})
    cluster = Cluster(node("n1"), queue(), podgroup("pg", 1), pod("pg-w-0", "pg"), config=config)
    result = cluster.session()
    assert [b.name for b in result.binds] == ["pg-w-0"]
    [status] = outs_of(result.outputs, o.UpdatePodGroupStatus)
    assert status.status["phase"] == "Inqueue"


def test_pending_groups_are_not_allocated_when_enqueue_is_configured():
    cluster = Cluster(node("n1"), queue(), podgroup("pg", 1, min_resources={"cpu": "100"}), pod("pg-w-0", "pg"))
    assert cluster.session().binds == []


def test_enqueue_and_allocate_in_one_session():
    cluster = Cluster(node("n1"), queue(), podgroup("pg", 1, min_resources={"cpu": "1"}), pod("pg-w-0", "pg"))
    result = cluster.session()
    assert enqueued(result) == ["pg"] and [b.name for b in result.binds] == ["pg-w-0"]
