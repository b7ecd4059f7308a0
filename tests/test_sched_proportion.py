"""proportion (reference §6): water-filling, weights, capability, guarantee, queue order and checks."""

from __future__ import annotations

import pytest

from statemachines import outputs as o
from statemachines.scheduler.config import DEFAULT_CONFIG
from statemachines.scheduler.session import open_session
from tests.sched_builders import GI, Cluster, node, outs_of, pod, podgroup, queue


def bound(result) -> dict[str, str]:
    return {b.name: b.node for b in result.binds}


def test_upstream_mini_example_one_pod_per_queue():
    cluster = Cluster(node("n1", cpu="2", memory="8Gi"), queue("c1"), queue("c2"),
                      podgroup("pg1", 0, queue="c1", phase="Inqueue"), podgroup("pg2", 0, queue="c2", phase="Inqueue"),
                      *[pod(f"pg1-w-{i}", "pg1", memory=None) for i in range(2)],
                      *[pod(f"pg2-w-{i}", "pg2", memory=None) for i in range(2)])
    result = cluster.session()
    assert bound(result) == {"pg1-w-0": "n1", "pg2-w-0": "n1"}
    deserved = {q["name"]: q["deserved"]["cpu"] for q in result.queues}
    assert deserved == {"c1": "1", "c2": "1"}


def test_upstream_mini_example_queue_asking_more_than_its_share_gets_nothing():
    cluster = Cluster(node("n1", cpu="2", memory="8Gi"), queue("c1"), queue("c2"),
                      podgroup("pg1", 0, queue="c1", phase="Inqueue"), podgroup("pg2", 0, queue="c2", phase="Inqueue"),
                      pod("pg1-w-0", "pg1", cpu="3", memory=None), pod("pg2-w-0", "pg2", memory=None))
    result = cluster.session()
    assert bound(result) == {"pg2-w-0": "n1"}
    report = result.reports["default/pg1"]
    assert report.tasks[0].fit_error == ""  # dropped by Allocatable: no fit error


def deserved_of(*objects: dict) -> dict[str, tuple[float, float]]:
    cluster = Cluster(*objects)
    ssn = open_session(cluster.cache.snapshot(), DEFAULT_CONFIG, uid="u", number=1, seq=1, time="t")
    return {q.name: (q.deserved.cpu, q.deserved.mem) for q in ssn.queues.values() if q.has_attr}


def demand(name: str, queue_name: str, cpus: int, cpu: str = "1") -> list[dict]:
    return [podgroup(name, 0, queue=queue_name, phase="Inqueue")] + [
        pod(f"{name}-w-{i}", name, cpu=cpu, memory="1Gi") for i in range(cpus)
    ]


def test_weights_split_the_cluster_when_everyone_wants_more():
    got = deserved_of(node("n1", cpu="12", memory="120Gi"), queue("a", 1), queue("b", 2), queue("c", 3),
                      *demand("ja", "a", 20), *demand("jb", "b", 20), *demand("jc", "c", 20))
    assert {k: v[0] for k, v in got.items()} == pytest.approx({"a": 2000, "b": 4000, "c": 6000})
    assert {k: v[1] for k, v in got.items()} == pytest.approx({"a": 20 * GI, "b": 20 * GI, "c": 20 * GI})  # request caps


def test_surplus_of_a_satisfied_queue_is_redistributed_by_weight():
    got = deserved_of(node("n1", cpu="12", memory="120Gi"), queue("a", 1), queue("b", 1), queue("c", 2),
                      *demand("ja", "a", 1), *demand("jb", "b", 20), *demand("jc", "c", 20))
    # round 1: 3/3/6; a keeps 1 (its request), 2 go back; round 2: b +2/3, c +4/3
    assert got["a"][0] == pytest.approx(1000)
    assert got["b"][0] == pytest.approx(3000 + 2000 / 3)
    assert got["c"][0] == pytest.approx(6000 + 4000 / 3)


def test_capability_caps_and_guarantee_raises_the_share():
    got = deserved_of(node("n1", cpu="12", memory="120Gi"), queue("a", 1, capability={"cpu": "2"}), queue("b", 1),
                      queue("g", 1, guarantee={"cpu": "5", "memory": "1Gi"}),
                      *demand("ja", "a", 20), *demand("jb", "b", 20), *demand("jg", "g", 1))
    assert got["a"][0] == pytest.approx(2000)
    assert got["g"][0] == pytest.approx(5000)  # raised to its guarantee above its 1 CPU request
    # round 1: 4 each -> a 2 (capped), b 4, g 5 (guarantee, met); round 2: a capped (met), b 4.5; round 3: b 5
    assert got["b"][0] == pytest.approx(5000)


def test_closed_queue_allocates_nothing_and_overused_queues_are_skipped():
    cluster = Cluster(node("n1", cpu="4", memory="8Gi"), queue("open"), queue("closed", state="Closed"),
                      podgroup("a", 1, queue="open", phase="Inqueue"), podgroup("b", 1, queue="closed", phase="Inqueue"),
                      pod("a-w-0", "a", memory=None), pod("b-w-0", "b", memory=None))
    assert bound(cluster.session()) == {"a-w-0": "n1"}


def test_lower_share_queue_goes_first_and_priority_before_share():
    # both jobs fit their queue's share but only one fits the one node they select
    pick = {"pick": "yes"}
    objects = [node("n1", cpu="1", memory="8Gi", labels=pick), node("n2", cpu="10", memory="8Gi"),
               queue("big", 1, created="2026-01-01T00:00:00Z"), queue("small", 1, created="2026-01-01T00:00:01Z"),
               podgroup("held", 1, queue="big", phase="Running"),
               pod("held-w-0", "held", node="n1", phase="Running", cpu="100m", memory=None),
               podgroup("a", 1, queue="big", phase="Inqueue"), pod("a-w-0", "a", cpu="900m", memory=None, node_selector=pick),
               podgroup("b", 1, queue="small", phase="Inqueue"), pod("b-w-0", "b", cpu="900m", memory=None, node_selector=pick)]
    assert bound(Cluster(*objects).session()) == {"b-w-0": "n1"}  # small's share is 0, big's is not
    objects[2] = queue("big", 1, priority=10)
    assert bound(Cluster(*objects).session()) == {"a-w-0": "n1"}


def test_queue_allocated_rolls_up_to_root_through_parents():
    cluster = Cluster(node("n1", cpu="8", memory="8Gi"), queue("root", reclaimable=False), queue("team", parent="root"),
                      queue("dev", parent="team"), podgroup("a", 1, queue="dev", phase="Running"),
                      pod("a-w-0", "a", node="n1", phase="Running", cpu="2", memory="1Gi"))
    result = cluster.session()
    allocated = {q.queue: q.allocated for q in outs_of(result.outputs, o.UpdateQueueStatus)}
    expected = {"cpu": "2", "memory": "1Gi", "pods": "1"}
    assert allocated == {"root": expected, "team": expected, "dev": expected}
