"""The node index answering for tasks scored by PodTopologySpread's ScheduleAnyway constraints (their own or
the system-default ones a Service gives them; `NodeIndex.choose_spread`): the same placements, the same
outputs byte for byte, as the scan over the candidates (`index_nodes=False`), on seeded random clusters
that reach every branch (more than 100 nodes, so the window from the rotating offset wraps; nodes without
a zone or a hostname label; pods already on nodes, so touched nodes; pods being deleted, so the
FutureIdle gradient; own constraints requiring their keys), and on the benchmark's services mix."""

from __future__ import annotations

import math
import random

import msgspec
import pytest
import yaml

from statemachines.scheduler.actions import nodeindex
from statemachines.scheduler.actions.nodeindex import NodeIndex, _least_addend, _without
from statemachines.scheduler.actions.segtree import NONE, Tree
from statemachines.scheduler.config import DEFAULT_CONFIG_YAML, config_from_dict
from statemachines.scheduler.session import run_session
from tests.sched_builders import Cluster, node, pod, podgroup, queue
from tests.test_sched_default_spread import service

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def random_cluster(seed: int) -> Cluster:
    rng = random.Random(seed)
    n_nodes = rng.choice([12, 30, 130, 260])
    zones = ["z0", "z1", "z2", "z3"][: rng.randint(1, 4)]
    objects = [queue(f"q{i}", rng.randint(1, 3)) for i in range(2)]
    for i in range(n_nodes):
        name = f"n{i:03d}"
        labels = {"rack": rng.choice("rs")}
        if rng.random() < 0.9:
            labels[HOST] = name
        if rng.random() < 0.85:
            labels[ZONE] = rng.choice(zones)
        objects.append(node(name, cpu=str(rng.choice([2, 4, 8])), memory=f"{rng.choice([4, 8, 16])}Gi",
                            pods=str(rng.choice([4, 110])), labels=labels))
    for j in range(rng.randint(6, 40)):
        name = f"job{j:02d}"
        size = rng.randint(1, 7)
        labels = {"app": name, "tier": rng.choice("ab")}
        kind = rng.random()
        if kind < 0.5:
            objects.append(service(name, {"app": name}))
        elif kind < 0.6:
            objects.append(service(f"{name}-tier", {"tier": labels["tier"]}))
        objects.append(podgroup(name, rng.randint(0, size), queue=f"q{rng.randint(0, 1)}", phase="Inqueue",
                                created=f"2026-01-01T00:00:{j:02d}Z"))
        cpu = rng.choice(["250m", "500m", "1", "1500m", "3"])
        memory = rng.choice(["256Mi", "1Gi", "3Gi"])
        own = None
        if 0.6 <= kind < 0.75:
            key = rng.choice([ZONE, HOST, "rack"])
            own = [{"maxSkew": rng.randint(1, 3), "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway",
                    "labelSelector": {"matchLabels": {"app": name}}}]
            if rng.random() < 0.5:
                own.append({"maxSkew": 1, "topologyKey": rng.choice([ZONE, HOST]),
                            "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": name}}})
        hard: dict = {}  # filters that depend on the pods placed so far: the index masks the nodes they fail
        if kind < 0.5 and rng.random() < 0.3:
            hard["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": name}}, "topologyKey": rng.choice([HOST, "rack"])}]}}
        elif own and rng.random() < 0.4:
            own = [*own, {"maxSkew": 2, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                          "labelSelector": {"matchLabels": {"app": name}}}]
        for k in range(size):
            running = rng.random() < 0.25
            p = pod(f"{name}-w-{k}", name, cpu=cpu, memory=memory, role=rng.choice(["w", "w", "ps"]), labels=labels,
                    node=f"n{rng.randrange(n_nodes):03d}" if running else "", phase="Running" if running else "Pending",
                    deleting=running and rng.random() < 0.3)
            if own:
                p["spec"]["topologySpreadConstraints"] = own
            p["spec"].update(hard)
            objects.append(p)
    return Cluster(*objects)


@pytest.fixture
def spread_choices(monkeypatch):
    """How many choices the index made for spread-scored tasks (a spy: the method itself runs)."""
    calls = []
    real = NodeIndex.choose_spread

    def spy(self, fact, scorer, masked=None):
        found = real(self, fact, scorer, masked)
        calls.append((found is not None, bool(masked)))
        return found

    monkeypatch.setattr(nodeindex.NodeIndex, "choose_spread", spy)
    return calls


MASKED: list[bool] = []


def no_error_cache():
    data = yaml.safe_load(DEFAULT_CONFIG_YAML)
    data["configurations"] = [{"name": "allocate", "arguments": {"predicateErrorCacheEnable": False}}]
    return config_from_dict(data, source="test")


@pytest.mark.parametrize("seed", range(40))
def test_the_index_places_spread_scored_tasks_as_the_scan(seed, spread_choices):
    """The same binds; with allocate's predicate error cache off, the same outputs byte for byte. With it
    on (Volcano's default) a fit error may name a node's reason as the node shows it now where the scan
    kept the one an earlier task of the role found (docs/scheduler.md), as with the hard filters."""
    snapshot = random_cluster(seed).cache.snapshot()
    for config in (Cluster().config, no_error_cache()):
        fast = run_session(snapshot, config, seq=1, number=1, time="t")
        slow = run_session(snapshot, config, seq=1, number=1, time="t", index_nodes=False)
        assert [(b.name, b.node) for b in fast.binds] == [(b.name, b.node) for b in slow.binds]
    assert msgspec.json.encode(fast.outputs) == msgspec.json.encode(slow.outputs)
    assert any(found for found, _ in spread_choices)  # the index answered
    MASKED.append(any(found and masked for found, masked in spread_choices))


def test_the_random_clusters_mask_nodes_for_spread_scored_tasks():
    # the seeds above (run first) include tasks with a required anti-affinity or a hard spread too
    assert len(MASKED) == 40 and sum(MASKED) >= 10


def test_the_index_places_the_benchmarks_services_mix_as_the_scan(spread_choices):
    # more than 100 nodes: the rotating offset and the stop after num_to_find feasible nodes apply
    from benchmarks.scheduler import make_objects

    cluster = Cluster()
    for obj in make_objects(150, 120, mix="services"):
        cluster.add(obj)
    fast, slow = cluster.indexed_and_scanned()
    assert len(fast.binds) > 600
    assert fast.outputs == slow.outputs
    assert sum(found for found, _ in spread_choices) > 500


def test_least_addend_is_the_smallest_base_whose_sum_reaches_the_total():
    rng = random.Random(7)
    for _ in range(2000):
        e = float(rng.choice([0, 2, 100, 200, 600])) + rng.choice([0.0, rng.random()])
        base = rng.choice([0.0, 1.0, rng.uniform(0, 400), -rng.uniform(0, 5)])
        total = base + e
        x = _least_addend(total, e)
        assert x + e >= total and math.nextafter(x, -math.inf) + e < total
        assert x <= base


def test_first_at_least_is_the_leftmost_leaf_reaching_the_key():
    rng = random.Random(11)
    for _ in range(200):
        n = rng.randint(1, 40)
        leaves = [(1, (rng.randint(0, 1), float(rng.randint(0, 5)), -i)) if rng.random() < 0.7 else (0, NONE)
                  for i in range(n)]
        tree = Tree(leaves, idle=True)
        lo = rng.randrange(n)
        hi = rng.randint(lo, n)
        key = (rng.randint(0, 1), float(rng.randint(0, 5)), -n)
        expected = next((i for i in range(lo, hi) if leaves[i][1] >= key), None)
        assert tree.first_at_least(lo, hi, key) == expected
        assert tree.idle_in(lo, hi) == sum(1 for f, v in leaves[lo:hi] if f and v[0] == 1)


def test_spans_lose_their_holes():
    assert _without([(0, 5), (8, 10)], [0, 3, 9]) == [(1, 3), (4, 5), (8, 9)]
    assert _without([(0, 2)], None) == [(0, 2)]
    assert _without([(0, 1)], [0]) == []


def test_a_total_equal_only_after_the_float_addition_goes_to_the_smaller_name():
    """Two nodes of one zone whose base scores differ by one unit in the last place, equal once the
    spread score (200, the same for both) is added: the scan keeps the smaller name, and so must the
    index, whose per-zone maximum is the other node. The base scores are a scorer made for the test
    (binpack's fractions can meet this, but not on demand)."""
    from statemachines.scheduler.actions.placement import Search, best_node
    from statemachines.scheduler.config import DEFAULT_CONFIG
    from statemachines.scheduler.session import open_session

    objects = [queue(), *(node(f"n{i}", labels={HOST: f"n{i}", ZONE: "z"}) for i in range(3)),
               service("s", {"app": "a"}), podgroup("pg", 1, phase="Inqueue"),
               pod("pg-w-0", "pg", labels={"app": "a"})]
    ssn = open_session(Cluster(*objects).cache.snapshot(), DEFAULT_CONFIG, uid="u", number=1, seq=1, time="t")
    top = 150.0
    base = {0: math.nextafter(top, -math.inf), 1: top, 2: top - 10}
    assert base[0] < base[1] and base[0] + 200.0 == base[1] + 200.0
    ssn.scorers[:] = [lambda task, n: base[n.index]]
    task = ssn.jobs["default/pg"].tasks["uid-pg-w-0"]
    candidates, _ = Search(ssn, True).predicate_nodes(task, ssn.node_list)
    assert best_node(ssn, task, candidates).name == "n0"
    assert NodeIndex(ssn, task).choose_spread(task.fact, ssn.spread_scorer).name == "n0"
