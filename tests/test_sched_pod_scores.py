"""nodeorder's InterPodAffinity and PodTopologySpread scores (Volcano's BatchNodeOrder over kube-scheduler's
`interpodaffinity/scoring.go` and `podtopologyspread/scoring.go`): where a pod with preferred pod
(anti-)affinity or a ScheduleAnyway spread constraint lands, the weights `podaffinity.weight` and
`podtopologyspread.weight`, and normalized scores checked against kube-scheduler's own scoring tests
(`TestPreferredAffinity`, `TestPodTopologySpreadScore`)."""

from __future__ import annotations

import pytest

from statemachines.scheduler.actions.placement import batch_scores
from statemachines.scheduler.config import DEFAULT_CONFIG, config_from_dict
from statemachines.scheduler.plugins.nodeorder import SpreadScorer, pod_affinity
from statemachines.scheduler.session import open_session
from tests.sched_builders import Cluster, node, pod, podgroup, queue

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def zoned(name: str, zone: str, cpu: str = "8", memory: str = "32Gi") -> dict:
    return node(name, cpu=cpu, memory=memory, labels={HOST: name, ZONE: zone})


def term(selector: dict, key: str, weight: int = 1) -> dict:
    return {"weight": weight, "podAffinityTerm": {"labelSelector": selector, "topologyKey": key}}


def labels_in(**labels: str) -> dict:
    return {"matchLabels": labels}


def preferred(*terms: dict, anti: bool = False) -> dict:
    return {"podAntiAffinity" if anti else "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def soft_spread(selector: dict, key: str = ZONE, max_skew: int = 1) -> list:
    return [{"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": selector}]


def running(name: str, node_name: str, labels: dict, **kw) -> dict:
    return pod(name, None, node=node_name, phase="Running", labels=labels, **kw)


def spec(p: dict, **fields) -> dict:
    p["spec"].update(fields)
    return p


def config(**arguments) -> dict:
    return {"actions": "enqueue, allocate, backfill",
            "tiers": [{"plugins": [{"name": "gang"}, {"name": "predicates"}, {"name": "proportion"},
                                   {"name": "nodeorder", "arguments": arguments}]}]}


def binds(*objects: dict, members: int = 1, conf: dict | None = None) -> list[str]:
    """The nodes the job `pg`'s pods are bound to, in bind order."""
    cluster = Cluster(queue(), podgroup("pg", members, phase="Inqueue"), *objects, config=conf)
    result = cluster.session()
    return [b.node for b in result.binds]


APP_A = {"app": "a"}
TWO = [zoned("n1", "za"), zoned("n2", "zb")]
# the same load on both nodes, so that the resource scores tie and the name would choose n1
LOADED = [*TWO, running("a-0", "n1", APP_A), running("b-0", "n2", {"app": "b"})]
TEAMS = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"team": team}}}
         for name, team in (("default", "z"), ("tx", "x"), ("ty", "y"))]


@pytest.mark.parametrize(
    ("objects", "incoming", "expected"),
    [
        # preferred affinity to app=a in its zone: n1 (ties: n1 anyway), to app=b: n2
        (LOADED, {"affinity": preferred(term(labels_in(app="b"), ZONE))}, "n2"),
        # preferred anti-affinity to app=a on the host: away from n1
        (LOADED, {"affinity": preferred(term(labels_in(app="a"), HOST), anti=True)}, "n2"),
        # affinity w2 to app=b's zone against anti-affinity w3 to app=a's... the larger sum wins
        (LOADED, {"affinity": {**preferred(term(labels_in(app="b"), ZONE, 2)),
                               **preferred(term(labels_in(app="a"), ZONE, 3), anti=True)}}, "n2"),
        (LOADED, {"affinity": {**preferred(term(labels_in(app="a"), ZONE, 3)),
                               **preferred(term(labels_in(app="b"), ZONE, 2), anti=True)}}, "n1"),
        # a term of another namespace's pods (namespaces) and of every namespace (empty namespaceSelector)
        ([*TWO, running("a-0", "n1", APP_A), running("b-0", "n2", {"app": "b"}, namespace="other")],
         {"affinity": preferred({"weight": 1, "podAffinityTerm": {"labelSelector": labels_in(app="b"),
                                                                   "topologyKey": HOST, "namespaces": ["other"]}})},
         "n2"),
        ([*TWO, running("a-0", "n1", APP_A), running("b-0", "n2", {"app": "b"}, namespace="other")],
         {"affinity": preferred(term(labels_in(app="b"), HOST))}, "n1"),  # default namespace only: no match
        ([*TWO, running("a-0", "n1", APP_A), running("b-0", "n2", {"app": "b"}, namespace="other")],
         {"affinity": preferred({"weight": 1, "podAffinityTerm": {"labelSelector": labels_in(app="b"),
                                                                   "topologyKey": HOST, "namespaceSelector": {}}})},
         "n2"),
        # a namespaceSelector: the pods of the namespaces whose labels it matches
        ([*TEAMS, *TWO, running("a-0", "n1", APP_A, namespace="tx"), running("b-0", "n2", APP_A, namespace="ty")],
         {"affinity": preferred({"weight": 1, "podAffinityTerm": {"labelSelector": labels_in(app="a"),
                                                                   "topologyKey": HOST,
                                                                   "namespaceSelector": labels_in(team="y")}})},
         "n2"),
        ([*TEAMS, *TWO, running("a-0", "n1", APP_A, namespace="tx"), running("b-0", "n2", APP_A, namespace="ty")],
         {"affinity": preferred({"weight": 1, "podAffinityTerm": {"labelSelector": labels_in(app="a"),
                                                                   "topologyKey": HOST,
                                                                   "namespaceSelector": labels_in(team="x")}},
                                anti=True)},
         "n2"),
        # a pod being deleted does not count
        ([*TWO, running("a-0", "n1", APP_A), running("b-0", "n2", {"app": "b"}, deleting=True)],
         {"affinity": preferred(term(labels_in(app="b"), HOST))}, "n1"),
    ],
)
def test_preferred_pod_affinity_decides_the_node(objects, incoming, expected):
    assert binds(*objects, spec(pod("pg-w-0", "pg"), **incoming)) == [expected]


def test_the_placed_pods_preferred_terms_pull_and_push_a_matching_pod():
    # symmetry: the incoming pod has no terms; a placed pod's preferred affinity to app=x draws it
    pulling = running("b-0", "n2", {"app": "b"}, affinity=preferred(term(labels_in(app="x"), ZONE)))
    assert binds(*TWO, running("a-0", "n1", APP_A), pulling, pod("pg-w-0", "pg", labels={"app": "x"})) == ["n2"]
    assert binds(*TWO, running("a-0", "n1", APP_A), pulling, pod("pg-w-0", "pg", labels={"app": "y"})) == ["n1"]
    pushing = running("a-0", "n1", APP_A, affinity=preferred(term(labels_in(app="x"), HOST), anti=True))
    assert binds(*TWO, pushing, running("b-0", "n2", {"app": "b"}), pod("pg-w-0", "pg", labels={"app": "x"})) == ["n2"]


def test_a_placed_pods_preferred_term_with_a_namespace_selector_reads_the_incoming_pods_namespace():
    pulling = running("b-0", "n2", {"app": "b"}, namespace="tx", affinity=preferred(
        {"weight": 5, "podAffinityTerm": {"labelSelector": labels_in(app="x"), "topologyKey": HOST,
                                          "namespaceSelector": labels_in(team="z")}}))
    assert binds(*TEAMS, *TWO, running("a-0", "n1", APP_A), pulling, pod("pg-w-0", "pg", labels={"app": "x"})) == ["n2"]
    other = [t for t in TEAMS if t["metadata"]["name"] != "default"] + [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "labels": {"team": "w"}}}]
    assert binds(*other, *TWO, running("a-0", "n1", APP_A), pulling, pod("pg-w-0", "pg", labels={"app": "x"})) == ["n1"]


def test_pods_placed_earlier_in_the_session_count_for_preferred_affinity():
    # one gang of three with a preferred affinity to its own pods on the host: LeastAllocated would
    # spread them over the three empty nodes; the score keeps them together once the first is placed
    together = {"affinity": preferred(term(labels_in(app="t"), HOST, 10))}
    pods = [spec(pod(f"pg-w-{i}", "pg", role="w", labels={"app": "t"}), **together) for i in range(3)]
    nodes = [zoned(f"n{i}", "za") for i in (1, 2, 3)]
    assert binds(*nodes, *pods, members=3) == ["n1", "n1", "n1"]
    # and a preferred anti-affinity spreads them, though the first node is much larger
    apart = {"affinity": preferred(term(labels_in(app="t"), HOST, 10), anti=True)}
    pods = [spec(pod(f"pg-w-{i}", "pg", role="w", labels={"app": "t"}), **apart) for i in range(3)]
    nodes = [zoned("n1", "za", cpu="64", memory="256Gi"), zoned("n2", "za"), zoned("n3", "za")]
    assert binds(*nodes, *pods, members=3) == ["n1", "n2", "n3"]


def test_schedule_anyway_spread_decides_the_node():
    # n1 is much larger (LeastAllocated prefers it) but its zone holds the two matching pods
    nodes = [zoned("n1", "za", cpu="64", memory="256Gi"), zoned("n2", "zb")]
    placed = [running("a-0", "n1", APP_A, cpu=None, memory=None), running("a-1", "n1", APP_A, cpu=None, memory=None)]
    incoming = spec(pod("pg-w-0", "pg", labels=APP_A), topologySpreadConstraints=soft_spread(labels_in(app="a")))
    assert binds(*nodes, *placed, incoming) == ["n2"]
    # the selector decides what counts: other pods do not, and an empty selector counts none
    for selector in (labels_in(app="b"), {}):
        incoming = spec(pod("pg-w-0", "pg", labels=APP_A), topologySpreadConstraints=soft_spread(selector))
        assert binds(*nodes, *placed, incoming) == ["n1"]


def test_pods_placed_earlier_in_the_session_count_for_the_spread_score():
    # a hostname ScheduleAnyway spread over a gang: without it every pod would go to the large n1
    nodes = [zoned("n1", "za", cpu="64", memory="256Gi"), zoned("n2", "za"), zoned("n3", "za")]
    constraint = soft_spread(labels_in(app="t"), HOST)
    pods = [spec(pod(f"pg-w-{i}", "pg", role="w", labels={"app": "t"}), topologySpreadConstraints=constraint)
            for i in range(3)]
    assert binds(*nodes, *pods, members=3) == ["n1", "n2", "n3"]
    plain = [pod(f"pg-w-{i}", "pg", role="w", labels={"app": "t"}) for i in range(3)]
    assert binds(*nodes, *plain, members=3) == ["n1", "n1", "n1"]


def test_a_pod_with_both_hard_and_soft_spread_constraints_is_filtered_and_scored():
    # DoNotSchedule on the zone keeps the pod out of za (2 matching pods against zb's 1); among zb's
    # nodes, the larger n3 (LeastAllocated's choice) holds a matching pod, which the host spread avoids
    nodes = [zoned("n1", "za", cpu="64", memory="256Gi"), zoned("n2", "za"),
             zoned("n3", "zb", cpu="64", memory="256Gi"), zoned("n4", "zb")]
    placed = [running(f"a-{i}", n, APP_A, cpu=None, memory=None) for i, n in enumerate(("n1", "n1", "n3"))]
    hard = {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": labels_in(app="a")}
    both = spec(pod("pg-w-0", "pg", labels=APP_A), topologySpreadConstraints=[hard, *soft_spread(labels_in(app="a"), HOST)])
    assert binds(*nodes, *placed, both) == ["n4"]
    only_hard = spec(pod("pg-w-0", "pg", labels=APP_A), topologySpreadConstraints=[hard])
    assert binds(*nodes, *placed, only_hard) == ["n3"]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({}, ["n2", "n2"]),
        ({"podaffinity.weight": 0}, ["n1", "n2"]),  # the terms are not scored: the name decides
        ({"podtopologyspread.weight": 0}, ["n2", "n1"]),
        ({"podaffinity.weight": 0, "podtopologyspread.weight": 0}, ["n1", "n1"]),
    ],
)
def test_the_weight_arguments_switch_the_scores_off(arguments, expected):
    conf = config(**arguments)
    affine = spec(pod("pg-w-0", "pg"), affinity=preferred(term(labels_in(app="b"), ZONE)))
    spreading = spec(pod("pg-w-0", "pg", labels=APP_A), topologySpreadConstraints=soft_spread(labels_in(app="a")))
    got = [binds(*LOADED, affine, conf=conf)[0], binds(*LOADED, spreading, conf=conf)[0]]
    assert got == expected


def session_task(objects: list[dict], conf=DEFAULT_CONFIG):
    cluster = Cluster(queue(), podgroup("pg", 1, phase="Inqueue"), *objects)
    ssn = open_session(cluster.cache.snapshot(), conf, uid="u", number=1, seq=1, time="t")
    [task] = ssn.jobs["default/pg"].tasks.values()
    return ssn, task


def test_the_weights_multiply_the_normalized_scores():
    affine = spec(pod("pg-w-0", "pg", labels=APP_A), affinity=preferred(term(labels_in(app="b"), ZONE)),
                  topologySpreadConstraints=soft_spread(labels_in(app="a")))
    nodes_of = lambda ssn: [ssn.nodes["n1"], ssn.nodes["n2"]]  # noqa: E731
    ssn, task = session_task([*LOADED, affine])
    assert batch_scores(ssn, task, nodes_of(ssn)) == [0.0, 2 * 100 + 2 * 100]
    weighted = config_from_dict(config(**{"podaffinity.weight": 5, "podtopologyspread.weight": 3}))
    ssn, task = session_task([*LOADED, affine], weighted)
    assert batch_scores(ssn, task, nodes_of(ssn)) == [0.0, 5 * 100 + 3 * 100]


# --- kube-scheduler's TestPreferredAffinity (interpodaffinity/scoring_test.go), hardPodAffinityWeight 0 as
# Volcano configures InterPodAffinity (an empty InterPodAffinityArgs)

def sec(value: str) -> dict:
    return {"security": value}


def expr(*requirements: tuple) -> dict:
    return {"matchExpressions": [{"key": k, "operator": op, **({"values": list(v)} if v else {})}
                                 for k, op, v in requirements]}


STAY_S1_REGION = preferred(term(expr(("security", "In", ["S1"])), "region", 5))
AWAY_S1_AZ = preferred(term(expr(("security", "In", ["S1"])), "az", 5), anti=True)
AWAY_S2_AZ = preferred(term(expr(("security", "In", ["S2"])), "az", 5), anti=True)
STAY_S1_REGION_AWAY_S2_AZ = {**preferred(term(expr(("security", "In", ["S1"])), "region", 8)), **AWAY_S2_AZ}
AFFINITY3 = preferred(term(expr(("security", "NotIn", ["S1"]), ("security", "In", ["S2"])), "region", 8),
                      term(expr(("security", "Exists", None), ("wrongkey", "DoesNotExist", None)), "region", 2))
CHINA, INDIA, AZ1, AZ2 = {"region": "China"}, {"region": "India"}, {"az": "az1"}, {"az": "az2"}


def k8s_pod(name: str, node_name: str, labels: dict, affinity: dict | None = None) -> dict:
    return pod(name, None, node=node_name, phase="Running", labels=labels, affinity=affinity, cpu=None, memory=None)


@pytest.mark.parametrize(
    ("incoming_labels", "affinity", "existing", "nodes", "expected"),
    [
        pytest.param(sec("S1"), AFFINITY3,
                     [("node1", sec("S1"), None), ("node2", sec("S2"), None), ("node3", sec("S1"), None)],
                     [CHINA, INDIA, AZ1], [20, 100, 0],
                     id="Affinity: different Label operators and values for pod affinity scheduling preference"),
        pytest.param(sec("S1"), STAY_S1_REGION,
                     [("node1", sec("S1"), None), ("node2", sec("S2"), None), ("node3", sec("S1"), None)],
                     [CHINA, INDIA, AZ1], [100, 0, 0],
                     id="Affinity: pod that matches topology key & pods in nodes will get high score"),
        pytest.param(sec("S2"), None,
                     [("node1", sec("S1"), AWAY_S2_AZ), ("node2", sec("S2"), AWAY_S1_AZ)],
                     [AZ1, AZ2], [0, 100],
                     id="Anti Affinity symmetry: the existing pods in node which has anti affinity match"),
        pytest.param(sec("S1"), STAY_S1_REGION_AWAY_S2_AZ,
                     [("node1", sec("S1"), None), ("node2", sec("S2"), None),
                      ("node3", {}, STAY_S1_REGION_AWAY_S2_AZ), ("node4", {}, AWAY_S1_AZ)],
                     [CHINA, AZ1, INDIA, AZ2], [100, 0, 100, 0],
                     id="Affinity and Anti Affinity and symmetry"),
    ],
)
def test_normalized_inter_pod_affinity_scores_match_kube_schedulers_test(incoming_labels, affinity, existing, nodes,
                                                                         expected):
    objects = [node(f"node{i + 1}", labels=labels) for i, labels in enumerate(nodes)]
    objects += [k8s_pod(f"e{i}", n, labels, aff) for i, (n, labels, aff) in enumerate(existing)]
    objects.append(pod("pg-w-0", "pg", labels=incoming_labels, affinity=affinity))
    ssn, task = session_task(objects)
    _, score = pod_affinity(ssn, 1)
    assert score(task.fact, [ssn.nodes[f"node{i + 1}"] for i in range(len(nodes))]) == expected


# --- kube-scheduler's TestPodTopologySpreadScore (podtopologyspread/scoring_test.go): `nodes` are the
# candidates, `failed` the other nodes of the cluster; fooSelector / barSelector are `Exists`

FOO = expr(("foo", "Exists", None))
BAR = expr(("bar", "Exists", None))
FOO_BAR = {"foo": "", "bar": ""}


def spread_case(name, constraints, existing, nodes, failed, expected, labels=None):
    return pytest.param(constraints, existing, nodes, failed, expected, labels or {"foo": ""}, id=name)


def zone_host(zone: str | None, host: str | None) -> dict:
    return {**({"zone": zone} if zone else {}), **({HOST: host} if host else {})}


FOUR_IN_TWO_ZONES = {"node-a": zone_host("zone1", "node-a"), "node-b": zone_host("zone1", "node-b"),
                     "node-x": zone_host("zone2", "node-x"), "node-y": zone_host("zone2", "node-y")}
SPREAD_4_2_1_3 = [("node-a", {"foo": ""})] * 4 + [("node-b", {"foo": ""})] * 2 + [("node-x", {"foo": ""})] + \
    [("node-y", {"foo": ""})] * 3


@pytest.mark.parametrize(
    ("constraints", "existing", "nodes", "failed", "expected", "incoming_labels"),
    [
        spread_case("one constraint on node, 3 out of 4 nodes are candidates",
                    [(1, HOST, FOO)], SPREAD_4_2_1_3,
                    {n: {HOST: n} for n in ("node-a", "node-b", "node-x")}, {"node-y": {HOST: "node-y"}},
                    [33, 83, 100]),
        spread_case("one constraint on node, 3 out of 4 nodes are candidates, one node doesn't match topology key",
                    [(1, HOST, FOO)], SPREAD_4_2_1_3,
                    {"node-a": {HOST: "node-a"}, "node-b": {"n": "node-b"}, "node-x": {HOST: "node-x"}},
                    {"node-y": {HOST: "node-y"}}, [16, 0, 100]),
        spread_case("one constraint on node, null selector",
                    [(1, HOST, None)],
                    [("node-a", {"foo": ""})] * 2 + [("node-b", {"foo": ""})] + [("node-d", {"foo": ""})] * 3,
                    {n: {HOST: n} for n in ("node-a", "node-b", "node-c", "node-d")}, {}, [100, 100, 100, 100]),
        spread_case("one constraint on zone, 3 out of 4 nodes are candidates",
                    [(1, "zone", FOO)], SPREAD_4_2_1_3,
                    {n: FOUR_IN_TWO_ZONES[n] for n in ("node-a", "node-b", "node-x")},
                    {"node-y": FOUR_IN_TWO_ZONES["node-y"]}, [75, 75, 100]),
        spread_case("two Constraints on zone and node, 2 out of 4 nodes are candidates",
                    [(1, "zone", FOO), (1, HOST, FOO)],
                    [("node-a", {"foo": ""})] * 2 + [("node-b", {"foo": ""})] + [("node-x", {"foo": ""})] * 2
                    + [("node-y", {"foo": ""})] * 4,
                    {n: FOUR_IN_TWO_ZONES[n] for n in ("node-a", "node-x")},
                    {n: FOUR_IN_TWO_ZONES[n] for n in ("node-b", "node-y")}, [100, 63]),
        spread_case("two Constraints on zone and node, with different labelSelectors",
                    [(1, "zone", FOO), (1, HOST, BAR)],
                    [("node-a", {"foo": ""}), ("node-b", FOO_BAR), ("node-y", {"foo": ""}), ("node-y", {"bar": ""})],
                    FOUR_IN_TWO_ZONES, {}, [60, 20, 100, 60], FOO_BAR),
        spread_case("two Constraints on zone and node, with different labelSelectors, some nodes have 0 pods",
                    [(1, "zone", FOO), (1, HOST, BAR)],
                    [("node-b", {"bar": ""}), ("node-x", {"foo": ""}), ("node-y", FOO_BAR)],
                    FOUR_IN_TWO_ZONES, {}, [100, 60, 40, 0], FOO_BAR),
        spread_case("two Constraints on zone and node, with different labelSelectors, 3 out of 4 nodes are candidates",
                    [(1, "zone", FOO), (1, HOST, BAR)],
                    [("node-a", {"foo": ""}), ("node-b", FOO_BAR), ("node-y", {"foo": ""}), ("node-y", {"bar": ""})],
                    {n: FOUR_IN_TWO_ZONES[n] for n in ("node-a", "node-b", "node-x")},
                    {"node-y": FOUR_IN_TWO_ZONES["node-y"]}, [50, 25, 100], FOO_BAR),
    ],
)
def test_normalized_spread_scores_match_kube_schedulers_test(constraints, existing, nodes, failed, expected,
                                                             incoming_labels):
    objects = [node(name, labels=labels) for name, labels in {**nodes, **failed}.items()]
    objects += [k8s_pod(f"e{i}", n, labels) for i, (n, labels) in enumerate(existing)]
    tsc = [{"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": selector}
           for skew, key, selector in constraints]
    objects.append(spec(pod("pg-w-0", "pg", labels=incoming_labels), topologySpreadConstraints=tsc))
    ssn, task = session_task(objects)
    score = SpreadScorer(ssn, 1).score
    assert score(task.fact, [ssn.nodes[name] for name in nodes]) == expected


def test_scored_tasks_choose_as_the_scan_and_the_index_would():
    objects = [queue(), *(zoned(f"n{i}", "abc"[i % 3]) for i in range(9))]
    for j in range(6):
        kw: dict = {"labels": {"app": f"j{j}"}}
        if j % 3 == 1:
            kw["affinity"] = preferred(term(labels_in(app=f"j{j}"), HOST, 5), anti=True)
        objects.append(podgroup(f"j{j}", 3, phase="Inqueue"))
        for i in range(3):
            p = pod(f"j{j}-w-{i}", f"j{j}", role="w", **kw)
            if j % 3 == 2:
                spec(p, topologySpreadConstraints=soft_spread(labels_in(app=f"j{j}")))
            objects.append(p)
    fast, _ = Cluster(*objects).indexed_and_scanned()
    assert len(fast.binds) == 18
    placed = {j: [b.node for b in fast.binds if b.name.startswith(f"j{j}-")] for j in (1, 2)}
    assert len(set(placed[1])) == 3  # the host anti-affinity: one pod per node
    assert len({int(n[1:]) % 3 for n in placed[2]}) == 3  # the zone spread: one pod per zone
