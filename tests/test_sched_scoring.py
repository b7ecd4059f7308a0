"""Node scores (reference §5.7): LeastAllocated, BalancedAllocation, binpack; the choice and its tie-break."""

from __future__ import annotations

import pytest

from statemachines.scheduler.config import DEFAULT_CONFIG
from statemachines.scheduler.plugins.binpack import binpack_score, weights
from statemachines.scheduler.plugins.nodeorder import balanced_allocation, least_allocated
from statemachines.scheduler.session import open_session
from tests.sched_builders import Cluster, node, pod, podgroup, queue


def scene(*objects: dict, task: str = "default/pg-w-0"):
    cluster = Cluster(queue(), podgroup("pg", 1, phase="Inqueue"), *objects)
    ssn = open_session(cluster.cache.snapshot(), DEFAULT_CONFIG, uid="u", number=1, seq=1, time="t")
    job = ssn.jobs["default/pg"]
    [t] = [t for t in job.tasks.values() if f"{t.namespace}/{t.name}" == task]
    return ssn, t


def test_scores_on_an_empty_node():
    ssn, task = scene(node("n1", cpu="4", memory="16Gi"), pod("pg-w-0", "pg", cpu="1", memory="2Gi"))
    n1 = ssn.nodes["n1"]
    assert least_allocated(task, n1) == 81  # (50 * 75 + 50 * 87) // 100
    assert balanced_allocation(task, n1) == 93  # 1 - |0.25 - 0.125| / 2
    assert binpack_score(task, n1, *weights({})) == pytest.approx(18.75)  # (0.25 + 0.125) / 2 * 100
    assert sum(fn(task, n1) for fn in ssn.scorers) == pytest.approx(81 + 93 + 18.75)


def test_scores_count_the_pods_already_on_the_node_and_the_non_zero_defaults():
    ssn, task = scene(node("n1", cpu="4", memory="16Gi"),
                      pod("other", None, cpu=None, memory=None, node="n1", phase="Running"),
                      pod("busy", None, cpu="2", memory="8Gi", node="n1", phase="Running"),
                      pod("pg-w-0", "pg", cpu="1", memory="2Gi"))
    n1 = ssn.nodes["n1"]
    # LeastAllocated uses 100m / 200Mi for the request-less pod
    cpu = (4000 - 3100) * 100 // 4000
    mem = (16 * 1024 - 10 * 1024 - 200) * 100 // (16 * 1024)
    assert least_allocated(task, n1) == (50 * cpu + 50 * mem) // 100
    # BalancedAllocation uses the plain requests: 3/4 and 10/16
    assert balanced_allocation(task, n1) == int((1 - abs(0.75 - 0.625) / 2) * 100)
    # binpack uses Volcano's Used (no defaults): (1 + 2) / 4 and (2 + 8) / 16
    assert binpack_score(task, n1, *weights({})) == pytest.approx((0.75 + 0.625) / 2 * 100)


def test_binpack_weights_extras_and_overflow():
    ssn, task = scene(node("n1", cpu="4", memory="16Gi", extra={"nvidia.com/gpu": "4"}),
                      pod("pg-w-0", "pg", cpu="1", memory="2Gi", extra={"nvidia.com/gpu": "2"}))
    n1 = ssn.nodes["n1"]
    args = {"binpack.weight": 2, "binpack.cpu": 3, "binpack.memory": 1, "binpack.resources": "nvidia.com/gpu",
            "binpack.resources.nvidia.com/gpu": 4}
    expected = (3 * 0.25 + 1 * 0.125 + 4 * 0.5) / 8 * 100 * 2
    assert binpack_score(task, n1, *weights(args)) == pytest.approx(expected)
    assert weights({"binpack.cpu": -5})[1]["cpu"] == 1
    ssn, task = scene(node("n1", cpu="1"), pod("pg-w-0", "pg", cpu="2"))
    assert binpack_score(task, ssn.nodes["n1"], *weights({})) == 0.0


def test_balanced_allocation_with_a_gpu_uses_the_population_deviation():
    ssn, task = scene(node("n1", cpu="4", memory="16Gi", extra={"nvidia.com/gpu": "4"}),
                      pod("pg-w-0", "pg", cpu="2", memory="2Gi", extra={"nvidia.com/gpu": "1"}))
    fractions = [0.5, 0.125, 0.25]
    mean = sum(fractions) / 3
    std = (sum((f - mean) ** 2 for f in fractions) / 3) ** 0.5
    assert balanced_allocation(task, ssn.nodes["n1"]) == int((1 - std) * 100)


def test_equal_scores_break_ties_by_node_name():
    cluster = Cluster(queue(), node("b"), node("c"), node("a"), podgroup("pg", 1, phase="Inqueue"), pod("pg-w-0", "pg"))
    assert cluster.session().binds[0].node == "a"


def test_least_allocated_and_binpack_cancel_and_the_name_decides():
    # LeastAllocated prefers the empty node by 25, binpack the busy one by 25 (reference §5.7's note)
    objects = [node("n-empty", cpu="8", memory="8Gi"), node("n-busy", cpu="8", memory="8Gi"),
               pod("x", None, cpu="2", memory="2Gi", node="n-busy", phase="Running"),
               pod("pg-w-0", "pg", cpu="1", memory="1Gi")]
    ssn, task = scene(*objects)
    scores = {name: sum(fn(task, ssn.nodes[name]) for fn in ssn.scorers) for name in ("n-empty", "n-busy")}
    assert scores == {"n-empty": 87 + 100 + 12.5, "n-busy": 62 + 100 + 37.5}
    cluster = Cluster(queue(), podgroup("pg", 1, phase="Inqueue"), *objects)
    assert cluster.session().binds[0].node == "n-busy"


def test_the_higher_score_wins():
    # unbalanced usage on n-skew: BalancedAllocation prefers the empty node
    objects = [node("n-empty", cpu="8", memory="8Gi"), node("n-skew", cpu="8", memory="8Gi"),
               pod("x", None, cpu="4", memory="100Mi", node="n-skew", phase="Running"),
               pod("pg-w-0", "pg", cpu="1", memory="1Gi")]
    ssn, task = scene(*objects)
    scores = {name: sum(fn(task, ssn.nodes[name]) for fn in ssn.scorers) for name in ("n-empty", "n-skew")}
    assert scores["n-empty"] > scores["n-skew"]
    cluster = Cluster(queue(), podgroup("pg", 1, phase="Inqueue"), *objects)
    assert cluster.session().binds[0].node == "n-empty"


def preferred(*terms: tuple) -> dict:
    """Preferred node affinity terms: (weight, {label: value}) each."""
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": w, "preference": {"matchExpressions": [{"key": k, "operator": "In", "values": [v]}
                                                          for k, v in labels.items()]}} for w, labels in terms]}}


def placed(*nodes: dict, config: dict | None = None, **pod_args) -> str:
    cluster = Cluster(queue(), *nodes, podgroup("pg", 1, phase="Inqueue"), pod("pg-w-0", "pg", **pod_args),
                      config=config)
    [bind] = cluster.session().binds
    return bind.node


def nodeorder_config(**arguments) -> dict:
    return {"actions": "enqueue, allocate, backfill",
            "tiers": [{"plugins": [{"name": "gang"}, {"name": "predicates"}, {"name": "proportion"},
                                   {"name": "nodeorder", "arguments": arguments}]}]}


ZONES = [node("n1", labels={"zone": "a", "gen": "3"}), node("n2", labels={"zone": "b", "gen": "5"})]
PREFER = {"key": "spot", "value": "yes", "effect": "PreferNoSchedule"}


@pytest.mark.parametrize(
    ("nodes", "pod_args", "config", "expected"),
    [
        (ZONES, {}, None, "n1"),  # equal: the smaller name
        (ZONES, {"affinity": preferred((10, {"zone": "b"}))}, None, "n2"),
        (ZONES, {"affinity": preferred((1, {"zone": "a"}), (5, {"gen": "5"}))}, None, "n2"),
        (ZONES, {"affinity": preferred((5, {"zone": "a"}), (1, {"gen": "5"}))}, None, "n1"),
        (ZONES, {"affinity": preferred((0, {"zone": "b"}))}, None, "n1"),  # weight 0: no-op
        (ZONES, {"affinity": preferred((10, {"zone": "b"}))}, nodeorder_config(**{"nodeaffinity.weight": 0}), "n1"),
        # 2 x 100 for the preferred node outweighs LeastAllocated's lead of the larger node
        ([node("n1", cpu="64", memory="256Gi", labels={"zone": "a"}), node("n2", labels={"zone": "b"})],
         {"affinity": preferred((1, {"zone": "b"}))}, None, "n2"),
        ([node("n1", taints=[PREFER]), node("n2")], {}, None, "n2"),
        ([node("n1", taints=[PREFER]), node("n2")], {"tolerations": [{"key": "spot", "operator": "Exists"}]}, None, "n1"),
        ([node("n1", taints=[PREFER]), node("n2")],
         {"tolerations": [{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]}, None, "n2"),
        ([node("n1", taints=[PREFER]), node("n2")], {}, nodeorder_config(**{"tainttoleration.weight": 0}), "n1"),
        ([node("n1", taints=[PREFER]), node("n2", taints=[PREFER, {**PREFER, "key": "old"}])], {}, None, "n1"),
    ],
)
def test_preferred_node_affinity_and_prefer_no_schedule_scores(nodes, pod_args, config, expected):
    assert placed(*nodes, config=config, **pod_args) == expected


def test_batch_scored_tasks_choose_as_the_scan_and_the_index_would():
    objects = [queue(), *(node(f"n{i}", labels={"zone": "abc"[i % 3]}, taints=[PREFER] if i % 4 == 0 else None)
                          for i in range(12))]
    for j in range(8):
        kw = {"affinity": preferred((3, {"zone": "c"}))} if j % 2 else {}
        objects += [podgroup(f"j{j}", 2, phase="Inqueue")] + [pod(f"j{j}-w-{i}", f"j{j}", role="w", **kw)
                                                              for i in range(2)]
    fast, _ = Cluster(*objects).indexed_and_scanned()
    assert len(fast.binds) == 16
    assert all(int(b.node[1:]) % 4 for b in fast.binds)  # no pod on a PreferNoSchedule node while others fit
